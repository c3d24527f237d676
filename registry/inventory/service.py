"""Bulk inventory upsert with attribute history (rollouts, fleet as it was)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.core.hosts import HOST_ATTRIBUTES, Host, HostAttributeChange
from registry.db import utcnow
from registry.upsert import insert_ignore

CHUNK = 500


class UpsertAnswer(TypedDict):
    """POST /api/v1/hosts: what the upsert did."""

    created: int
    updated: int
    unchanged: int
    attribute_changes: int


@dataclass
class UpsertOutcome:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    changes: int = 0

    def as_dict(self) -> UpsertAnswer:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "attribute_changes": self.changes,
        }


# The change history's columns: host attributes fit them; a host's labels, written as one
# `k=v,...` text (the history shows them, nothing reads them back), keep their head.
TRACKED_LENGTH = HostAttributeChange.__table__.c.new_value.type.length  # type: ignore[attr-defined]


def tracked_value(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if name == "labels":
        text = ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        return (text if len(text) <= TRACKED_LENGTH else text[:TRACKED_LENGTH - 1] + "…") or None
    return str(value)


def upsert_hosts(
    session: Session, hosts: list[dict[str, Any]], observed_at: datetime | None = None
) -> UpsertOutcome:
    """Insert new hosts, update changed ones and record each attribute change with its time."""
    when = observed_at or utcnow()
    outcome = UpsertOutcome()
    for start in range(0, len(hosts), CHUNK):
        chunk = {h["hostname"]: h for h in hosts[start : start + CHUNK]}
        existing = {
            host.hostname: host
            for host in session.scalars(select(Host).where(Host.hostname.in_(list(chunk))))
        }
        for hostname, fields in chunk.items():
            host = existing.get(hostname)
            if host is None:
                created = insert_ignore(
                    session,
                    Host,
                    _values(fields)
                    | {"hostname": hostname, "in_inventory": True, "first_seen": when, "updated_at": when},
                    ["hostname"],
                )
                if created is not None:
                    outcome.created += 1
                    continue
                host = session.scalar(select(Host).where(Host.hostname == hostname))
                assert host is not None
            outcome.changes += _apply(session, host, fields, when)
            if session.is_modified(host):
                host.in_inventory, host.updated_at = True, when
                outcome.updated += 1
            else:
                host.in_inventory = True
                outcome.unchanged += 1
        session.flush()
    return outcome


def _values(fields: dict[str, Any]) -> dict[str, Any]:
    values = {name: fields.get(name) for name in HOST_ATTRIBUTES}
    values["labels"] = fields.get("labels") or {}
    values["booted_at"] = fields.get("booted_at")
    return values


def _apply(session: Session, host: Host, fields: dict[str, Any], when: datetime) -> int:
    changes = 0
    for name in (*HOST_ATTRIBUTES, "labels"):
        if name not in fields:
            continue  # absent means unknown, not cleared
        old, new = getattr(host, name), fields[name]
        if name == "labels":
            new = new or {}
        if old != new:
            session.add(
                HostAttributeChange(
                    host_id=host.id,
                    attribute=name,
                    old_value=tracked_value(name, old),
                    new_value=tracked_value(name, new),
                    changed_at=when,
                )
            )
            setattr(host, name, new)
            changes += 1
    if fields.get("booted_at") is not None and host.booted_at != fields["booted_at"]:
        host.booted_at = fields["booted_at"]
    return changes
