"""Every table, imported in one place so Alembic and the tests see the whole schema."""

from registry.auth.models import ApiToken
from registry.capture.models import Capture, CaptureSlot
from registry.core.events import Event, Report
from registry.core.hosts import Host, HostAttributeChange
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature, SignatureAlias, SignatureCounter
from registry.db import Base
from registry.epidemiology.models import (
    EpidemiologyFinding,
    EpidemiologySuspectHost,
    EpidemiologyVerdict,
)
from registry.grafana.models import GrafanaAnnotation, GrafanaProvisioned
from registry.jira.models import JiraSyncCursor, JiraWebhookReceipt
from registry.outbox import OutboxMessage
from registry.pages.models import AppSecret, WebSession
from registry.rca.models import Rca, RcaReview

__all__ = [
    "ApiToken",
    "AppSecret",
    "Base",
    "Capture",
    "CaptureSlot",
    "EpidemiologyFinding",
    "EpidemiologySuspectHost",
    "EpidemiologyVerdict",
    "Event",
    "GrafanaAnnotation",
    "GrafanaProvisioned",
    "Host",
    "HostAttributeChange",
    "JiraLink",
    "JiraSyncCursor",
    "JiraWebhookReceipt",
    "OutboxMessage",
    "Rca",
    "RcaReview",
    "Report",
    "Signature",
    "SignatureAlias",
    "SignatureCounter",
    "WebSession",
]
