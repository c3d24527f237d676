"""The triage bundle: everything an agent container needs to work one signature.

Facts, a diverse sample of events with their console logs, frames and captures (and the
debug packages each capture needs), the kernel source per version, the RCAs so far, the
Jira issue, similar signatures, the epidemiology summary, and AGENTS.md: the rules that
keep an agent inside a budget and make it cite evidence the registry can check.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from marshmallow import Schema, fields
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.bounds import plausible
from registry.capture.models import Capture
from registry.capture.service import CaptureView, capture_dict
from registry.core.events import Event, EventSummary, Report, event_summary, userspace_stacks
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.core.wiring import FrameNames, app_frame_names
from registry.db import utcnow
from registry.epidemiology.service import signature_epidemiology
from registry.epidemiology.shapes import EpidemiologyBody
from registry.jira.state import JiraComment
from registry.rca.checks import CHECKS, REQUIRED_EVIDENCE
from registry.rca.kernels import DebugInfo, KernelBuild, debuginfo, kernel_build
from registry.rca.sampling import diverse_sample, similarity
from registry.rca.schemas import EVIDENCE_TYPES, FixSchema
from registry.rca.service import RcaView, event_frames, functions_of, member_signature_ids, signature_rcas
from registry.signatures.explanation import MARKS
from registry.signatures.service import SignatureDetail, detail
from registry.signatures.userspace import (
    BEFORE_WINDOW,
    OUTSIDE_WINDOW,
    CoreCommands,
    UserFrame,
    UserspaceCrash,
    core_commands,
    frame_text,
    userspace_crash,
)
from registry.storage.models import Dump
from registry.storage.service import DownloadLink, stored_dumps

SAMPLE_SIZE = 12
CANDIDATE_EVENTS = 2000  # newest events the sample is drawn from (plus the very first one)
CONSOLE_LOG_TAIL = 128 * 1024
SIMILAR_LIMIT = 10
SIMILAR_SCAN = 5000  # most recent signatures compared frame by frame

# What keeps an agent from looping: the budgets AGENTS.md states.
AGENT_BUDGET = {
    "max_api_requests": 60,
    "max_wall_clock_minutes": 45,
    "max_hypotheses": 3,
    "max_rcas_posted": 1,
    "max_retries_per_request": 3,
}



class Block(str):
    """Text AGENTS.md shows as its own lines (the example RCA's JSON), written as it is."""


# Line breaks and other control characters, as JSON escapes them: what a crashed host, a
# reporter or an RCA's author wrote never starts a line of AGENTS.md of its own (a heading, a
# rule, a code fence an agent would take for the registry's instructions).
_CONTROLS = (*range(0x09), *range(0x0B, 0x20), 0x7F, 0x85, 0x2028, 0x2029)  # a tab stays
_ONE_LINE = {code: f"\\u{code:04x}" for code in _CONTROLS} | {0x0A: "\\n", 0x0D: "\\r"}


def one_line(value: Any) -> Any:
    """Jinja's `finalize`: every value AGENTS.md interpolates, on one line (but a Block)."""
    return value.translate(_ONE_LINE) if isinstance(value, str) and not isinstance(value, Block) else value


_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # Markdown for an agent, not HTML
    finalize=one_line,
    # read once, as the code that renders it is: a deploy's new template beside a worker's old
    # code (until its restart) would render with names that code does not pass (a 500)
    auto_reload=False,
)
_TEMPLATES.filters["json"] = lambda value: Block(json.dumps(value, indent=2))
# The triage workspace written beside the bundle (crashreg triage-bundle --out DIR).
WORKSPACE = Path(__file__).parent / "templates" / "workspace"


class BundleFacts(TypedDict):
    """Counts over the signature's events (and those of signatures merged into it)."""

    events: int
    hosts: int
    first_crash: str | None
    last_crash: str | None
    # per value: {<kernel_version|region|sku|program_version>: value, events, first_seen, last_seen},
    # most events first
    kernels: list[dict[str, Any]]
    regions: list[dict[str, Any]]
    skus: list[dict[str, Any]]
    program_versions: list[dict[str, Any]]  # a userspace signature's program releases


class BundleCapture(CaptureView):
    debug_packages: list[str]  # what the capture's kernel needs to be read


