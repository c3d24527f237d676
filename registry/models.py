"""Every table, imported in one place so Alembic and the tests see the whole schema."""

from registry.auth.models import ApiToken
from registry.capture.models import Capture, CaptureSlot
from registry.db import Base
from registry.ingest.models import Event, Report
from registry.inventory.models import Host, HostAttributeChange
from registry.jira.models import JiraLink, JiraSyncCursor, JiraWebhookReceipt
from registry.outbox import OutboxMessage
from registry.signatures.models import Signature, SignatureAlias, SignatureCounter

__all__ = [
    "ApiToken",
    "Base",
    "Capture",
    "CaptureSlot",
    "Event",
    "Host",
    "HostAttributeChange",
    "JiraLink",
    "JiraSyncCursor",
    "JiraWebhookReceipt",
    "OutboxMessage",
    "Report",
    "Signature",
    "SignatureAlias",
    "SignatureCounter",
]
