"""The wire format of POST /api/v1/reports (contract), validated with marshmallow."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate, validates

from registry.ingest.models import REPORT_SOURCES

MAX_CONSOLE_LOG_BYTES = 1024 * 1024
MAX_FRAMES = 1024
MAX_MAPPINGS = 4096


def at_most_bytes(limit: int) -> Any:
    """Length in UTF-8 bytes: index entries are limited in bytes (PostgreSQL's btree: 2,704),
    and a value that only fits in characters (a 255-character name of 4-byte characters) would
    fail the insert instead of the request."""

    def check(value: str) -> None:
        if len(value) * 4 > limit and len(value.encode()) > limit:
            raise ValidationError(f"longer than {limit} bytes (UTF-8)")

    return check


def bounded_text(limit: int, minimum: int | None = None) -> list[Any]:
    """Validators for a text column: the character bound (shown in the OpenAPI document as
    maxLength) and the same bound in UTF-8 bytes."""
    return [validate.Length(min=minimum, max=limit), at_most_bytes(limit)]


def short_text(limit: int, **kwargs: Any) -> fields.String:
    return fields.String(validate=bounded_text(limit), allow_none=True, **kwargs)


class HostSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    hostname = fields.String(required=True, validate=bounded_text(255, minimum=1))
    physical_host = short_text(255)
    region = short_text(128)
    cluster = short_text(128)
    sku = short_text(128)
    cpu_model = short_text(255)
    microcode = short_text(64)
    bios_version = short_text(128)
    bmc_version = short_text(128)
    kernel_version = short_text(128)
    os_image = short_text(255)
    memory_gb = fields.Integer(validate=validate.Range(min=0, max=1 << 30), allow_none=True)
    hypervisor = short_text(128)
    gpu_driver = short_text(128)
    labels = fields.Dict(
        keys=fields.String(validate=validate.Length(min=1, max=128)),
        values=fields.String(validate=validate.Length(max=255)),
        load_default=dict,
    )
    booted_at = fields.AwareDateTime(
        default_timezone=UTC, allow_none=True, metadata={"description": "last boot (inventory only)"}
    )


class FrameSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    function = short_text(512)
    module = short_text(255)
    offset = short_text(32)
    address = short_text(32)
    file = short_text(512)
    line = fields.Integer(allow_none=True)


class MappingSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    start = fields.String(required=True, validate=validate.Length(max=32))
    end = fields.String(required=True, validate=validate.Length(max=32))
    perms = short_text(8)
    path = short_text(1024)


class StackSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    executable = short_text(1024)
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


class ReportSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    report_id = fields.String(
        required=True,
        validate=validate.Length(min=1, max=128),
        metadata={"description": "client-made unique id (idempotency key)"},
    )
    source = fields.String(required=True, validate=validate.OneOf(REPORT_SOURCES))
    crashed_at = fields.AwareDateTime(required=True, default_timezone=UTC)
    host = fields.Nested(HostSchema, required=True)
    boot_id = short_text(128)
    uptime_s = fields.Integer(validate=validate.Range(min=0), allow_none=True)
    console_log = fields.String(allow_none=True)
    stack = fields.Nested(StackSchema, allow_none=True)
    fingerprint = short_text(64, metadata={"description": "optional, computed by the reporter"})

    @validates("console_log")
    def _console_log_size(self, value: str | None, **_: Any) -> None:
        if value is not None and len(value.encode("utf-8", "surrogatepass")) > MAX_CONSOLE_LOG_BYTES:
            raise ValidationError(f"console_log is larger than {MAX_CONSOLE_LOG_BYTES} bytes")


class SignatureSummarySchema(Schema):
    id = fields.String()
    fingerprint = fields.String()
    title = fields.String()
    kind = fields.String()
    labels = fields.List(fields.String())
    status = fields.String(validate=validate.OneOf(("new", "triaged", "resolved", "regressed", "ignored")))
    first_seen = fields.AwareDateTime()
    last_seen = fields.AwareDateTime()
    event_count = fields.Integer()
    jira_key = fields.String(allow_none=True)


class CaptureAnswerSchema(Schema):
    action = fields.String(validate=validate.OneOf(("full", "filtered", "skip")))
    reason = fields.String()
    dump_level = fields.Integer(allow_none=True)


class ReportAnswerSchema(Schema):
    event_id = fields.String()
    duplicate = fields.Boolean()
    known = fields.Boolean()
    signature = fields.Nested(SignatureSummarySchema, allow_none=True)
    capture = fields.Nested(CaptureAnswerSchema)
