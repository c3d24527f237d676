"""`crashreg demo`: simulate, ingest over real HTTP, analyse, print, serve."""

from __future__ import annotations

import html
import json
import re
import socket
import threading
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select
from werkzeug.serving import make_server

from registry.app import create_app
from registry.capture.models import Capture
from registry.cli import main
from registry.config import Settings
from registry.core.events import Event, Report
from registry.core.signatures import Signature
from registry.db import Database
from registry.demo.command import FOREIGN_REPORTS_TOLERATED
from registry.demo.labelled_cores import ARCHIVE, STACKS, read_cores
from registry.epidemiology.models import EpidemiologyVerdict
from registry.fingerprint import analyse_report
from scripts import demo_cores
from testkit.pages import login

pytestmark = pytest.mark.slow  # a whole demo per test: run early (tests/conftest.py)
DEMO = ["demo", "--no-serve", "--physical-per-cluster", "10", "--seed", "3"]


def _demo(db_url: str, monkeypatch, port: int) -> str:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CRASHREG_DATABASE_URL", db_url)
    monkeypatch.delenv("CRASHREG_PUBLIC_URL", raising=False)  # it would name the registry to feed
    result = CliRunner().invoke(main, [*DEMO, "--port", str(port)])
    assert result.exit_code == 0, result.output
    return result.output


