"""The fleet as it was, read from the inventory: its hosts and their attribute history, loaded
once into `fleet.Inventory` (plain data) and kept while the inventory's rows are unchanged.

A window's host-time per attribute value is computed from that (`Inventory.baseline`), so a
request or a refresh reads no host again while the inventory stands still: at 100,000 hosts
the load takes a second, the check that it is current a few tens of milliseconds.
"""

from __future__ import annotations

import weakref
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from registry.core.hosts import Host, HostAttributeChange

from .dialect import dialect_of
from .fleet import TRACKED, ChangeRow, HostRow, Inventory
from .onset import InventoryChange

# Per engine (one per process in production, one per test database in tests): the inventory
# loaded, and the version of the inventory's rows it was loaded at.
_LOADED: weakref.WeakKeyDictionary[Engine, tuple[Any, Inventory]] = weakref.WeakKeyDictionary()


def _aware(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def read_inventory(session: Session) -> Inventory:
    """The inventory's hosts and their recorded changes, as plain data."""
    columns = [getattr(Host, name) for name in TRACKED]
    rows = session.execute(
        select(Host.id, Host.hostname, Host.first_seen, Host.retired_at, Host.labels, *columns).where(
            Host.in_inventory
        )
    )
    hosts = (
        HostRow(host, name, _aware(first), _aware(retired), dict(zip(TRACKED, values, strict=True)), labels)
        for host, name, first, retired, labels, *values in rows
    )
    change = HostAttributeChange
    changes = (
        ChangeRow(host_id, attribute, old_value, _aware(changed_at))
        for host_id, attribute, old_value, changed_at in session.execute(
            select(change.host_id, change.attribute, change.old_value, change.changed_at)
            .where(change.attribute.in_(TRACKED))
            .order_by(change.host_id, change.attribute, change.changed_at, change.id)
        )
    )
    return Inventory.from_rows(hosts, changes)  # type: ignore[arg-type]


def current_inventory(session: Session) -> Inventory:
    """The loaded inventory if the inventory's rows have not changed since (the dialect's
    `inventory_version`, read before loading: a change committed meanwhile makes the next
    request load again, never serves an older inventory), else loaded now."""
    version_sql = dialect_of(session).inventory_version
    if version_sql is None:
        return read_inventory(session)
    version = tuple(session.execute(text(version_sql)).one())
    engine = session.get_bind().engine
    loaded = _LOADED.get(engine)
    if loaded is None or loaded[0] != version:
        loaded = (version, read_inventory(session))
        _LOADED[engine] = loaded
    return loaded[1]


def rollout_steps(session: Session) -> list[InventoryChange]:
    """Per day and attribute value, how many hosts took it (the inventory's rollouts)."""
    day = dialect_of(session).utc_day("changed_at")
    rows = session.execute(
        text(
            f"SELECT {day}, attribute, new_value, count(*) FROM host_attribute_changes "
            f"WHERE attribute <> 'labels' AND new_value IS NOT NULL GROUP BY {day}, attribute, new_value"
        )
    )
    return [
        InventoryChange(d if isinstance(d, date) else date.fromisoformat(str(d)), a, v, int(n))
        for d, a, v, n in rows
    ]
