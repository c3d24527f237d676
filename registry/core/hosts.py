"""The fleet's hosts (the inventory: the denominators of every rate and correlation) and their history."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from registry.core.attributes import HOST_ATTRIBUTES
from registry.db import Base, utcnow


class HostAttributes:
    """The contract's host attributes as columns; shared by hosts and event snapshots."""

    physical_host: Mapped[str | None] = mapped_column(String(255))
    region: Mapped[str | None] = mapped_column(String(128))
    cluster: Mapped[str | None] = mapped_column(String(128))
    sku: Mapped[str | None] = mapped_column(String(128))
    cpu_model: Mapped[str | None] = mapped_column(String(255))
    microcode: Mapped[str | None] = mapped_column(String(64))
    bios_version: Mapped[str | None] = mapped_column(String(128))
    bmc_version: Mapped[str | None] = mapped_column(String(128))
    kernel_version: Mapped[str | None] = mapped_column(String(128))
    os_image: Mapped[str | None] = mapped_column(String(255))
    memory_gb: Mapped[int | None] = mapped_column(Integer)
    hypervisor: Mapped[str | None] = mapped_column(String(128))
    gpu_driver: Mapped[str | None] = mapped_column(String(128))
    labels: Mapped[dict[str, Any]] = mapped_column(default=dict)

    def attributes(self) -> dict[str, Any]:
        values: dict[str, Any] = {name: getattr(self, name) for name in HOST_ATTRIBUTES}
        values["labels"] = dict(self.labels or {})
        return values


# hosts.pstore_first_crash_at's comment. PostgreSQL: set by migration 0041 once every host has
# its value; ingest trusts the column from then on (registry.core.events.hosts_marked).
PSTORE_FIRST_CRASH_KEPT = "kept by the trigger events_pstore_first_crash (migration 0041)"


class Host(HostAttributes, Base):
    __tablename__ = "hosts"

    id: Mapped[int] = mapped_column(primary_key=True)
    hostname: Mapped[str] = mapped_column(String(255), unique=True)
    first_seen: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    booted_at: Mapped[datetime | None] = mapped_column(
        doc="last known boot time, for the fleet's uptime distribution"
    )
    in_inventory: Mapped[bool] = mapped_column(
        default=False, doc="reported through POST /hosts, not only seen in a crash report"
    )
    retired_at: Mapped[datetime | None]
    pstore_first_crash_at: Mapped[datetime | None] = mapped_column(
        comment=PSTORE_FIRST_CRASH_KEPT,
        doc="the newest crashed_at of the host's events a pstore record opened without the crashed "
        "boot's boot_id (kept by a trigger on events, migration 0041): a panic's report whose join "
        "window starts after it has no such event to join, known without reading events"
    )

    __table_args__ = (
        Index("ix_hosts_physical_host", "physical_host"),
        Index("ix_hosts_kernel_version", "kernel_version"),
    )


class HostAttributeChange(Base):
    """Attribute history: when a host's kernel, BIOS, ... changed (rollouts, fleet-as-it-was)."""

    __tablename__ = "host_attribute_changes"

    id: Mapped[int] = mapped_column(primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    attribute: Mapped[str] = mapped_column(String(64))
    old_value: Mapped[str | None] = mapped_column(String(255))
    new_value: Mapped[str | None] = mapped_column(String(255))
    changed_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (
        Index("ix_host_attribute_changes_host", "host_id", "changed_at"),
        Index("ix_host_attribute_changes_attr", "attribute", "changed_at"),
    )
