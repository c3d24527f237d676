"""The explanation record: how each fingerprint was made, compact and JSON-serialisable."""

from __future__ import annotations

import json

import pytest

from registry.fingerprint import ALGORITHM_VERSION, analyse_console_log, analyse_stack
from registry.fingerprint.frames import MAX_EXPLAINED_FRAMES, make_fingerprint
from registry.fingerprint.patterns import AT, FRAMES, OOPSES, READ_PARTS, Read, find, named
from tests.support.golden import TAIL, TRACE, cases, golden, log
from tests.support.userspace import stack

KEYS = {"v", "kind", "kind_rule", "headline", "section", "frames", "guilty", "flags", "identity"}
DECISIONS = {"guilty", "used", "skipped"}


def check_record(signature) -> dict:
    """The shape every explanation has, whatever the crash."""
    record = signature.explanation
    assert json.loads(json.dumps(record)) == record
    assert set(record) == KEYS
    assert record["v"] == ALGORITHM_VERSION
    assert record["kind"] == signature.kind
    assert record["kind_rule"]
    assert make_fingerprint(ALGORITHM_VERSION, *record["identity"]) == signature.fingerprint
    frames = record["frames"]
    assert len(frames) <= MAX_EXPLAINED_FRAMES
    for frame in frames:
        # and, for a userspace frame, where it lies: its offset, source line, whether inlined
        assert {"function", "module", "decision", "rule"} <= set(frame) <= {
            "function", "module", "decision", "rule", "offset", "file", "line", "inlined"}
        assert frame["decision"] in DECISIONS
        assert (frame["rule"] is not None) == (frame["decision"] == "skipped")
    guilty = record["guilty"]
    assert [i for i, f in enumerate(frames) if f["decision"] == "guilty"] == \
        ([] if guilty is None else [guilty])
    assert set(record["flags"]) <= {"corrupted", "interleaved", "truncated"}
    return record


@pytest.mark.parametrize("case", cases(), ids=lambda case: case.name)
def test_every_golden_log_explains_its_guilty_frame(case) -> None:
    signature = analyse_console_log(case.log)
    if signature is None:
        return
    record = check_record(signature)
    if signature.function:
        assert record["frames"][record["guilty"]]["function"] in (signature.function,
                                                                  "smp_call_function")
        assert record["section"]


def frames_of(name: str) -> dict[str, dict]:
    record = analyse_console_log(golden(f"kinds/{name}")).explanation
    return {frame["function"]: frame for frame in record["frames"]}


def test_skipped_frames_name_the_skip_class_that_skipped_them() -> None:
    refcount = frames_of("refcount-warning")
    assert refcount["refcount_warn_saturate"]["rule"] == "warn-refcount-helpers"
    assert refcount["mlx5e_tls_del"] == {"function": "mlx5e_tls_del", "module": "mlx5_core",
                                         "decision": "guilty", "rule": None}
    hung = frames_of("hung-task")
    assert hung["__schedule"]["rule"] == "hung-wait"
    assert hung["io_schedule"]["rule"] == "hung-wait"
    assert hung["kjournald2"]["decision"] == "used"
    assert frames_of("paging-request")["memset_orig"]["rule"] == "string-copy"


def test_the_section_names_where_the_frames_came_from() -> None:
    def section(name: str) -> str | None:
        return analyse_console_log(golden(name)).explanation["section"]

    assert section("kinds/null-deref") == "RIP"
    assert section("kinds/arm64-paging") == "Call trace"  # pc : was a list helper, skipped
    assert section("arm64/null-deref-nvme") == "pc"
    assert section("riscv/null-deref-virtnet") == "epc"
    assert section("kinds/warning") == "RIP"
    assert section("kinds/kasan") == "header"
    assert section("kinds/hung-task") == "Call Trace"
    assert section("kinds/lockdep") == "at:"
    assert section("kinds/tx-timeout") is None


def test_a_deep_guilty_frame_stays_inside_the_compact_window() -> None:
    machinery = [f" _raw_spin_lock_irqsave+0x{i:x}/0x80" for i in range(1, 40)]
    text = log("general protection fault: 0000 [#1] SMP", "RIP: 0010:memcpy_orig+0x10/0x20",
               *TRACE, *machinery, " mlx5_cmd_exec+0x20/0x90 [mlx5_core]", *TAIL)
    record = check_record(analyse_console_log(text))
    assert record["frames"][record["guilty"]]["function"] == "mlx5_cmd_exec"
    assert record["frames"][0]["decision"] == "skipped"


def test_hardware_reports_explain_without_frames() -> None:
    record = check_record(analyse_console_log(golden("production/mce-memory-uncorrected")))
    assert (record["frames"], record["guilty"], record["section"]) == ([], None, None)


def test_a_bare_report_marker_is_flagged_corrupted() -> None:
    record = check_record(analyse_console_log(log("BUG:", *TRACE, " ext4_readdir+0x1/0x2", *TAIL)))
    assert record["flags"] == ["corrupted"]


def test_userspace_stacks_get_the_same_shape() -> None:
    signature = analyse_stack(stack())
    record = check_record(signature)
    assert record["kind_rule"] == "signal:SIGSEGV"
    assert record["section"] == "stack"
    assert [(f["function"], f["decision"], f["rule"]) for f in record["frames"]] == [
        ("__restore_rt", "skipped", "userspace-runtime"), ("raise", "skipped", "userspace-runtime"),
        ("abort", "skipped", "userspace-runtime"), ("nccl_proxy_progress", "guilty", None),
        ("proxy_service", "used", None), ("start_thread", "skipped", "userspace-runtime")]
    popped_zero = {"pc_perms": "", "slots": [{"offset": -8, "value": "0x0"}]}
    evidence_only = check_record(analyse_stack(stack(signal="", frames=[], evidence=popped_zero,
                                                     registers={"rip": "0x0", "rsp": "0x10"})))
    assert (evidence_only["kind_rule"], evidence_only["frames"]) == ("evidence", [])


def test_a_misspelt_guilty_program_is_refused_when_the_table_loads() -> None:
    """The guilty-frame parts are named fields (patterns.Read), checked when a row is built."""
    rows = {oops.name: oops.guilty for oops in OOPSES}
    assert rows["lockdep-irq-unsafe-order"] == ((find("which became"), FRAMES),
                                                (find("is trying to acquire"), named(AT)))
    assert all(isinstance(read, Read) and read.part in READ_PARTS
               for program in rows.values() for alternative in program for read in alternative)
    for bad in (lambda: Read("trcae"), lambda: find(), lambda: Read("header", ("x",))):
        with pytest.raises(ValueError, match="bad guilty-frame part"):
            bad()
