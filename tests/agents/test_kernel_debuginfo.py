"""Kernel debug info by build-id: VMCOREINFO read from the head of a vmcore (ELF and
makedumpfile's kdump format), the crash kernel's reports carrying the kernel's build-id, and the
reporters' debuginfod client against the live registry's /debuginfod/ (both databases) and
elfutils' own debuginfod, with its credentials, cache and misses."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from flask import Flask
from sqlalchemy import select

from agents.reporter.config import Config
from agents.reporter.debuginfod import Debuginfod
from agents.reporter.vmcoreinfo import kernel_build_id, read_vmcoreinfo
from registry.core.events import Report
from registry.db import Database
from registry.storage.store import open_store
from registry.symbols.keep import Origin, keep_file
from tests.support.agents import Registry, run_reporter
from tests.support.http import auth
from tests.support.symbols import CountingServer, build_id_of, kernel_like_files, start_debuginfod
from tests.support.symbols import counting_server as counting_server
from tests.support.vmcores import BUILD_ID, VMCOREINFO, elf_vmcore


def kdump_vmcore(path: Path, vmcoreinfo: bytes = VMCOREINFO) -> Path:
    """makedumpfile's kdump-compressed format: disk_dump_header, the sub header one block in
    (offset_vmcoreinfo, size_vmcoreinfo), the VMCOREINFO block after it."""
    block = 4096
    header = bytearray(2 * block)
    header[:8] = b"KDUMP   "
    struct.pack_into("<i", header, 8, 6)  # header_version
    struct.pack_into("<i", header, 428, block)
    struct.pack_into("<qQ", header, block + 32, len(header), len(vmcoreinfo))
    path.write_bytes(bytes(header) + vmcoreinfo + bytes(block))
    return path


def other_format(path: Path, vmcoreinfo: bytes = VMCOREINFO) -> Path:
    """A format of its own (say, one libkdumpfile reads) with VMCOREINFO in its head."""
    path.write_bytes(b"LKCD" + bytes(8192) + vmcoreinfo + b"\0" + b"\x5a" * 4096)
    return path


@pytest.mark.parametrize("make", [elf_vmcore, kdump_vmcore, other_format], ids=["elf", "kdump", "other"])
def test_vmcoreinfo_is_read_from_the_head_of_a_vmcore(tmp_path: Path, make: Callable[..., Path]) -> None:
    info = read_vmcoreinfo(str(make(tmp_path / "vmcore")))
    assert (info["OSRELEASE"], info["KERNELOFFSET"]) == ("6.1.0-57-cloud-amd64", "35000000")
    assert kernel_build_id(info) == BUILD_ID


def test_a_vmcore_without_a_usable_build_id_gives_none(tmp_path: Path) -> None:
    assert read_vmcoreinfo(str(tmp_path / "missing")) == {}
    (tmp_path / "text").write_text("BUILD-ID=" + BUILD_ID)
    assert read_vmcoreinfo(str(tmp_path / "text")) == {}  # no VMCOREINFO block (it starts at OSRELEASE=)
    (tmp_path / "cut").write_bytes(b"KDUMP   " + bytes(100))
    assert read_vmcoreinfo(str(tmp_path / "cut")) == {}
    assert read_vmcoreinfo(str(elf_vmcore(tmp_path / "no-note", None))) == {}
    old_kernel = read_vmcoreinfo(str(elf_vmcore(tmp_path / "old", b"OSRELEASE=5.4.0-1-amd64\n")))
    assert old_kernel == {"OSRELEASE": "5.4.0-1-amd64"} and kernel_build_id(old_kernel) is None
    assert kernel_build_id({"BUILD-ID": "01d2xx"}) is None
    assert kernel_build_id({"BUILD-ID": "ABC"}) is None  # odd: not whole bytes
    assert kernel_build_id({"BUILD-ID": BUILD_ID.upper()}) == BUILD_ID


def stored_payload(database: Database, report_id: str) -> dict:
    with database.session() as session:
        return session.scalars(select(Report.payload).where(Report.report_id == report_id)).one()


def test_the_crash_kernels_reports_carry_the_kernels_build_id(
    registry: Registry, make_site, run_sh, database: Database, tmp_path: Path
) -> None:
    """The sh reporter reads /proc/vmcore's first MiB, the pyz its notes: the same build-id."""
    vmcore = elf_vmcore(tmp_path / "vmcore")
    sh_site = make_site(extra={"CRASHREG_VMCORE": str(vmcore)})
    assert run_sh(sh_site).returncode == 0
    assert stored_payload(database, f"kdump-{sh_site.boot_id}")["kernel_build_id"] == BUILD_ID
    pyz_site = make_site(extra={"CRASHREG_VMCORE": str(vmcore)})
    assert run_reporter(pyz_site, "report").returncode == 0
    assert stored_payload(database, f"kdump-{pyz_site.boot_id}")["kernel_build_id"] == BUILD_ID

    old = make_site(extra={"CRASHREG_VMCORE": str(elf_vmcore(tmp_path / "old", b"OSRELEASE=5.4.0-1\n"))})
    assert run_sh(old).returncode == 0
    assert "kernel_build_id" not in stored_payload(database, f"kdump-{old.boot_id}")