def test_demo_feeds_the_api_and_prints_what_managers_and_engineers_want(db_url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Its port taken by something other than a registry, the demo serves on a free port and
    says so (one demo run checks both: a run is most of this file's time)."""
    before = datetime.now(UTC).strftime("%Y-%m-%d")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _demo(db_url, monkeypatch, port)
    assert "Ingesting crashes through the API" in out
    assert "== For the manager ==" in out and "== For the engineer" in out
    assert re.search(r"\d+ crashes on \d+ hosts in \d+ signatures", out)
    assert "single-host: physical_host=" in out
    assert "hardware-config: bios_version=2.1.4" in out
    assert "never on nodes up more than 3 days" in out
    assert "== Suspect physical hosts" in out and "distinct signatures" in out
    # anchored to today: the fleet's last crashes are today's
    days = {before, datetime.now(UTC).strftime("%Y-%m-%d")}  # the run may cross midnight
    assert re.search(rf"90 days up to ({'|'.join(days)}) \d\d:00 UTC", out)
    # a mixed signature and how to read it
    mixed = out[out.index("== A mixed signature, and how to read it ==") :]
    assert "SIGSEGV (return-to-null, segfault) in ingest::ring_buffer_commit" in mixed.splitlines()[1]
    assert "- software: a mixture: physical host " in mixed
    assert "running ingest-worker" in mixed and "How to read it: two bugs under one signature" in mixed
    # the race is told apart by its processes' age, read from the reports' stacks
    assert re.search(r"- process up under 15 minutes: \d+ of \d+ crashes, where \d+% of the program's", mixed)
    token = re.search(r"Read token: (\S+)", out).group(1)
    url = re.search(r"Registry: (http://\S+)", out).group(1)
    assert url.startswith("http://127.0.0.1:") and token.startswith("crs_")
    assert url != f"http://127.0.0.1:{port}"
    assert f"port {port} is taken by another server: serving on the free port {url.rsplit(':', 1)[1]}" in out
    # --no-serve stopped the server; the read token it printed works on the same data
    client = create_app(Settings(database_url=db_url)).test_client()
    headers = {"Authorization": f"Bearer {token}"}
    listed = client.get("/api/v1/epidemiology/hosts", headers=headers)
    assert listed.status_code == 200 and listed.json["hosts"]
    _the_page_says_what_the_demo_printed(db_url, out, token)
    _each_headline_is_what_carries_the_verdict(db_url, out)
    _the_mixed_signature_is_read_from_real_cores(db_url, out)


def _the_page_says_what_the_demo_printed(db_url: str, out: str, token: str) -> None:
    """A registry started afterwards on the same database, configured as `make run` is (no
    program label in its environment), shows the mixed signature as the demo printed it: the
    demo left its program label stored in the database."""
    assert "Program label: service (stored in the database" in out
    mixed = out[out.index("== A mixed signature, and how to read it ==") :].splitlines()
    signature_id = re.match(r"\s+#(\d+) ", mixed[1]).group(1)
    printed = [line.strip()[2:] for line in mixed[2:] if line.strip().startswith("- ")]
    assert any("known from the inventory label service=ingest-worker" in line for line in printed)
    client = create_app(Settings(database_url=db_url)).test_client()
    login(client, token)
    page = html.unescape(client.get(f"/signatures/{signature_id}").get_data(as_text=True))
    assert [line for line in printed if line not in page] == []


def _each_headline_is_what_carries_the_verdict(db_url: str, out: str) -> None:
    """The engineer's line under each verdict is the evidence the verdict rests on: a spread
    `software` verdict is not headlined by the busiest VM, and the stored top finding (what
    Grafana shows) is the verdict's own finding when it rests on one."""
    engineer = out[out.index("== For the engineer") : out.index("== A mixed signature")]
    headlines = re.findall(r"^      (single-host|hardware-config|software): (.*)$", engineer, re.M)
    assert headlines
    database = Database(db_url)
    with database.session() as session:
        decided = select(EpidemiologyVerdict).where(EpidemiologyVerdict.verdict != "inconclusive")
        stored = {(row.verdict, row.reason): row for row in session.scalars(decided)}
    database.dispose()
    assert sorted(headlines) == sorted(stored)
    for (verdict, reason), row in stored.items():
        finding = row.analysis["verdict_detail"]["finding"]
        if finding is None:  # spread: no single value carries it
            assert verdict == "software" and "spread across" in reason, reason
        else:
            assert (row.top_attribute, row.top_value) == (finding["attribute"], finding["value"])
            assert reason.startswith(f"{finding['attribute']}={finding['value']} carries")
            assert finding["in_signature"] >= 0.5


def _the_mixed_signature_is_read_from_real_cores(db_url: str, out: str) -> None:
    """The program's crashes carry the stacks file mode reads from the demo's real cores
    (registry/demo/cores/), and the registry labelled them from those stacks: the mixed
    signature is the cores' return to address 0 in ring_buffer_commit, split by the population
    analysis into a part concentrated on one physical host and a spread part; the race's other
    crash (no corruption label) is a signature of its own, spread."""
    cores = read_cores()
    assert f"read from {len(cores)} real cores of it" in out
    read = {core.crash: [] for core in cores}
    for core in cores:
        read[core.crash].append(core.stack)
    mixed = out[out.index("== A mixed signature, and how to read it ==") :].splitlines()
    signature_id = int(re.match(r"\s+#(\d+) ", mixed[1]).group(1))
    database = Database(db_url)
    with database.session() as session:
        signature = session.get(Signature, signature_id)
        assert signature.labels == ["return-to-null", "segfault"]
        assert (signature.function, signature.module) == ("ingest::ring_buffer_commit",
                                                          "ingest-worker")
        verdict = session.scalar(select(EpidemiologyVerdict)
                                 .where(EpidemiologyVerdict.signature_id == signature_id))
        parts = verdict.analysis["components"]
        assert [(part["kind"], part.get("attribute")) for part in parts] == [
            ("concentrated", "physical_host"), ("spread", None)]
        assert parts[1]["verdict"] == "software" and parts[0]["hosts"] < parts[1]["hosts"]
        stacks = session.scalars(select(Report.payload).join(Event, Event.id == Report.event_id)
                                 .where(Event.signature_id == signature_id)).all()
        race = session.scalar(select(Signature)
                              .where(Signature.function.startswith("ingest::chunk_index_merge")))
        race_verdict = session.scalar(select(EpidemiologyVerdict)
                                      .where(EpidemiologyVerdict.signature_id == race.id))
    database.dispose()
    assert len(stacks) == verdict.events == 120
    for payload in stacks:
        stack = payload["stack"]
        assert any(all(stack[key] == core[key] for key in ("frames", "registers", "evidence", "build_id"))
                   for core in read["ring"])
    assert race.labels == ["segfault"] and race_verdict.verdict == "software"
    assert not race_verdict.analysis.get("components")


def test_demo_on_a_port_taken_by_a_registry_on_the_same_database_uses_it(db_url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    server = make_server("127.0.0.1", 0, create_app(Settings(database_url=db_url)), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        out = _demo(db_url, monkeypatch, server.server_port)
    finally:
        server.shutdown()
        thread.join()
    port = server.server_port
    reused = f"(port {port} is taken by a registry on this database: using it)"
    assert f"Registry: http://127.0.0.1:{port} {reused}" in out
    assert "== A mixed signature, and how to read it ==" in out


def test_the_demo_cores_are_made_again_by_their_script_and_read_alike(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`make demo-cores` crashes the program for real and packs what the demo reads: the cores
    it makes give the signatures the archive's cores give (one per crash, both releases)."""
    problem = demo_cores.problem()
    if problem:
        pytest.skip(problem)
    archive = tmp_path / "ingest-worker.tar.xz"
    assert demo_cores.main(["--output", str(archive)]) == 0
    made, kept = read_cores(tmp_path / STACKS.name), read_cores()

    def signatures(cores: list) -> dict:
        found: dict = {}
        for core in cores:
            fingerprint = analyse_report(None, core.stack).fingerprint
            found.setdefault((core.crash, core.release), set()).add(fingerprint)
        return found

    assert signatures(made) == signatures(kept)
    assert len({fingerprint for pair in signatures(kept).values() for fingerprint in pair}) == 2


def test_the_demo_feeds_the_registry_its_public_url_names(db_url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Any port works without --port: the demo feeds the registry CRASHREG_PUBLIC_URL names (as
    `PORT=N make run` sets it), and that registry's pages hold its crashes and captured cores."""
    server = make_server("127.0.0.1", 0, create_app(Settings(database_url=db_url)), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("CRASHREG_DATABASE_URL", db_url)
    monkeypatch.setenv("CRASHREG_PUBLIC_URL", url)
    try:
        result = CliRunner().invoke(main, ["demo", "--no-serve", "--physical-per-cluster", "8"])
    finally:
        server.shutdown()
        thread.join()
    assert result.exit_code == 0, result.output
    assert f"Registry: {url} ({url} serves this database: feeding it)" in result.output
    assert f"curl -H \"Authorization: Bearer $TOKEN\" {url}/api/v1/signatures/" in result.output
    with Database(db_url).session() as session:
        methods = session.scalars(select(Capture.method).join(Event, Event.id == Capture.event_id)
                                  .where(Event.first_source == "userspace")).all()
    assert methods and set(methods) <= {"core", "core_filtered"}


def test_the_stored_stacks_are_what_the_core_reader_reads_from_the_archive() -> None:
    """The demo reads cores/stacks.json (the registry imports no agent): what file mode reads
    from the archive's cores, with the same fingerprints. Frames in the C and C++ libraries are
    left out of the comparison: the archive carries only the program, and file mode reads a
    library from the machine it runs on when the build-ids match, else from the core."""

    def the_archives(stack: dict) -> dict:
        program = stack["executable"]
        return stack | {"frames": [frame for frame in stack["frames"]
                                   if frame.get("module", program) == program]}

    read = demo_cores.read_stacks(ARCHIVE)["cores"]
    stored = json.loads(STACKS.read_text())["cores"]
    assert [entry["core"] for entry in stored] == [entry["core"] for entry in read]
    for kept, now in zip(stored, read, strict=True):
        assert the_archives(kept["stack"]) == the_archives(now["stack"]), kept["core"]
        assert analyse_report(None, kept["stack"]) == analyse_report(None, now["stack"]), kept["core"]


def test_the_demo_refuses_a_registry_in_use(client, make_token, db_url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A database holding more crash reports than a first hour's (here 101 that no demo sent):
    the demo stops before it writes anything, naming the database and the way to feed it
    anyway. Before, it fed an operator's production database a thousand simulated crashes and
    spent its real bugs' capture budgets."""
    headers = {"Authorization": f"Bearer {make_token('report', kind='agent')}"}
    for number in range(FOREIGN_REPORTS_TOLERATED + 1):
        sent = client.post("/api/v1/reports", headers=headers, json={
            "report_id": f"prod-{number}", "source": "crash_kernel", "crashed_at": "2026-12-01T00:00:00Z",
            "host": {"hostname": f"gpu-{number}"}, "console_log": "Kernel panic - not syncing: hung_task"})
        assert sent.status_code == 201, sent.text
    monkeypatch.setenv("CRASHREG_DATABASE_URL", db_url)
    monkeypatch.delenv("CRASHREG_PUBLIC_URL", raising=False)
    result = CliRunner().invoke(main, [*DEMO, "--port", "0"])
    assert result.exit_code == 1
    assert "holds 101 crash reports no demo sent" in result.output and "--into-this-database" in result.output
    with Database(db_url).session() as session:
        assert session.scalar(select(func.count()).select_from(Report)) == FOREIGN_REPORTS_TOLERATED + 1
