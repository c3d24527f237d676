"""The typed shapes of the API's bodies keep the keys its OpenAPI document promises.

A shape (a TypedDict next to the code that builds or reads the body) and the marshmallow schema
that documents it are written apart; this is where they would drift. Each case walks the OpenAPI
document from an operation to the object the shape types and compares the keys.
"""

from __future__ import annotations

from typing import Any

import pytest

from registry.app import create_app
from registry.capture.bundle import BundleJson
from registry.capture.service import CaptureView
from registry.config import Settings
from registry.core.events import CaptureAnswer
from registry.epidemiology.shapes import (
    ConcentratedComponent,
    EpidemiologyBody,
    FindingView,
    OnsetView,
    PopulationView,
    SpreadComponent,
    TimeFinding,
)
from registry.fingerprint import ExplanationRecord
from registry.fingerprint.frames import ExplainedFrame
from registry.ingest.api import EventDetail, ReportResponse
from registry.ingest.unfingerprinted import ReportText, UnfingerprintedEvent
from registry.inventory.service import UpsertAnswer
from registry.openapi import build_spec
from registry.rca.bundle import TriageBundle
from registry.rca.checks import CheckResultView
from registry.rca.service import AgentView, FixView, RcaProposal, RcaView, ReviewRequest, ReviewView
from registry.retention.pins import PinView
from registry.signatures.service import CapturePolicyView, SignatureDetail, SignatureSummary
from registry.signatures.userspace import (
    CoreCommands,
    FaultView,
    LabelProof,
    MappingView,
    ProcessFacts,
    ThreadView,
    UserFrame,
    UserspaceCrash,
)
from registry.storage.service import DumpView
from registry.symbols.keep import SymbolFileView
from registry.symbols.uploads import SymbolUploadAnswer, UploadView

# (shape, operation, the path to the object inside its body, keys the document leaves out)
CASES = [
    (ReportResponse, ("post", "/api/v1/reports", "201"), [], set()),
    (ReportResponse, ("post", "/api/v1/reports", "200"), [], set()),
    (SignatureSummary, ("post", "/api/v1/reports", "201"), ["signature"], set()),
    (CaptureAnswer, ("post", "/api/v1/reports", "201"), ["capture"], set()),
    (SignatureDetail, ("get", "/api/v1/signatures/{key}", "200"), [], set()),
    (CapturePolicyView, ("patch", "/api/v1/signatures/{key}", "request"), ["capture_policy"], set()),
    (EventDetail, ("get", "/api/v1/events/{event_id}", "200"), [], set()),
    (ExplanationRecord, ("get", "/api/v1/events/{event_id}", "200"), ["explanation"], {"identity"}),
    (ExplainedFrame, ("get", "/api/v1/events/{event_id}", "200"), ["explanation", "frames", "[]"], set()),
    (UserspaceCrash, ("get", "/api/v1/events/{event_id}", "200"), ["userspace"], set()),
    (UserFrame, ("get", "/api/v1/events/{event_id}", "200"), ["userspace", "frames", "[]"], set()),
    (FaultView, ("get", "/api/v1/events/{event_id}", "200"), ["userspace", "fault"], set()),
    (MappingView, ("get", "/api/v1/events/{event_id}", "200"), ["userspace", "fault", "pc_mapping"], set()),
    (ProcessFacts, ("get", "/api/v1/events/{event_id}", "200"), ["userspace", "process"], set()),
    (LabelProof, ("get", "/api/v1/events/{event_id}", "200"), ["userspace", "labels", "[]"], set()),
    (ThreadView, ("get", "/api/v1/events/{event_id}", "200"), ["userspace", "threads", "[]"], set()),
    (CoreCommands, ("get", "/api/v1/events/{event_id}", "200"), ["core_commands", "[]"], set()),
    (CaptureView, ("post", "/api/v1/events/{event_id}/captures", "201"), [], set()),
    (CaptureView, ("patch", "/api/v1/captures/{capture_id}", "200"), [], set()),
    (RcaProposal, ("post", "/api/v1/signatures/{key}/rcas", "request"), [], set()),
    (AgentView, ("post", "/api/v1/signatures/{key}/rcas", "request"), ["agent"], set()),
    (FixView, ("post", "/api/v1/signatures/{key}/rcas", "request"), ["fix"], set()),
    (ReviewRequest, ("post", "/api/v1/rcas/{rca_id}/review", "request"), [], set()),
    (UpsertAnswer, ("post", "/api/v1/hosts", "200"), [], set()),
    (BundleJson, ("get", "/api/v1/policy-bundle", "200"), [], set()),
    (UnfingerprintedEvent, ("get", "/api/v1/unfingerprinted", "200"), ["events", "[]"], set()),
    (ReportText, ("get", "/api/v1/unfingerprinted", "200"), ["events", "[]", "text"], set()),
    (RcaView, ("get", "/api/v1/rcas/{rca_id}", "200"), [], set()),
    (RcaView, ("get", "/api/v1/signatures/{key}/rcas", "200"), ["rcas", "[]"], set()),
    (AgentView, ("get", "/api/v1/rcas/{rca_id}", "200"), ["agent"], set()),
    (FixView, ("get", "/api/v1/rcas/{rca_id}", "200"), ["fix"], set()),
    (ReviewView, ("get", "/api/v1/rcas/{rca_id}", "200"), ["reviews", "[]"], set()),
    (CheckResultView, ("get", "/api/v1/rcas/{rca_id}", "200"), ["checks", "[]"], set()),
    (TriageBundle, ("get", "/api/v1/signatures/{key}/triage-bundle", "200"), [], set()),
    (EpidemiologyBody, ("get", "/api/v1/signatures/{key}/epidemiology", "200"), [], set()),
    (FindingView, ("get", "/api/v1/signatures/{key}/epidemiology", "200"), ["findings", "[]"], set()),
    (FindingView, ("get", "/api/v1/signatures/{key}/epidemiology", "200"), ["explained", "[]"], set()),
    (PopulationView, ("get", "/api/v1/signatures/{key}/epidemiology", "200"), ["population"], set()),
    (OnsetView, ("get", "/api/v1/signatures/{key}/epidemiology", "200"), ["onset"], set()),
    (TimeFinding, ("get", "/api/v1/signatures/{key}/epidemiology", "200"), ["time_findings", "[]"], set()),
    (PinView, ("put", "/api/v1/captures/{capture_id}/pin", "201"), [], set()),
    (PinView, ("get", "/api/v1/captures/{capture_id}/pins", "200"), ["pins", "[]"], set()),
    (SymbolUploadAnswer, ("post", "/api/v1/symbols/uploads", "200"), [], set()),
    (UploadView, ("post", "/api/v1/symbols/uploads", "200"), ["upload"], set()),
    (SymbolFileView, ("get", "/api/v1/symbols/{build_id}", "200"), ["files", "[]"], set()),

    (DumpView, ("get", "/api/v1/captures/{capture_id}/dump", "200"), [], set()),
]


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return build_spec(create_app(Settings(database_url="sqlite://")))