def test_the_crash_kernels_reports_are_dated_by_the_crash_and_a_rerun_sends_the_same_body(
    registry: Registry, make_site, run_sh, database: Database, tmp_path: Path
) -> None:
    """VMCOREINFO's CRASHTIME (the crashed kernel's clock as it crashed) dates the report, for
    both reporters: a rerun whose kept copy in sent/ is gone (a spool that could not be
    written) sends the first run's body again and gets its answer, where a body dated by the
    rerun's own clock was a 409 and a fallback decision. A CRASHTIME far from the crash
    kernel's clock (a crashed RTC) is not used: the report is dated now, as before."""
    crashed = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=7)
    timed = VMCOREINFO + f"CRASHTIME={int(crashed.timestamp())}\n".encode()
    vmcore = elf_vmcore(tmp_path / "vmcore", timed)
    for name, run in (("sh", run_sh), ("pyz", lambda site: run_reporter(site, "report"))):
        site = make_site(extra={"CRASHREG_VMCORE": str(vmcore)})
        first = run(site)
        assert first.returncode == 0, first.stderr
        report_id = f"kdump-{site.boot_id}"
        dated = stored_payload(database, report_id)["crashed_at"]
        assert dated == crashed.strftime("%Y-%m-%dT%H:%M:%SZ"), name
        event_id = site.decision()["CRASHREG_EVENT_ID"]
        (site.spool / "sent" / f"{report_id}.json").unlink()
        rerun = run(site)
        assert rerun.returncode == 0, rerun.stderr
        assert (site.decision()["CRASHREG_DECIDED_BY"], site.decision()["CRASHREG_EVENT_ID"]) == (
            "registry", event_id), (name, rerun.stderr)
        assert not list((site.spool / "rejected").glob("*")), name

    reset_clock = elf_vmcore(tmp_path / "reset", VMCOREINFO + b"CRASHTIME=86400\n")
    for name, run in (("sh", run_sh), ("pyz", lambda site: run_reporter(site, "report"))):
        site = make_site(extra={"CRASHREG_VMCORE": str(reset_clock)})
        run(site)  # a skip by now: the bug has had its full captures
        dated = datetime.fromisoformat(stored_payload(database, f"kdump-{site.boot_id}")["crashed_at"])
        assert dated > crashed, name


def test_the_registry_checks_the_kernel_build_id_and_keeps_the_dpu_object(registry: Registry) -> None:
    base = {"source": "dpu", "crashed_at": "2026-12-01T10:00:00Z", "host": {"hostname": "gpu-k1"},
            "console_log": "[   1.0] BUG: kernel NULL pointer dereference, address: 0000000000000000\n"}
    bad = registry.post_report(
        json.dumps(base | {"report_id": "dpu-bad", "kernel_build_id": "vmlinux"}).encode())
    assert bad.status_code == 400 and "kernel_build_id" in bad.json()["error"]["fields"], bad.text
    good = registry.post_report(json.dumps(base | {
        "report_id": "dpu-good", "kernel_build_id": BUILD_ID,
        "dpu": {"debug_info": {"kernel": {"build_id": BUILD_ID, "from": "debuginfod"}, "modules": []}},
    }).encode())
    assert good.status_code == 201, good.text
    assert not any("kernel_build_id" in w or "dpu" in w for w in good.json().get("warnings", [])), good.json()