class SampledEvent(EventSummary):
    console_log: str | None  # its tail, CONSOLE_LOG_TAIL characters at most
    console_log_truncated: bool
    frames: list[str]  # every frame; a userspace one without a function as module+offset
    captures: list[BundleCapture]
    # a userspace crash: what its core reader saw (labels with their proof, every frame with
    # the engine's decision, registers, fault, process), and how to open its cores
    userspace: UserspaceCrash | None
    core_commands: list[CoreCommands]


class SimilarSignature(TypedDict):
    id: str
    title: str
    function: str | None
    status: str
    score: float
    why: str


class JiraIssue(TypedDict):
    key: str
    url: str | None
    status_category: str | None
    comments: list[JiraComment]
    comments_read_at: str | None


class FieldDoc(TypedDict):
    name: str
    type: str
    required: bool
    one_of: list[Any] | None
    format: str | None
    description: str | None


class CheckDoc(TypedDict):
    name: str
    rule: str


class EvidenceFormat(TypedDict):
    item_types: dict[str, list[FieldDoc]]
    fix: list[FieldDoc]
    required_for_ai: list[str]
    checks: list[CheckDoc]


class WorkspaceModule(TypedDict):
    name: str
    build_id: str
    debug: str  # where setup.sh puts its debug info: debug/<kernel_version>/modules/<name>.ko


class WorkspaceDump(TypedDict):
    event_id: str
    capture_id: str
    kernel_version: str
    kernel_dir: str  # the workspace's folder for the kernel's debug info and source (kernel_dir())
    target: str | None
    uri: str | None
    dump: str
    vmlinux: str
    # the crashed kernel's build-id: setup.sh fetches the vmlinux from the registry's
    # /debuginfod/ by it (None: no report carried it; the debug package instead)
    kernel_build_id: str | None
    modules: list[WorkspaceModule]  # loaded modules a DPU report named, fetched the same way
    drgn: str
    # a short-lived link to the dump in the dump store (None: not stored), and how it is encoded
    download_url: str | None
    download_expires_at: str | None
    encoding: str | None


# A stored dump -> a short-lived link to it, recorded under the caller's identity (the API's
# token, or who ran the command).
LinkMaker = Callable[[Dump], DownloadLink]


# Where setup.sh writes the `Authorization` header elfutils' clients send to the registry's
# debuginfod (DEBUGINFOD_HEADERS_FILE), from $CRASHREG_TOKEN.
DEBUGINFOD_HEADERS_FILE = "debuginfod-headers"


class DebuginfodAccess(TypedDict):
    """How gdb, eu-stack, drgn and debuginfod-find get symbols by build-id from the registry."""

    urls: str  # DEBUGINFOD_URLS
    headers_file: str  # DEBUGINFOD_HEADERS_FILE, relative to the workspace


class BundleSignature(SignatureDetail):
    url: str  # its page


class TriageBundle(TypedDict):
    """GET /api/v1/signatures/{key}/triage-bundle."""

    generated_at: str
    registry_url: str
    signature: BundleSignature
    facts: BundleFacts
    events: list[SampledEvent]
    debuginfo: list[DebugInfo]
    dumps: list[WorkspaceDump]
    rcas: list[RcaView]
    jira: JiraIssue | None
    similar_signatures: list[SimilarSignature]
    epidemiology: EpidemiologyBody
    evidence_format: EvidenceFormat
    budget: dict[str, int]
    debuginfod: DebuginfodAccess
    agents_md: NotRequired[str]  # rendered from the rest of the bundle, then added to it


def facts(session: Session, members: list[int]) -> BundleFacts:
    in_signature = Event.signature_id.in_(members)
    totals = session.execute(
        select(
            func.count(),
            func.count(func.distinct(Event.host_id)),
            func.min(plausible(Event.crashed_at)),
            func.max(plausible(Event.crashed_at)),
        ).where(in_signature)
    ).one()

    def breakdown(column: Any, name: str) -> list[dict[str, Any]]:
        rows = session.execute(
            select(column, func.count(), func.min(plausible(Event.crashed_at)),
                   func.max(plausible(Event.crashed_at)))
            .where(in_signature)
            .group_by(column)
            .order_by(func.count().desc(), column)
        ).all()
        return [
            {name: value, "events": count, "first_seen": first.isoformat() if first else None,
             "last_seen": last.isoformat() if last else None}
            for value, count, first, last in rows
        ]

    return {
        "events": totals[0],
        "hosts": totals[1],
        "first_crash": totals[2].isoformat() if totals[2] else None,
        "last_crash": totals[3].isoformat() if totals[3] else None,
        "kernels": breakdown(Event.kernel_version, "kernel_version"),
        "regions": breakdown(Event.region, "region"),
        "skus": breakdown(Event.sku, "sku"),
        "program_versions": [row for row in breakdown(Event.program_version, "program_version")
                             if row["program_version"] is not None],
    }