def resolved(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Follow a $ref, also inside a nullable anyOf or a described allOf."""
    refs = [option for option in schema.get("anyOf", schema.get("allOf", [])) if "$ref" in option]
    if refs:
        [schema] = refs
    if "$ref" in schema:
        return spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def documented_keys(spec: dict[str, Any], operation: tuple[str, str, str], inside: list[str]) -> set[str]:
    method, path, status = operation
    documented = spec["paths"][path][method]
    body = documented["requestBody"] if status == "request" else documented["responses"][status]
    schema = resolved(spec, body["content"]["application/json"]["schema"])
    for step in inside:
        schema = resolved(spec, schema["items"] if step == "[]" else schema["properties"][step])
    return set(schema["properties"])


def shape_keys(shape: Any) -> set[str]:
    return set(shape.__required_keys__ | shape.__optional_keys__)


@pytest.mark.parametrize(
    ("shape", "operation", "inside", "undocumented"),
    CASES,
    ids=[f"{shape.__name__}@{op[0]} {op[1]} {op[2]}:{'.'.join(inside)}" for shape, op, inside, _ in CASES],
)
def test_the_shape_has_the_documented_keys(spec, shape, operation, inside, undocumented) -> None:
    keys = shape_keys(shape)
    assert undocumented <= keys, "an undocumented key the shape no longer has: drop it from the case"
    assert keys - undocumented == documented_keys(spec, operation, inside)


def test_the_component_shapes_carry_every_documented_key(spec) -> None:
    """The document describes one Component for both kinds of a mixture's parts: its keys are
    those of one shape or the other, every one of them (the answers carried keys the document,
    closed to others, did not have), and each shape names its kind."""
    operation = ("get", "/api/v1/signatures/{key}/epidemiology", "200")
    documented = documented_keys(spec, operation, ["components", "[]"])
    concentrated, spread = shape_keys(ConcentratedComponent), shape_keys(SpreadComponent)
    assert documented == concentrated | spread
    assert "kind" in concentrated & spread
