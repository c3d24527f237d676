"""What the jira domain does when other domains move things: a merged signature's issue link."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session

from registry.core.jira_links import JiraLink
from registry.core.wiring import Carried


def carry_link(session: Session, loser_id: int, survivor_id: int) -> Carried:
    """A signature merged away in a rebuild: its Jira link moves to the survivor, unless the
    survivor has its own issue."""
    link = session.get(JiraLink, loser_id)
    if link is None:
        return Carried()
    if session.get(JiraLink, survivor_id) is not None:
        return Carried(note=f"Jira {link.issue_key} stays on merged signature {loser_id}: "
                            f"{survivor_id} has its own issue")
    key = link.issue_key
    session.execute(update(JiraLink).where(JiraLink.signature_id == loser_id)
                    .values(signature_id=survivor_id))
    return Carried(done=f"Jira {key} carried; ")