def sample_events(session: Session, members: list[int]) -> list[Event]:
    newest = session.scalars(
        select(Event).where(Event.signature_id.in_(members)).order_by(Event.id.desc()).limit(CANDIDATE_EVENTS)
    ).all()
    first = session.scalars(
        select(Event).where(Event.signature_id.in_(members)).order_by(Event.id).limit(1)
    ).all()
    candidates = list(newest) + [e for e in first if e not in newest]
    rows = [{"event": e, "hostname": e.hostname, **e.attributes()} for e in candidates]
    return [row["event"] for row in diverse_sample(rows, SAMPLE_SIZE)]


def console_logs(session: Session, event_ids: list[int]) -> dict[int, str]:
    logs: dict[int, str] = {}
    query = (
        select(Report.event_id, Report.console_log)
        .where(Report.event_id.in_(event_ids), Report.console_log.is_not(None))
        .order_by(Report.id)
    )
    for event_id, log in session.execute(query):
        logs.setdefault(event_id, log)
    return logs


def sampled_event_entries(session: Session, events: list[Event], public_url: str,
                          frame_names: FrameNames | None = None) -> list[SampledEvent]:
    ids = [e.id for e in events]
    logs = console_logs(session, ids)
    frames = event_frames(session, ids)
    stacks = userspace_stacks(session, ids)
    captures: dict[int, list[Capture]] = {i: [] for i in ids}
    for capture in session.scalars(select(Capture).where(Capture.event_id.in_(ids)).order_by(Capture.id)):
        captures[capture.event_id].append(capture)
    encodings = {capture_id: dump.encoding for capture_id, dump in
                 stored_dumps(session, [c.id for listed in captures.values() for c in listed]).items()}
    entries: list[SampledEvent] = []
    # the registry's symbols, for frames outside the engine's window: a command's, or the app's
    names_now = frame_names or app_frame_names()
    for event in events:
        log = logs.get(event.id)
        stack = stacks.get(event.id)
        # a kernel's debug packages read a vmcore; a core's symbols come from debuginfod
        debug = debuginfo(event.kernel_version) if event.kernel_version and stack is None else None
        views = [capture_dict(c) for c in captures[event.id]]
        crash = userspace_crash(stack, event.crashed_at, event.program_version, event.explanation,
                                names_now) if stack is not None else None
        entries.append(
            {
                **event_summary(event),
                "console_log": log[-CONSOLE_LOG_TAIL:] if log else None,
                "console_log_truncated": bool(log and len(log) > CONSOLE_LOG_TAIL),
                "frames": frames.get(event.id, []),
                "captures": [{**view, "debug_packages": debug["debug_packages"] if debug else []}
                             for view in views],
                "userspace": crash,
                "core_commands": core_commands(public_url, event.id, crash["process"], event.hostname,
                                               views, encodings) if crash else [],
            }
        )
    return entries


def similar_signatures(session: Session, signature: Signature) -> list[SimilarSignature]:
    own = functions_of(signature.frames or [])
    query = select(Signature).where(Signature.id != signature.id, Signature.merged_into_id.is_(None))
    recent = session.scalars(query.order_by(Signature.id.desc()).limit(SIMILAR_SCAN)).all()
    same_function = (
        session.scalars(query.where(Signature.function == signature.function).limit(SIMILAR_LIMIT)).all()
        if signature.function
        else []
    )
    scored = []
    for other in {s.id: s for s in [*same_function, *recent]}.values():
        alike = similarity(signature.function, own, other.function, functions_of(other.frames or []))
        if alike is not None:
            scored.append((alike[0], other, alike[1]))
    scored.sort(key=lambda item: (-item[0], -item[1].id))
    return [
        {
            "id": str(o.id),
            "title": o.title,
            "function": o.function,
            "status": o.status,
            "score": round(s, 3),
            "why": why,
        }
        for s, o, why in scored[:SIMILAR_LIMIT]
    ]


