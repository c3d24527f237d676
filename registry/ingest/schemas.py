"""The wire format of POST /api/v1/reports (contract), validated with marshmallow."""

from __future__ import annotations

import difflib
import functools
from datetime import UTC, datetime
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate, validates, validates_schema

from registry.bounds import time_problem
from registry.build_ids import BUILD_ID
from registry.core.events import REPORT_SOURCES
from registry.core.schemas import HostSchema, SignatureSummarySchema, short_text
from registry.fingerprint.demangle import MAX_NAME
from registry.requests import JsonBoolean, WholeNumber

MAX_CONSOLE_LOG_BYTES = 1024 * 1024
MAX_FRAMES = 1024
MAX_MAPPINGS = 4096
MAX_UPTIME_S = 2**31 - 1  # 68 years
NOTHING_TO_FINGERPRINT = "nothing to fingerprint: a report needs console_log or stack.frames"
MAX_WARNINGS = 20
# A frame's function: C++ names run long (std::map<std::string, std::vector<...>>::at is 1,770
# characters as c++filt prints it, 2% of libstdc++'s, LLVM's and Boost's exported functions pass
# 512); the bound is the longest the demangler writes (past it, a name stays its symbol).
MAX_FUNCTION = MAX_NAME
MAX_PATH = 1024  # a module's path, as a mapping's
MAX_REPEAT_COUNT = 2**40  # a hot WARN_ON prints ~10^5 times a second: years of it
# `$` alone also matches before a last newline; the lookahead keeps it (and OpenAPI's copy) to the end
BUILD_ID_FIELD = rf"^{BUILD_ID.pattern}$(?!\n)"


class FrameSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    function = short_text(MAX_FUNCTION)
    symbol = short_text(MAX_FUNCTION, metadata={
        "description": "the function's name as the symbol table or debug info spells it (mangled), "
                       "when `function` is its demangled spelling: what the fingerprint reads it from"})
    module = short_text(MAX_PATH)
    offset = short_text(32)
    address = short_text(32)
    file = short_text(MAX_PATH)
    line = WholeNumber(validate=validate.Range(min=0, max=2**31 - 1), allow_none=True)
    build_id = short_text(128)
    function_offset = short_text(32)
    signal_frame = JsonBoolean(allow_none=True,
                               metadata={"description": "a signal trampoline: the frames after it "
                                         "are what the signal interrupted"})


class MappingSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    start = fields.String(required=True, validate=validate.Length(max=32))
    end = fields.String(required=True, validate=validate.Length(max=32))
    perms = short_text(8)
    path = short_text(MAX_PATH)
    build_id = short_text(128, metadata={
        "description": "the ELF object loaded from this mapping (the one of its file's first byte): "
                       "its symbols are kept for reading the event's core, on a stack or not"})


MAX_SLOTS = 32
HEX_BYTES = validate.Regexp(r"^(?:[0-9a-fA-F]{2})*$", error="must be hexadecimal bytes")


class SlotSchema(Schema):
    """A stack slot near %rsp at the fault (offset from %rsp), and the code it points at."""

    class Meta:
        unknown = EXCLUDE

    offset = WholeNumber(required=True, validate=validate.Range(min=-4096, max=4096))
    value = fields.String(required=True, validate=validate.Length(max=32))
    function = short_text(MAX_FUNCTION)
    module = short_text(MAX_PATH)
    call = JsonBoolean(allow_none=True,
                       metadata={"description": "the value follows a call instruction"})


class EvidenceSchema(Schema):
    """What a core reader saw at the fault; the failure-mode labels are decided from it."""

    class Meta:
        unknown = EXCLUDE

    si_code = WholeNumber(validate=validate.Range(min=-(2**31), max=2**31 - 1), allow_none=True)
    si_addr = short_text(32)
    pc_perms = short_text(8, metadata={"description": "the fault pc's mapping, empty when unmapped"})
    pc_bytes = fields.String(validate=[validate.Length(max=64), HEX_BYTES], allow_none=True)
    pc_entry = JsonBoolean(allow_none=True,
                           metadata={"description": "the pc is a function's first byte"})
    cfa = short_text(32)
    slots = fields.List(fields.Nested(SlotSchema), validate=validate.Length(max=MAX_SLOTS), allow_none=True)
    caught_fault_address = short_text(32, metadata={
        "description": "a page fault a signal handler on the stack caught: its address (the innermost "
                       "signal frame's saved context)"})
    caught_fault_sp = short_text(32, metadata={
        "description": "the stack pointer that page fault interrupted"})


