"""A userspace crash as an engineer reads it: GET /api/v1/events/{id} and the event page of a
real core's report (the demo program's return to null and null read), on both databases."""

from __future__ import annotations

import re

import pytest

from registry.config import DumpStoreSettings
from registry.storage.store import open_store
from testkit.pages import login
from tests.support.capture import post_capture, report
from tests.support.demo_cores import core_report
from tests.support.http import auth
from tests.support.rca import seed
from tests.support.retention import store_dump

PUBLIC = "http://crashreg.test"


@pytest.fixture
def ring_event(client, make_token, database, settings, tmp_path):  # type: ignore[no-untyped-def]
    """A return to null in ring_buffer_commit, its whole core captured and in the dump store."""
    reporter = make_token("report")
    answer = report(client, reporter, core_report("ring"))
    capture = post_capture(client, reporter, answer["event_id"], method="core", status="completed",
                           bytes=4096, target="/var/lib/crashreg/cores/core-1.core").json
    store_dump(database, open_store(DumpStoreSettings(url=str(tmp_path / "dumps")), settings.public_url),
               capture["id"])
    return answer["event_id"], capture["id"]


def test_the_api_gives_a_userspace_event_signal_labels_frames_registers_fault_process_and_core(
    client, make_token, ring_event
) -> None:  # type: ignore[no-untyped-def]
    event_id, capture_id = ring_event
    body = client.get(f"/api/v1/events/{event_id}", headers=auth(make_token("read"))).json
    crash = body["userspace"]
    assert crash["signal"] == "SIGSEGV" and crash["signal_meaning"] == "invalid memory reference"
    proofs = {label["label"]: label["proof"] for label in crash["labels"]}
    assert list(proofs) == ["return-to-null", "segfault"]
    assert proofs["return-to-null"].startswith("pc 0; the slot `ret` popped (%rsp-8) held 0")
    assert "`ingest::ring_buffer_commit` [ingest-worker], from the red zone" in \
        proofs["return-to-null"]
    assert "si_code SEGV_MAPERR: address not mapped" in proofs["segfault"]
    frames = crash["frames"]
    # frame 0 is the bad pc (no module: not read), then the function that returned (red zone)
    assert frames[0]["index"] == 0 and frames[0]["address"] == "0x0" and frames[0]["decision"] is None
    guilty = frames[crash["guilty"]]
    assert crash["guilty"] == 1 and guilty["index"] is None and guilty["decision"] == "guilty"
    assert guilty["function"] == "ingest::ring_buffer_commit"
    read = [f for f in frames if f["index"] is not None]
    assert [f["index"] for f in read] == list(range(len(read)))  # every frame sent, in order
    unnamed = [f for f in read if f["module"] and not f["function"]]
    assert unnamed and all(f["offset"] and f["build_id"] and f["decision"] == "skipped"
                           and f["rule"] == "userspace-runtime" for f in unnamed)
    # std::thread's invoker, compiled into the program, is the C++ runtime's code
    assert read[1]["module"].endswith("/ingest-worker") and read[1]["function"].startswith("std::thread::")
    assert (read[1]["decision"], read[1]["rule"]) == ("skipped", "userspace-runtime")
    assert crash["registers"]["rip"] == "0x0" and "rsp" in crash["registers"]
    assert crash["fault"] | {"pc_mapping": None} == {
        "pc": "0x0", "pc_mapping": None, "si_addr": "0x0", "si_code": 1, "si_code_name": "SEGV_MAPERR",
        "si_code_meaning": "address not mapped", "address_mapping": None,
        "address_reading": "in no mapping: the first page, a NULL pointer"}
    process = crash["process"]
    assert process["executable"] == "/tmp/crashreg-demo-cores/bin/ingest-worker"
    assert process["version"] == "3.1.4" and re.fullmatch(r"[0-9a-f]{40}", process["build_id"])
    assert process["args"].split()[1:] == ["ring"] and process["pid"] and process["tid"] != process["pid"]
    assert process["started_at"] == "2026-11-18T08:00:00Z" and process["uptime_s"] == 2 * 86400 + 7200
    # the other thread, as the core holds it: the program's main thread waiting in join()
    [main] = crash["threads"]
    assert main["tid"] == process["pid"]
    called = [f["function"] for f in main["frames"]]
    assert called[called.index("std::thread::join()"):][:2] == ["std::thread::join()", "main"]
    [commands] = body["core_commands"]
    assert commands["capture_id"] == capture_id and commands["method"] == "core"
    assert commands["download"] == f"{PUBLIC}/api/v1/captures/{capture_id}/download"
    assert commands["open"] == (
        f"(umask 077 && printf 'Authorization: Bearer %s\\n' \"$TOKEN\" > \"$HOME/.crashreg-debuginfod\") && "
        f"DEBUGINFOD_URLS={PUBLIC}/debuginfod/ DEBUGINFOD_HEADERS_FILE=\"$HOME/.crashreg-debuginfod\" "
        f"gdb -iex 'set debuginfod enabled on' /tmp/crashreg-demo-cores/bin/ingest-worker "
        f"core.{event_id}-{capture_id}")
    assert f"-o core.{event_id}-{capture_id} " in commands["fetch"]
    assert commands["download"] in commands["fetch"]
    assert commands["on_host"].startswith("on vm-ingest-7: gdb /tmp/crashreg-demo-cores/bin/ingest-worker "
                                          "/var/lib/crashreg/cores/core-1.core or coredumpctl debug ")