# --- the debuginfod client -------------------------------------------------------------------


@pytest.fixture
def uploaded(app: Flask, database: Database, live_server: str, tmp_path: Path) -> dict[str, Path]:
    """The kernel-like files kept in the live registry's store, as `crashreg symbols upload` keeps
    them: the store takes an ET_REL module and an ET_EXEC vmlinux by their build-id notes."""
    files = kernel_like_files(tmp_path / "build")
    settings = app.extensions["crashreg.settings"]
    app.extensions["crashreg.settings"] = replace(settings, public_url=live_server)
    store = open_store(settings.dump_store, live_server)
    for path in files.values():
        kept = keep_file(database, store, path, Origin("upload", "ci"))
        assert kept.new_kinds == ("debuginfo", "executable")
    return files


def client_for(registry: Registry | None, tmp_path: Path, **values: str) -> Debuginfod:
    """The client as a DPU's reporter.conf makes it: the registry's URL and report token (None:
    no registry), and the debuginfod keys given."""
    token = tmp_path / "report-token"
    token.write_text(registry.report_token if registry else "")
    config = Config.from_values({"CRASHREG_URL": registry.url if registry else "",
                                  "CRASHREG_TOKEN_FILE": str(token),
                                  "CRASHREG_DEBUGINFOD_CACHE": str(tmp_path / "cache"),
                                  "CRASHREG_DEBUGINFOD_TIMEOUT": "10"} | values)
    return Debuginfod.from_config(config)


