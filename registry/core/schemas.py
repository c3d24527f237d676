"""Shapes more than one domain validates or documents: a host's attributes (crash reports and
the inventory), the text bounds of their columns, and the signature object's summary (ingest
answers, signature lists and details, epidemiology bodies)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from registry.core.signatures import SIGNATURE_STATUSES
from registry.requests import WholeNumber


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


LABEL_KEY_MAX = 128


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
    memory_gb = WholeNumber(validate=validate.Range(min=0, max=1 << 30), allow_none=True)
    hypervisor = short_text(128)
    gpu_driver = short_text(128)
    labels = fields.Dict(
        keys=fields.String(validate=validate.Length(max=LABEL_KEY_MAX)),
        values=fields.String(validate=validate.Length(max=255)),
        load_default=dict,
        # OpenAPI 3.0 cannot bound an object's keys (propertyNames is 3.1): said in words.
        metadata={"description": f"free-form labels; keys at most {LABEL_KEY_MAX} characters"},
    )
    booted_at = fields.AwareDateTime(
        default_timezone=UTC,
        allow_none=True,
        metadata={"description": "last boot (inventory only: between 2000-01-01 and one day from now)"},
    )


class SignatureSummarySchema(Schema):
    """The contract's signature object (registry.signatures.service.SignatureSummary)."""

    id = fields.String()
    fingerprint = fields.String()
    title = fields.String()
    kind = fields.String()
    labels = fields.List(fields.String())
    status = fields.String(validate=validate.OneOf(SIGNATURE_STATUSES))
    first_seen = fields.AwareDateTime()
    last_seen = fields.AwareDateTime()
    event_count = fields.Integer()
    jira_key = fields.String(allow_none=True)
