"""The one seam between ingest and the capture policy."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from registry.config import Settings
from registry.ingest.models import Event
from registry.signatures.models import Signature
from registry.signatures.service import signature_stats


@dataclass(frozen=True)
class CaptureDecision:
    action: str  # full | filtered | skip
    reason: str
    dump_level: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {"action": self.action, "reason": self.reason, "dump_level": self.dump_level}


NO_SIGNATURE = CaptureDecision("full", "no crash signature could be computed: capture to learn")


def decide_capture(
    session: Session, signature: Signature | None, event: Event, settings: Settings
) -> CaptureDecision:
    """Provisional: the first K events of a signature are captured in full, then skipped."""
    if signature is None:
        return NO_SIGNATURE
    k = settings.full_captures_per_window
    event_count, _ = signature_stats(session, signature.id)
    if event_count <= k:
        return CaptureDecision("full", f"event {event_count} of this signature: first {k} are captured")
    return CaptureDecision("skip", f"known signature with {k} captures already")