def secret_file(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_a_read_token_fetches_kernel_debug_files_from_the_registry_into_the_cache(
    registry: Registry, uploaded: dict[str, Path], tmp_path: Path
) -> None:
    client = client_for(registry, tmp_path,
                        CRASHREG_DEBUGINFOD_TOKEN_FILE=secret_file(tmp_path / "read", registry.read_token))
    assert client.servers == (f"{registry.url}/debuginfod",)
    for path in uploaded.values():
        build_id = build_id_of(path)
        found = client.find(build_id.upper())
        assert found == tmp_path / "cache" / build_id / "debuginfo"
        assert found.read_bytes() == path.read_bytes()
    # Cached: found again with no server to ask.
    module_id = build_id_of(uploaded["module"])
    offline = client_for(registry, tmp_path, CRASHREG_DEBUGINFOD_URLS="http://127.0.0.1:9/")
    assert offline.find(module_id) == tmp_path / "cache" / module_id / "debuginfo"


def test_a_debuginfod_token_file_with_a_byte_order_mark_and_crlf_is_read_as_its_token(
    registry: Registry, uploaded: dict[str, Path], tmp_path: Path
) -> None:
    """Read as every token file is: the byte-order mark an editor puts before it is left out
    (it was sent, and the header could not even be written)."""
    token_file = tmp_path / "bom-read"
    token_file.write_bytes(b"\xef\xbb\xbf" + registry.read_token.encode() + b"\r\n")
    client = client_for(registry, tmp_path, CRASHREG_DEBUGINFOD_TOKEN_FILE=str(token_file))
    assert client.token == registry.read_token
    assert client.find(build_id_of(uploaded["vmlinux"])) is not None


def test_the_report_token_is_never_a_debuginfod_credential(
    registry: Registry, uploaded: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    build_id = build_id_of(uploaded["vmlinux"])
    # The report token of CRASHREG_TOKEN_FILE is not sent: the registry answers 401.
    assert client_for(registry, tmp_path).find(build_id) is None
    assert "HTTP 401 (no credential" in capfd.readouterr().err
    # Named as the debuginfod credential, the report token is refused: 403.
    wrong = client_for(registry, tmp_path,
                       CRASHREG_DEBUGINFOD_TOKEN_FILE=secret_file(tmp_path / "wrong", registry.report_token))
    assert wrong.find(build_id) is None
    assert "HTTP 403" in capfd.readouterr().err
    assert not (tmp_path / "cache" / build_id).exists() or not any((tmp_path / "cache" / build_id).iterdir())
    # elfutils' headers file with a read token works, for every server.
    headers = secret_file(tmp_path / "headers", f"Authorization: Bearer {registry.read_token}\n")
    assert client_for(registry, tmp_path, CRASHREG_DEBUGINFOD_HEADERS_FILE=headers).find(build_id) is not None
    # The read token goes to the registry's servers only, never to another server.
    other = client_for(registry, tmp_path, CRASHREG_DEBUGINFOD_URLS="http://debuginfod.example/",
                       CRASHREG_DEBUGINFOD_TOKEN_FILE=secret_file(tmp_path / "read", registry.read_token))
    assert "Authorization" not in other.headers_for("http://debuginfod.example")
    assert requests.get(f"{registry.url}/debuginfod/buildid/{build_id}/debuginfo", timeout=30,
                        headers=auth(registry.report_token)).status_code == 403


def test_elfutils_debuginfod_serves_the_client_and_a_miss_is_asked_once(
    tmp_path: Path, counting_server: CountingServer
) -> None:
    files = kernel_like_files(tmp_path / "build")
    served = tmp_path / "served"
    served.mkdir()
    (served / "driver.ko").write_bytes(files["module"].read_bytes())
    module_id = build_id_of(files["module"])
    server = start_debuginfod(served, [module_id], tmp_path / "debuginfod.log")
    try:
        client = client_for(None, tmp_path,
                            CRASHREG_DEBUGINFOD_URLS=f"{counting_server.url} {server.url}")
        found = client.find(module_id)  # the first server has nothing (404), the second has it
        assert found is not None and found.read_bytes() == files["module"].read_bytes()
        assert counting_server.requests == [f"/buildid/{module_id}/debuginfo"]
        missing = "ab" * 20
        assert client.find(missing) is None and client.find(missing) is None
        assert counting_server.requests.count(f"/buildid/{missing}/debuginfo") == 1  # not asked again
    finally:
        server.process.terminate()
        server.process.wait(timeout=30)


def test_a_registry_still_fetching_the_file_is_asked_again(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The registry answers 503 with Retry-After while its own server is still sending the file
    (docs/symbols.md): the DPU agent asks again as told and gets it, where it reported nothing."""
    files = kernel_like_files(tmp_path / "build")
    busy = CountingServer(files["module"].read_bytes(), busy=2)
    try:
        client = client_for(None, tmp_path, CRASHREG_DEBUGINFOD_URLS=busy.url)
        found = client.find(build_id_of(files["module"]))
    finally:
        busy.stop()
    assert found is not None and found.read_bytes() == files["module"].read_bytes()
    assert len(busy.requests) == 3
    assert capfd.readouterr().err.count("HTTP 503, still fetching: asked again in 0 s") == 2


def test_a_file_of_another_build_is_not_kept_and_a_silent_server_times_out(
    tmp_path: Path, counting_server: CountingServer
) -> None:
    files = kernel_like_files(tmp_path / "build")
    counting_server.body = files["vmlinux"].read_bytes()  # whatever is asked, the vmlinux
    module_id = build_id_of(files["module"])
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts connections, never answers
        client = client_for(None, tmp_path, CRASHREG_DEBUGINFOD_TIMEOUT="0.5",
                            CRASHREG_DEBUGINFOD_URLS=f"http://127.0.0.1:{silent.getsockname()[1]} "
                                                     f"{counting_server.url}")
        assert client.find(module_id) is None
    assert counting_server.requests == [f"/buildid/{module_id}/debuginfo"]  # tried after the timeout
    assert list((tmp_path / "cache").rglob("*")) in ([], [tmp_path / "cache" / module_id])
