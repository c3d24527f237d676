"""What the epidemiology answers carry (GET /api/v1/signatures/{key}/epidemiology and
/api/v1/epidemiology/hosts), stored as-is in epidemiology_verdicts.analysis."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:  # the pure analysis modules import these shapes: no database code with them
    from registry.signatures.service import SignatureSummary


class FindingView(TypedDict):
    """An over-represented value of a signature against one baseline."""

    attribute: str
    value: str
    in_signature: float
    overall: float
    lift: float | None  # None: the value has no share of the baseline to compare with
    p_value: float
    log10_p: float
    events: int
    explained_by: str | None  # attribute=value of the finding that explains this one
    baseline: str


class TimeFinding(FindingView):
    """A finding about time (uptime, start_date) with its sentence."""

    statement: str


class LinedUpChange(TypedDict):
    """An inventory change on the hosts near a change point."""

    day: str
    attribute: str
    value: str
    hosts: int


class OnsetView(TypedDict):
    """When the signature started and how; only the first two without events."""

    first_seen: str | None
    change_point: str | None
    shape: NotRequired[str]  # too few events | steady | clear start | slow rise | step up | ...
    rate_before: NotRequired[float | None]  # crashes per 1000 hosts a day
    rate_after: NotRequired[float | None]
    lined_up: NotRequired[list[LinedUpChange]]


class UptimeProfile(TypedDict):
    """How long hosts were up when the signature crashed them, and any bound it never passes."""

    events: int
    median_days: float | None
    max_days: float | None
    min_days: float | None
    statement: str | None
    p_value: float | None
    bound: str | None  # at most | at least: the uptimes never go past bound_days
    bound_days: int | None
    outside_share: float | None  # share of the other crashes beyond the bound
    log10_p: NotRequired[float]  # with a bound


class VerdictDetail(TypedDict):
    """The verdict, why, the finding it rests on and how many more events would decide it."""

    verdict: str  # single-host | hardware-config | software | inconclusive
    reason: str
    finding: FindingView | None
    more_events_needed: int | None


class PopulationView(TypedDict):
    kind: str  # fleet | program
    program: str | None
    hosts: int | None
    source: str


class BaselineView(TypedDict):
    """The same analysis against another baseline (the body's `views`)."""

    baseline: str
    verdict: str
    verdict_detail: VerdictDetail
    findings: list[FindingView]
    explained: list[FindingView]
    tests: int
    stored_at: NotRequired[str]  # a view from the last refresh, not computed now


class ConcentratedComponent(TypedDict):
    """A part of a mixture on one unit (physical host, hostname, cluster)."""

    kind: str  # concentrated
    attribute: str
    value: str
    events: int
    share: float
    expected_events: float  # what the spread part predicts for the unit
    lift: float
    p_value: float
    log10_p: float
    baseline: str
    hosts: int
    hostnames: list[str]  # the first 20
    first_seen: str | None
    last_seen: str | None
    since: str | None
    onset: OnsetView
    uptime: UptimeProfile
    statement: str


class SpreadComponent(TypedDict):
    """What remains of a mixture: the events the verdict is about."""

    kind: str  # spread
    events: int
    hosts: int
    verdict: str
    reason: str
    findings: list[FindingView]  # the strongest five
    first_seen: str | None
    last_seen: str | None
    uptime: UptimeProfile
    statement: str


class SignatureAnalysis(TypedDict):
    """One signature's analysis; a signature without events has only the required keys."""

    events: int
    hosts: int
    verdict: str
    verdict_detail: NotRequired[VerdictDetail]
    baseline: NotRequired[str]
    population: NotRequired[PopulationView]
    findings: list[FindingView]
    explained: NotRequired[list[FindingView]]
    components: list[ConcentratedComponent | SpreadComponent]  # a mixture's parts, the spread one last
    time_findings: NotRequired[list[TimeFinding]]
    statements: list[str]
    views: NotRequired[dict[str, BaselineView]]
    onset: OnsetView
    uptime: NotRequired[UptimeProfile]


class EpidemiologyBody(SignatureAnalysis):
    signature: SignatureSummary
    stored_at: NotRequired[str | None]  # set by the endpoint: when the stored view was computed


class TopSignature(TypedDict):
    signature: str
    events: int


class SuspectHost(TypedDict):
    """A physical host whose crashes are improbable across signatures, with the evidence."""

    physical_host: str
    crashes: int
    signatures: int
    expected_signatures: float
    expected_crashes: float
    p_value: float
    log10_p: float
    signatures_p_value: float
    crashes_p_value: float
    hosts: int
    hosts_crashed: int
    signatures_only_here: int
    top_signatures: list[TopSignature]
    first_crash: str | None
    last_crash: str | None
    evidence: str
