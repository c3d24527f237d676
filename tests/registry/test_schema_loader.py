"""The compiled report loader against marshmallow's own load: what it accepts, schema.load gives
the same; what schema.load refuses, it gives up on (the 400 then comes from schema.load)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import RAISE, Schema, ValidationError, fields

from registry.ingest.api import REPORT_SCHEMA
from registry.ingest.schemas import MAX_CONSOLE_LOG_BYTES, MAX_FRAMES
from registry.schema_loader import compiled_loader
from testkit.reports import crash_report

LOAD_REPORT = compiled_loader(REPORT_SCHEMA)


def userspace_report() -> dict[str, Any]:
    return crash_report(
        source="userspace",
        console_log=None,
        stack={
            "executable": "/usr/bin/ingest-worker",
            "build_id": "ab" * 20,
            "signal": "SIGSEGV",
            "frames": [
                {"function": "ring_buffer_commit", "module": "ingest-worker", "offset": "0x1c", "line": 7}
            ],
            "registers": {"rip": "0x401000"},
            "mappings": [{"start": "0x400000", "end": "0x401000", "perms": "r-xp", "path": "/usr/bin/x"}],
            "evidence": {"si_code": 1, "pc_bytes": "c3", "pc_entry": False,
                         "slots": [{"offset": 8, "value": "0x401000", "call": True}]},
            "process": {"pid": 42, "name": "ingest-worker", "uptime_s": 12.5, "version": "3.1.4"},
        },
    )


def matches(body: Any) -> None:
    """The property: the compiled loader equals schema.load where it answers, and gives up
    wherever schema.load refuses."""
    fast = LOAD_REPORT(copy.deepcopy(body))
    try:
        loaded = REPORT_SCHEMA.load(copy.deepcopy(body))
    except ValidationError:
        assert fast is None, body
        return
    assert fast is None or fast == loaded, (fast, loaded)


def without(body: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: value for name, value in body.items() if name not in names}


SOON = (datetime.now(UTC) + timedelta(days=3)).isoformat()
CASES = [
    crash_report(),
    userspace_report(),
    crash_report(host={"hostname": "h"}, boot_id=None, uptime_s=None),
    crash_report(source="live_kernel", repeat_of="r-1", repeat_count=5),
    crash_report(unknown_field=1, host={"hostname": "h", "rack": "r1"}),
    # refused by the schema
    without(crash_report(), "report_id"),
    without(crash_report(), "host"),
    crash_report(report_id=""),
    crash_report(report_id=7),
    crash_report(report_id=None),
    crash_report(report_id="r" * 129),
    crash_report(source="kernel"),
    crash_report(crashed_at="2026-11-29T12:00:00"),
    crash_report(crashed_at="1999-12-31T23:59:59Z"),
    crash_report(crashed_at=SOON),
    crash_report(crashed_at="yesterday"),
    crash_report(crashed_at=1764417600),
    crash_report(host={"hostname": ""}),
    crash_report(host={"hostname": "h" * 256}),
    crash_report(host={"region": "us"}),
    crash_report(host="gpu-a017"),
    crash_report(host=None),
    crash_report(host={"hostname": "h", "memory_gb": 1.5}),
    crash_report(host={"hostname": "h", "memory_gb": True}),
    crash_report(host={"hostname": "h", "memory_gb": "2048"}),
    crash_report(host={"hostname": "h", "memory_gb": -1}),
    crash_report(host={"hostname": "h", "labels": {"k": 1}}),
    crash_report(host={"hostname": "h", "labels": None}),
    crash_report(host={"hostname": "h", "region": "é" * 100}),
    crash_report(uptime_s=0.5),
    crash_report(uptime_s=2.0),
    crash_report(uptime_s=2**31),
    crash_report(uptime_s=False),
    crash_report(console_log=""),
    crash_report(console_log=None),
    crash_report(console_log=["a"]),
    crash_report(console_log="x" * (MAX_CONSOLE_LOG_BYTES + 1)),
    crash_report(repeat_of="r-1"),
    crash_report(repeat_count=-1),
    crash_report(fingerprint="f" * 65),
    crash_report(boot_id=b"x".decode() * 129),
    crash_report(console_log=None, stack={"frames": []}),
    crash_report(console_log=None, stack={"frames": [{"function": 3}]}),
    crash_report(stack={"frames": "all"}),
    crash_report(stack={"evidence": {"pc_bytes": "xyz"}}),
    crash_report(stack={"process": {"started_at": SOON}}),
    # lists of objects, each item as its schema loads it
    crash_report(console_log=None, stack={"frames": [None]}),
    crash_report(console_log=None, stack={"frames": [5, {"function": "f"}]}),
    crash_report(console_log=None, stack={"frames": [{"function": "f", "unknown": [1]}, {}]}),
    crash_report(console_log=None, stack={"frames": [{"function": "f"}] * (MAX_FRAMES + 1)}),
    crash_report(console_log=None, stack={"frames": [{"function": "f"}], "threads": [{"tid": 7}]}),
    crash_report(console_log=None, stack={"frames": [{"function": "f"}],
                                          "threads": [{"tid": -1, "frames": []}]}),
    crash_report(console_log=None, stack={"frames": [{"function": "f"}], "threads": None}),
    crash_report(console_log=None, stack={"frames": [{"function": "f"}], "threads": [{"frames": None}]}),
    crash_report(console_log=None, stack={"frames": [{"function": "f"}],
                                          "threads": [{"frames": [{"line": "7"}]}]}),
    crash_report(console_log=None, stack={"frames": [{"function": "f"}], "threads": {"frames": []}}),
    [crash_report()],
    "report",
    None,
]


@pytest.mark.parametrize("body", CASES)
def test_the_compiled_loader_agrees_with_the_schema(body: Any) -> None:
    matches(body)


def test_it_accepts_the_reports_it_was_built_for() -> None:
    """Otherwise it only adds work: a kernel report and a userspace one load without the schema."""
    for body in (crash_report(), userspace_report()):
        assert LOAD_REPORT(body) == REPORT_SCHEMA.load(body)


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["", "2026-11-29T12:00:00Z", "crash_kernel", "live_kernel", "0x10"])
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
PATHS = [
    (name,) for name in REPORT_SCHEMA.fields
] + [("host", name) for name in REPORT_SCHEMA.fields["host"].schema.fields] + [
    ("stack", name) for name in REPORT_SCHEMA.fields["stack"].schema.fields
] + [("stack", "process", name) for name in ("pid", "started_at", "uptime_s", "name")] + [
    ("stack", "frames", 0, name) for name in ("function", "line", "signal_frame")
] + [("stack", "frames", 0), ("stack", "frames", 1), ("stack", "threads")]


def put(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set the value at path (a key, or an index of a list item there), where the path's
    parents are still there as dicts and lists."""
    node: Any = body
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    in_list = isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node)
    if isinstance(node, dict) or in_list:
        node[path[-1]] = value


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(["kernel", "userspace"]),
    changes=st.lists(st.tuples(st.sampled_from(PATHS), JSON_VALUES | st.just(None)), max_size=3),
)
def test_generated_bodies_agree(base: str, changes: list[tuple[tuple[Any, ...], Any]]) -> None:
    body = crash_report() if base == "kernel" else userspace_report()
    for path, value in changes:
        put(body, path, value)
    matches(body)


def test_schemas_it_cannot_follow_are_refused_when_compiled() -> None:
    class Strict(Schema):
        class Meta:
            unknown = RAISE

        name = fields.String()

    with pytest.raises(ValueError, match="unknown"):
        compiled_loader(Strict())