def jira_issue(session: Session, signature: Signature) -> JiraIssue | None:
    link = session.get(JiraLink, signature.id)
    if link is None:
        return None
    return {
        "key": link.issue_key,
        "url": link.url,
        "status_category": link.status_category,
        "comments": list(link.comments or []),
        "comments_read_at": link.jira_updated_at.isoformat() if link.jira_updated_at else None,
    }


def field_doc(name: str, field: fields.Field) -> FieldDoc:
    """One field of an evidence item: its name, type, whether required, allowed values, format."""
    choices = [list(v.choices) for v in field.validators if getattr(v, "choices", None)]
    formats = [
        v.error for v in field.validators if isinstance(getattr(v, "error", None), str) and "{" not in v.error
    ]
    return {
        "name": name,
        "type": "integer" if isinstance(field, fields.Integer) else "string",
        "required": field.required,
        "one_of": choices[0] if choices else None,
        "format": formats[0] if formats else None,
        "description": field.metadata.get("description"),
    }


def schema_doc(schema: type[Schema]) -> list[FieldDoc]:
    return [field_doc(name, field) for name, field in schema().fields.items()]


def evidence_format() -> EvidenceFormat:
    """The evidence JSON the registry accepts and checks, generated from the schemas."""
    return {
        "item_types": {kind: schema_doc(schema) for kind, schema in EVIDENCE_TYPES.items()},
        "fix": schema_doc(FixSchema),
        "required_for_ai": [" or ".join(group) for group in REQUIRED_EVIDENCE["ai"]],
        "checks": [
            {"name": name, "rule": (check.__doc__ or "").strip().splitlines()[0]}
            for name, check in CHECKS.items()
        ],
    }


def example_rca(bundle: TriageBundle) -> dict[str, Any]:
    """A well-formed RCA body built from this signature's real data (a userspace one cites no
    kernel: its fix is the program's commit)."""
    event = bundle["events"][0] if bundle["events"] else None
    userspace = bundle["signature"]["kind"] == "userspace"
    kernel = event["host"]["kernel_version"] if event and not userspace else None
    function = bundle["signature"].get("function") or (
        event["frames"][0] if event and event["frames"] else None
    )
    evidence: list[dict[str, Any]] = []
    if event:
        evidence.append({"type": "event", "event_id": event["id"], "note": "representative crash"})
        if event["captures"]:
            evidence.append({"type": "capture", "capture_id": event["captures"][0]["id"]})
    if function:
        evidence.append({"type": "function", "function": function, "note": "guilty frame"})
        if kernel:
            evidence.append(
                {
                    "type": "source",
                    "file": "path/to/file.c",
                    "line": 123,
                    "kernel_version": kernel,
                    "function": function,
                }
            )
    evidence += [
        {"type": "commit", "commit": "0123456789ab", "subject": "the commit that introduced or fixed it"},
        {"type": "link", "url": "https://issues.example/the-program/1234", "kind": "bug_tracker"} if userspace
        else {"type": "link", "url": "https://lore.kernel.org/...", "kind": "mailing_list"},
    ]
    return {
        "summary": "one line: what breaks and why",
        "body": "Markdown: mechanism, trigger, why these frames, what would fix it",
        "author": "<agent name>",
        "author_kind": "ai",
        "agent": {"name": "<agent name>", "model": "<model id>"},
        "confidence": 0.6,
        "evidence": evidence,
        "fix": {"commit": "0123456789ab"} if userspace else
        {"commit": "0123456789ab", "kernel_version": "<first kernel version with the fix>"},
    }


def kernel_builds(session: Session, event_ids: list[int]) -> dict[int, KernelBuild]:
    """Each event's kernel build-id and module build-ids, from its kernel reports' payloads."""
    payloads: dict[int, list[dict[str, Any]]] = {}
    query = (select(Report.event_id, Report.payload)
             .where(Report.event_id.in_(event_ids), Report.source.in_(("crash_kernel", "dpu")))
             .order_by(Report.received_at, Report.id))
    for event_id, payload in session.execute(query):
        payloads.setdefault(event_id, []).append(payload if isinstance(payload, dict) else {})
    return {event_id: kernel_build(found) for event_id, found in payloads.items()}


# A kernel release as `uname -r` prints one (Debian's, Ubuntu's, RHEL's): one path component.
_RELEASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}")