class ProcessSchema(Schema):
    """The crashed process: who it was, when it started, how long it ran."""

    class Meta:
        unknown = EXCLUDE

    pid = WholeNumber(validate=validate.Range(min=0, max=2**31 - 1), allow_none=True)
    tid = WholeNumber(validate=validate.Range(min=0, max=2**31 - 1), allow_none=True)
    name = short_text(64)
    args = short_text(1024)
    started_at = fields.AwareDateTime(default_timezone=UTC, allow_none=True)
    uptime_s = fields.Float(validate=validate.Range(min=0, max=MAX_UPTIME_S), allow_none=True)
    version = short_text(128)

    @validates("started_at")
    def _plausible_start(self, value: datetime | None, **_: Any) -> None:
        problem = time_problem("started_at", value, datetime.now(UTC)) if value is not None else None
        if problem is not None:
            raise ValidationError(problem)


MAX_THREADS = 256


class ThreadSchema(Schema):
    """Another thread of the crashed process: its id and frames, as a core reader unwound them."""

    class Meta:
        unknown = EXCLUDE

    tid = WholeNumber(validate=validate.Range(min=0, max=2**31 - 1), allow_none=True)
    frames = fields.List(fields.Nested(FrameSchema), validate=validate.Length(max=MAX_FRAMES),
                         load_default=list)


class StackSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    executable = short_text(MAX_PATH)
    build_id = short_text(128)
    signal = short_text(32)
    frames = fields.List(
        fields.Nested(FrameSchema), validate=validate.Length(max=MAX_FRAMES), load_default=list
    )
    registers = fields.Dict(
        keys=fields.String(validate=validate.Length(max=32)),
        values=fields.String(validate=validate.Length(max=64)),
        load_default=dict,
    )
    mappings = fields.List(
        fields.Nested(MappingSchema), validate=validate.Length(max=MAX_MAPPINGS), load_default=list
    )
    evidence = fields.Nested(EvidenceSchema, allow_none=True)
    process = fields.Nested(ProcessSchema, allow_none=True)
    threads = fields.List(fields.Nested(ThreadSchema), validate=validate.Length(max=MAX_THREADS),
                          allow_none=True, metadata={"description": "the other threads, the crashing one's "
                                                     "frames being `frames`"})


class ReportSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    report_id = fields.String(
        required=True,
        validate=validate.Length(min=1, max=128),
        metadata={"description": "client-made unique id (idempotency key)"},
    )
    source = fields.String(required=True, validate=validate.OneOf(REPORT_SOURCES))
    crashed_at = fields.AwareDateTime(
        required=True,
        default_timezone=UTC,
        metadata={"description": "between 2000-01-01 and one day from now"},
    )
    host = fields.Nested(HostSchema, required=True)
    boot_id = short_text(128)
    uptime_s = WholeNumber(validate=validate.Range(min=0, max=MAX_UPTIME_S), allow_none=True)
    console_log = fields.String(allow_none=True)
    stack = fields.Nested(StackSchema, allow_none=True)
    fingerprint = short_text(64, metadata={"description": (
        "optional, computed by the reporter (what it matched the offline policy bundle with); "
        "kept with the report, not used: the registry fingerprints console_log or stack itself, "
        "so it is not something to fingerprint")})
    kernel_build_id = fields.String(
        allow_none=True,
        validate=validate.Regexp(BUILD_ID_FIELD, error="a GNU build-id: 1 to 64 bytes in hex"),
        metadata={"description": "kernel sources: the crashed kernel's GNU build-id (VMCOREINFO's "
                  "BUILD-ID=), the key of its vmlinux in the symbol store and /debuginfod/; optional"},
    )
    dpu = fields.Dict(
        allow_none=True,
        metadata={"description": "dpu: what the DPU agent read besides the log (panic_cpu, tainted_mask, "
                  "crashed_thread with its frames, debug_info: the kernel's and each loaded module's "
                  "build-id and where its debug info came from); kept with the report for triage, not "
                  "fingerprinted"},
    )
    repeat_of = short_text(
        128,
        metadata={"description": "live_kernel: the report_id of the first report of this warning or "
                  "oops in this boot; this report counts its repeats and joins that report's event"},
    )
    repeat_count = WholeNumber(
        validate=validate.Range(min=0, max=MAX_REPEAT_COUNT),
        load_default=0,
        metadata={"description": "how many more times it was printed since the previous report of it"},
    )

    @validates("console_log")
    def _console_log_size(self, value: str | None, **_: Any) -> None:
        if value is not None and len(value.encode("utf-8", "surrogatepass")) > MAX_CONSOLE_LOG_BYTES:
            raise ValidationError(f"console_log is larger than {MAX_CONSOLE_LOG_BYTES} bytes")

    @validates("crashed_at")
    def _plausible_crash_time(self, value: datetime, **_: Any) -> None:
        problem = time_problem("crashed_at", value, datetime.now(UTC))
        if problem is not None:
            raise ValidationError(problem)

    @validates_schema
    def _repeats_of_live_reports(self, data: dict[str, Any], **_: Any) -> None:
        if data.get("repeat_of") and data.get("source") != "live_kernel":
            raise ValidationError({"repeat_of": ["only live_kernel reports repeat an earlier report"]})

    @validates_schema
    def _something_to_fingerprint(self, data: dict[str, Any], **_: Any) -> None:
        stack = data.get("stack") or {}
        if not (data.get("console_log") or stack.get("frames")):
            raise ValidationError(
                {"console_log": [NOTHING_TO_FINGERPRINT], "stack": {"frames": [NOTHING_TO_FINGERPRINT]}}
            )