def test_a_null_read_names_its_function_guilty_at_frame_zero_and_its_fault_address(
    client, make_token
) -> None:  # type: ignore[no-untyped-def]
    answer = report(client, make_token("report"), core_report("index"))
    body = client.get(f"/api/v1/events/{answer['event_id']}", headers=auth(make_token("read"))).json
    crash = body["userspace"]
    assert [label["label"] for label in crash["labels"]] == ["segfault"]
    assert crash["guilty"] == 0
    assert crash["frames"][0]["function"] == "ingest::chunk_index_merge(ingest::Chunk* const*, int)"
    assert crash["fault"]["si_addr"] == "0x8"
    assert crash["fault"]["address_reading"] == "in no mapping: the first page, a NULL pointer plus an offset"
    assert crash["fault"]["pc_mapping"]["path"] == "/tmp/crashreg-demo-cores/bin/ingest-worker"
    assert crash["fault"]["pc_mapping"]["perms"] == "r-xp"
    assert body["core_commands"] == []


def test_a_kernel_event_has_no_userspace_reading(client, database, make_token) -> None:  # type: ignore[no-untyped-def]
    seeded = seed(client, database, make_token("report"), "ext4_evict_inode", [("gpu-b1", "6.8.0-52", "us")])
    body = client.get(f"/api/v1/events/{seeded.event_ids[0]}", headers=auth(make_token("read"))).json
    assert body["userspace"] is None and body["core_commands"] == []


def test_frames_symbolized_on_the_server_show_file_line_and_inlined(client, make_token) -> None:  # type: ignore[no-untyped-def]
    sent = core_report("index")
    inlined = [{"function": "ingest::load_chunk", "file": "chunk.h", "line": 12}]
    sent["stack"]["frames"][0] |= {"file": "ingest_worker.cc", "line": 57, "inlined": inlined}
    answer = report(client, make_token("report"), sent)
    body = client.get(f"/api/v1/events/{answer['event_id']}", headers=auth(make_token("read"))).json
    frame = body["userspace"]["frames"][0]
    assert (frame["file"], frame["line"]) == ("ingest_worker.cc", 57)
    assert frame["inlined"] == inlined
    login(client, make_token("read"))
    page = client.get(f"/events/{answer['event_id']}").get_data(as_text=True)
    assert "<code>ingest_worker.cc:57</code>" in page and "<code>ingest::load_chunk</code> chunk.h:12" in page


def test_the_event_page_shows_the_userspace_crash_and_no_kernel_card(
    client, make_token, ring_event
) -> None:  # type: ignore[no-untyped-def]
    event_id, capture_id = ring_event
    login(client, make_token("read"))
    page = client.get(f"/events/{event_id}").get_data(as_text=True)
    for part in ('id="signal"', 'id="labels"', 'id="frame-table"', 'id="registers"', 'id="process"',
                 'id="fault"', 'id="capture-open"', 'id="threads"'):
        assert part in page
    assert "<h3>Thread " in page and "<code>std::thread::join()</code>" in page
    assert "return-to-null</span> pc 0; the slot `ret` popped (%rsp-8) held 0" in page
    assert "libc.so.6+0x" in page and "userspace-runtime" in page
    assert f"DEBUGINFOD_URLS={PUBLIC}/debuginfod/ " \
           "DEBUGINFOD_HEADERS_FILE=&#34;$HOME/.crashreg-debuginfod&#34; " \
           f"gdb -iex &#39;set debuginfod enabled on&#39; " \
           f"/tmp/crashreg-demo-cores/bin/ingest-worker core.{event_id}-{capture_id}" in page
    assert f"/events/{event_id}/captures/{capture_id}/download" in page
    assert "<dt>version</dt><dd>3.1.4</dd>" in page and "2.1 days" in page
    assert "Console log" not in page and "console log" not in page.lower().replace(
        "no console log", "")
    assert "no frames found" not in page


def test_a_userspace_signature_page_shows_no_kernel_only_facts(client, make_token) -> None:  # type: ignore[no-untyped-def]
    reporter = make_token("report")
    answer = report(client, reporter, core_report("ring"))
    login(client, make_token("read"))
    page = client.get(f"/signatures/{answer['signature']['id']}").get_data(as_text=True)
    assert "Fixed in kernel" not in page and "rolled out" not in page
    assert 'id="explanation-key"' in page and "guilty <code>ingest::ring_buffer_commit" in page


def test_a_bare_userspace_report_reads_without_evidence_registers_or_process(client, make_token) -> None:  # type: ignore[no-untyped-def]
    """An older reader's report (frames only, odd values kept by the payload) still reads."""
    sent = core_report("index")
    sent["stack"] = {"signal": "SIGABRT", "frames": [{"function": "abort", "module": "libc.so.6"},
                                                     {"function": "store::flush", "module": "store",
                                                      "line": 0, "inlined": "not a list"}],
                     "mappings": [{"start": "zz", "end": "0x10"}]}
    answer = report(client, make_token("report"), sent)
    body = client.get(f"/api/v1/events/{answer['event_id']}", headers=auth(make_token("read"))).json
    crash = body["userspace"]
    assert [label["label"] for label in crash["labels"]] == ["abort"]
    assert crash["labels"][0]["proof"] == ("the process died of SIGABRT (abort(): the program stopped "
                                           "itself (an assertion, std::terminate, a detected corruption))")
    assert [(f["function"], f["decision"], f["line"], f["inlined"]) for f in crash["frames"]] == [
        ("abort", "skipped", None, None), ("store::flush", "guilty", None, None)]
    assert crash["registers"] == {} and crash["fault"]["pc"] is None and crash["fault"]["si_addr"] is None
    assert crash["process"] | {"executable": None} == dict.fromkeys(crash["process"])
    login(client, make_token("read"))
    page = client.get(f"/events/{answer['event_id']}")
    assert page.status_code == 200 and "None reported." in page.get_data(as_text=True)