def kernel_dir(version: str) -> str:
    """The workspace's folder for a kernel (under debug/ and src/): its release, or for a version
    no kernel prints (a slash, `..`, a shell's metacharacters: it comes from the reporter) a
    name made of its hash, so that setup.sh writes nothing outside the workspace."""
    if _RELEASE.fullmatch(version):
        return version
    return "kernel-" + hashlib.sha256(version.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def workspace_dumps(
    session: Session, events: list[SampledEvent], link: LinkMaker | None
) -> list[WorkspaceDump]:
    """The sampled events' completed dumps as the triage workspace lays them out: setup.sh puts
    each beside its kernel's vmlinux (fetched through its download link when the dump store
    holds it), and AGENTS.md gives the drgn command for each."""
    stored = stored_dumps(session, [int(c["id"]) for e in events for c in e["captures"]])
    builds = kernel_builds(session, [int(e["id"]) for e in events if e["captures"]])
    dumps: list[WorkspaceDump] = []
    for event in events:
        version = event["host"].get("kernel_version")
        build = builds.get(int(event["id"]), {"build_id": None, "modules": []})
        for capture in event["captures"]:
            if not version or capture["status"] != "completed" or not (capture["target"] or capture["uri"]):
                continue
            folder = kernel_dir(version)
            dump, vmlinux = f"dumps/{event['id']}-{capture['id']}.vmcore", f"debug/{folder}/vmlinux"
            in_store = stored.get(int(capture["id"]))
            given = link(in_store) if in_store is not None and link is not None else None
            dumps.append({
                "event_id": event["id"],
                "capture_id": capture["id"],
                "kernel_version": version,
                "kernel_dir": folder,
                "target": capture["target"],
                "uri": capture["uri"],
                "dump": dump,
                "vmlinux": vmlinux,
                "kernel_build_id": build["build_id"],
                "modules": [{**module, "debug": f"debug/{folder}/modules/{module['name']}.ko"}
                            for module in build["modules"]],
                "drgn": f"drgn -q -c {dump} -s {vmlinux} inspect-dump.py",
                "download_url": given["url"] if given else None,
                "download_expires_at": given["expires_at"] if given else None,
                "encoding": in_store.encoding if in_store is not None else None,
            })
    return dumps


def triage_bundle(session: Session, signature: Signature, public_url: str,
                  program_label: str | None = None, link: LinkMaker | None = None,
                  frame_names: FrameNames | None = None) -> TriageBundle:
    """The signature's triage bundle; `frame_names`: a command's FrameNames (the app's by
    default) for the frames outside the engine's window."""
    members = member_signature_ids(session, signature)
    signature_facts = facts(session, members)
    # a userspace signature's symbols come from debuginfod, its cores open in gdb: no kernel
    # debug packages, no vmcores for drgn
    userspace = signature.kind == "userspace"
    kernels = [] if userspace else signature_facts["kernels"]
    versions = [k["kernel_version"] for k in kernels if k["kernel_version"]]
    bundle: TriageBundle = {
        "generated_at": utcnow().isoformat(),
        "registry_url": public_url,
        "signature": {**detail(session, signature), "url": f"{public_url}/signatures/{signature.id}"},
        "facts": signature_facts,
        "events": sampled_event_entries(session, sample_events(session, members), public_url, frame_names),
        "debuginfo": [debuginfo(v) for v in versions],
        "dumps": [],
        "rcas": signature_rcas(session, signature),
        "jira": jira_issue(session, signature),
        "similar_signatures": similar_signatures(session, signature),
        "epidemiology": signature_epidemiology(session, signature, program_label=program_label),
        "evidence_format": evidence_format(),
        "budget": AGENT_BUDGET,
        "debuginfod": {"urls": f"{public_url}/debuginfod/", "headers_file": DEBUGINFOD_HEADERS_FILE},
    }
    bundle["dumps"] = [] if userspace else workspace_dumps(session, bundle["events"], link)
    bundle["agents_md"] = _TEMPLATES.get_template("AGENTS.md").render(
        bundle=bundle, budget=AGENT_BUDGET, example=example_rca(bundle), userspace=userspace,
        frame_mark=frame_mark, frame_text=frame_text,
    )
    return bundle


# A frame the engine did not decide on: passed over before its window, outside it, or not read.
UNDECIDED_MARKS = {BEFORE_WINDOW: "-", OUTSIDE_WINDOW: "."}


def frame_mark(frame: UserFrame) -> str:
    """A frame's mark in AGENTS.md's stacks (its legend says what each means)."""
    return MARKS.get(frame["decision"] or "") or UNDECIDED_MARKS.get(frame["note"] or "", "?")
