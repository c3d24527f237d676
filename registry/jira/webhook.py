"""Receiving Jira webhooks: verify, deduplicate, record a hint for the sync to act on.

The payload is only a hint. The sync reads the issue back from Jira before changing
anything, so a replayed, reordered or stale delivery can never set an old state.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

from sqlalchemy.orm import Session

from registry.jira.models import JiraWebhookReceipt
from registry.outbox import publish
from registry.requests import storable_text
from registry.upsert import insert_ignore

ISSUE_CHANGED_TOPIC = "jira.issue_changed"
SIGNATURE_PREFIX = "sha256="
# A Jira issue key: the project's key (a capital letter, then capitals, digits or _), a dash,
# the issue's number; within the receipts' column.
ISSUE_KEY = re.compile(r"[A-Z][A-Z0-9_]{0,44}-[0-9]{1,18}")


def signature_is_valid(secret: str, body: bytes, header: str | None) -> bool:
    """`X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>`, compared in constant time."""
    if not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest().encode()
    given = header[len(SIGNATURE_PREFIX):].strip().lower().encode(errors="replace")  # any text: bytes
    return hmac.compare_digest(expected, given)


def record_delivery(session: Session, identifier: str, payload: dict[str, Any]) -> bool:
    """Store the receipt and, for issue events, a hint in the outbox. False for a redelivery."""
    issue = payload.get("issue") if isinstance(payload.get("issue"), dict) else {}
    issue_key = issue.get("key") if isinstance(issue.get("key"), str) else None
    if issue_key is not None and not ISSUE_KEY.fullmatch(issue_key):
        issue_key = None  # no Jira issue's key: nothing of ours to look up
    event = payload.get("webhookEvent")
    event = storable_text(event)[:64] if isinstance(event, str) else None
    stored = insert_ignore(
        session,
        JiraWebhookReceipt,
        {"identifier": identifier, "event": event, "issue_key": issue_key},
        ["identifier"],
    )
    if stored is None:
        return False
    if issue_key:
        publish(session, ISSUE_CHANGED_TOPIC, None, issue_key=issue_key, event=event)
    return True