def unknown_fields(schema: Schema, data: Any, prefix: str = "") -> list[str]:
    """Names in a report that the schema does not know (a typo like `consolelog` would
    otherwise cost a full dump silently), as dotted paths, list items as `[]`."""
    if not isinstance(data, dict):
        return []
    known = _fields_by_key(schema)
    found: list[str] = []
    for key, value in data.items():
        field = known.get(key)
        if field is None:
            found.append(f"{prefix}{key}")
        elif isinstance(field, fields.Nested) and isinstance(field.schema, Schema):
            found += unknown_fields(field.schema, value, f"{prefix}{key}.")
        elif isinstance(field, fields.List) and isinstance(field.inner, fields.Nested) and isinstance(
            value, list
        ):
            for item in value:
                found += unknown_fields(field.inner.schema, item, f"{prefix}{key}[].")
    return sorted(set(found))


@functools.cache
def _fields_by_key(schema: Schema) -> dict[str, fields.Field]:
    """A schema's fields by the key a document names them with (built once: every report asks)."""
    return {field.data_key or name: field for name, field in schema.fields.items()}


def _known_names(schema: Schema) -> set[str]:
    names: set[str] = set()
    for name, field in schema.fields.items():
        names.add(field.data_key or name)
        inner = field.inner if isinstance(field, fields.List) else field
        if isinstance(inner, fields.Nested) and isinstance(inner.schema, Schema):
            names |= _known_names(inner.schema)
    return names


def unknown_field_problems(schema: Schema, raw: Any) -> dict[str, list[str]]:
    """For a refused report: each unknown field with the known name it most resembles, so the
    400 for `{"consolelog": ...}` says what the typo was, not only what is missing."""
    known = sorted(_known_names(schema))
    problems = {}
    for name in unknown_fields(schema, raw)[:MAX_WARNINGS]:
        close = difflib.get_close_matches(name.rsplit(".", 1)[-1], known, n=1)
        problems[name] = [f"unknown field; did you mean {close[0]}?" if close else "unknown field"]
    return problems


def report_warnings(schema: Schema, raw: dict[str, Any]) -> list[str]:
    """What the answer tells a reporter about its report that is not an error."""
    names = unknown_fields(schema, raw)
    shown = [f"unknown field ignored: {name}" for name in names[:MAX_WARNINGS]]
    if len(names) > MAX_WARNINGS:
        shown.append(f"... and {len(names) - MAX_WARNINGS} more unknown fields")
    return shown


class CaptureAnswerSchema(Schema):
    action = fields.String(
        validate=validate.OneOf(("full", "filtered", "skip", "none")),
        metadata={"description": "none: nothing can be dumped (a live_kernel or pstore report)"},
    )
    reason = fields.String()
    dump_level = fields.Integer(allow_none=True)


class ReportAnswerSchema(Schema):
    event_id = fields.String()
    duplicate = fields.Boolean()
    known = fields.Boolean()
    signature = fields.Nested(SignatureSummarySchema, allow_none=True)
    capture = fields.Nested(CaptureAnswerSchema)
    archived = fields.Boolean(metadata={
        "description": "present (true) on a resend of a report that was archived: `duplicate` is true, "
        "`signature` null (it went to the archive with the report)"})
    warnings = fields.List(
        fields.String(), metadata={"description": "what was ignored in the report (unknown fields)"}
    )
