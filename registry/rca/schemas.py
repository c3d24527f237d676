"""What an RCA, its evidence items and a review look like on the wire."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from registry.ids import ID_MAX, parse_id
from registry.rca.models import AUTHOR_KINDS, RCA_STATUSES, REVIEW_VERDICTS
from registry.requests import JsonBoolean, WholeNumber

COMMIT = validate.Regexp(r"^[0-9a-f]{7,40}$", error="a git commit id: 7 to 40 lowercase hex digits")
HTTP_URL = validate.URL(schemes={"http", "https"}, require_tld=False)
URL_DOC = {"format": "uri", "pattern": "^https?://[^/?#\\s]+", "description": "an http(s) URL"}
KERNEL_VERSION = [validate.Regexp(r"^v?\d+\.\d+\S*$", error="a kernel version such as 6.8.0-52-generic"),
                  validate.Length(max=128)]
LINK_KINDS = ("bug_tracker", "mailing_list", "other")
MAX_EVIDENCE_ITEMS = 200


def _note() -> fields.String:
    return fields.String(validate=validate.Length(max=2000), metadata={"description": "why it matters"})


class RowId(fields.String):
    """A row's id as the API writes ids (a string of digits), within the id column's range, kept
    as the API writes it ("01058" is 1058: the checks look the row up by it)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(metadata={"pattern": f"^[0-9]{{1,{len(str(ID_MAX))}}}$"}, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        parsed = parse_id(super()._deserialize(value, attr, data, **kwargs))
        if parsed is None:
            raise ValidationError(f"an id: a whole number from 1 to {ID_MAX}, as a string")
        return str(parsed)


class EventEvidence(Schema):
    event_id = RowId(required=True)
    note = _note()


class CaptureEvidence(Schema):
    capture_id = RowId(required=True)
    note = _note()


# As a frame's function may be (registry.fingerprint.demangle: C++ names run that long).
MAX_FUNCTION = 16384


class FunctionEvidence(Schema):
    function = fields.String(required=True, validate=validate.Length(min=1, max=MAX_FUNCTION))
    module = fields.String(validate=validate.Length(max=128))
    note = _note()


class SourceEvidence(Schema):
    file = fields.String(required=True, validate=validate.Length(min=1, max=500))
    line = WholeNumber(required=True, validate=validate.Range(min=1, max=2**31 - 1))
    kernel_version = fields.String(validate=KERNEL_VERSION, metadata={
        "description": "the kernel the line is read at (required for a kernel signature's RCA)"})
    function = fields.String(validate=validate.Length(min=1, max=MAX_FUNCTION))
    note = _note()


class KernelEvidence(Schema):
    kernel_version = fields.String(required=True, validate=KERNEL_VERSION)
    note = _note()


class CommitEvidence(Schema):
    commit = fields.String(required=True, validate=COMMIT)
    repository = fields.String(validate=HTTP_URL, metadata=URL_DOC)
    subject = fields.String(validate=validate.Length(max=500))
    note = _note()


class LinkEvidence(Schema):
    url = fields.String(required=True, validate=HTTP_URL, metadata=URL_DOC)
    kind = fields.String(load_default="other", validate=validate.OneOf(LINK_KINDS))
    note = _note()


# evidence "type" -> the fields such an item carries (AGENTS.md is generated from this table).
EVIDENCE_TYPES: dict[str, type[Schema]] = {
    "event": EventEvidence,
    "capture": CaptureEvidence,
    "function": FunctionEvidence,
    "source": SourceEvidence,
    "kernel": KernelEvidence,
    "commit": CommitEvidence,
    "link": LinkEvidence,
}


class EvidenceItem(fields.Field):
    """One evidence object, validated by the schema its "type" names."""

    def _deserialize(self, value: Any, attr: Any, data: Any, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValidationError("an evidence item is an object with a 'type'")
        kind = value.get("type")
        if not isinstance(kind, str) or kind not in EVIDENCE_TYPES:
            raise ValidationError(f"type must be one of {', '.join(EVIDENCE_TYPES)}")
        rest = {k: v for k, v in value.items() if k != "type"}
        return {"type": kind, **EVIDENCE_TYPES[kind]().load(rest)}


class AgentSchema(Schema):
    name = fields.String(required=True, validate=validate.Length(min=1, max=255))
    model = fields.String(required=True, validate=validate.Length(min=1, max=255))


class FixSchema(Schema):
    """Bounded as the RCA's row and its signature's keep them (fixed_in_kernel, fix_url)."""

    commit = fields.String(validate=COMMIT)
    kernel_version = fields.String(validate=KERNEL_VERSION,
                                   metadata={"description": "first kernel fixed"})
    url = fields.String(validate=[HTTP_URL, validate.Length(max=1000)], metadata=URL_DOC)


class RcaCreateSchema(Schema):
    summary = fields.String(required=True, validate=validate.Length(min=1, max=500))
    body = fields.String(required=True, validate=validate.Length(min=1, max=200_000))
    author = fields.String(required=True, validate=validate.Length(min=1, max=255))
    author_kind = fields.String(required=True, validate=validate.OneOf(AUTHOR_KINDS))
    agent = fields.Nested(AgentSchema, metadata={"description": "required when author_kind is ai"})
    confidence = fields.Float(validate=validate.Range(min=0, max=1), allow_none=True)
    evidence = fields.List(
        EvidenceItem(
            metadata={
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string", "enum": list(EVIDENCE_TYPES)}},
                "description": "an object with `type` and that type's fields: "
                + "; ".join(
                    f"{kind}: {', '.join(schema().fields)}" for kind, schema in EVIDENCE_TYPES.items()
                ),
            }
        ),
        load_default=list,
        validate=validate.Length(max=MAX_EVIDENCE_ITEMS),
    )
    fix = fields.Nested(FixSchema)

    @validates_schema
    def _agent_for_ai(self, data: dict[str, Any], **_: Any) -> None:
        if data.get("author_kind") == "ai" and not data.get("agent"):
            raise ValidationError("an AI-written RCA records the agent: {name, model}", "agent")


class ReviewSchema(Schema):
    verdict = fields.String(required=True, validate=validate.OneOf(REVIEW_VERDICTS))
    note = fields.String(validate=validate.Length(max=20_000), allow_none=True)
    override_checks = JsonBoolean(
        load_default=False,
        metadata={"description": "confirm although evidence checks failed (needs a note)"},
    )

    @validates_schema
    def _reasons(self, data: dict[str, Any], **_: Any) -> None:
        if data["verdict"] == "rejected" and not (data.get("note") or "").strip():
            raise ValidationError("a rejection says why: give a note", "note")
        if data.get("override_checks") and not (data.get("note") or "").strip():
            raise ValidationError("overriding failed checks needs a note saying why", "note")


class CheckResultSchema(Schema):
    name = fields.String()
    status = fields.String(validate=validate.OneOf(("pass", "fail", "skip")))
    message = fields.String()
    problems = fields.List(fields.String())


class ReviewOutSchema(Schema):
    verdict = fields.String()
    note = fields.String(allow_none=True)
    reviewer = fields.String()
    checks_passed = fields.Boolean()
    created_at = fields.AwareDateTime()


class RcaSchema(Schema):
    id = fields.String()
    signature_id = fields.String()
    status = fields.String(validate=validate.OneOf(RCA_STATUSES))
    summary = fields.String()
    body = fields.String()
    author = fields.String()
    author_kind = fields.String()
    agent = fields.Nested(AgentSchema, allow_none=True)
    confidence = fields.Float(allow_none=True)
    evidence = fields.List(fields.Dict())
    fix = fields.Nested(FixSchema, allow_none=True)
    posted_by = fields.String(metadata={"description": "name of the token that posted it"})
    checks_passed = fields.Boolean(metadata={"description": "false: flagged, an evidence check failed"})
    flagged = fields.Boolean()
    checks = fields.List(fields.Nested(CheckResultSchema))
    reviews = fields.List(fields.Nested(ReviewOutSchema))
    superseded_by = fields.String(allow_none=True)
    superseded_at = fields.AwareDateTime(allow_none=True)
    checked_at = fields.AwareDateTime(metadata={"description": "when the evidence checks last ran"})
    created_at = fields.AwareDateTime()


class RcaListSchema(Schema):
    rcas = fields.List(fields.Nested(RcaSchema))
