"""Rollups: counts of events kept current by folding a queue of changes, never by scanning events.

Every change to an event that a rollup counts (insert, update of a counted column, delete) adds
a row to `rollup_changes` from a trigger on `events`, inside the changing transaction: an append,
no row shared by two reports, so a storm of one signature does not serialise on a rollup row.
The rollups job folds the queue into the tables below (docs/rollups.md). Detaching an events
partition (an archive) fires no trigger: the rollups stay the record of what was counted.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import BigInteger, Date, Float, Integer, SmallInteger, String, text
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow

QueueId = BigInteger().with_variant(Integer, "sqlite")  # SQLite: the rowid, given in order


class RollupChange(Base):
    """One event counted in (+1) or out (-1) of the rollups, as the event was then."""

    __tablename__ = "rollup_changes"

    id: Mapped[int] = mapped_column(QueueId, primary_key=True)
    event_id: Mapped[int | None] = mapped_column(Integer, doc="the event (queued before 0039: none)")
    delta: Mapped[int] = mapped_column(SmallInteger)
    signature_id: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str | None] = mapped_column(String(64), doc="the signature's kind")
    host_id: Mapped[int] = mapped_column(Integer)
    crashed_at: Mapped[datetime]
    region: Mapped[str | None] = mapped_column(String(128))
    kernel_version: Mapped[str | None] = mapped_column(String(128))
    capture_action: Mapped[str | None] = mapped_column(String(16))
    regression: Mapped[str | None] = mapped_column(String(32))
    bios_version: Mapped[str | None] = mapped_column(String(128))
    sku: Mapped[str | None] = mapped_column(String(128))
    first_source: Mapped[str | None] = mapped_column(String(16))
    memory_gb: Mapped[int | None] = mapped_column(Integer)
    repeats: Mapped[int] = mapped_column(BigInteger)


class RollupBackfill(Base):
    """Present while a group of rollups must be built from the database once (after the
    migration that made them, on a registry that had rows): the next fold builds them first."""

    __tablename__ = "rollup_backfills"

    rollups: Mapped[str] = mapped_column(String(16), primary_key=True, server_default=text("'events'"),
                                         doc="a group of registry.rollups.fold.GROUPS")
    requested_at: Mapped[datetime] = mapped_column(default=utcnow)


class BreakdownDaily(Base):
    """Events per UTC day and value of one dimension (what `rpt_daily_breakdown` shows)."""

    __tablename__ = "rollup_breakdown_daily"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    dimension: Mapped[str] = mapped_column(String(32), primary_key=True)
    value: Mapped[str] = mapped_column(String(255), primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)
    memory_gb: Mapped[int] = mapped_column(BigInteger, doc="summed over the events whose memory is known")
    memory_known: Mapped[int] = mapped_column(BigInteger, doc="how many events' memory is known")
    repeats: Mapped[int] = mapped_column(BigInteger)


class SignatureHostDaily(Base):
    """Events per signature, UTC day and host: what makes the daily host counts exact."""

    __tablename__ = "rollup_signature_host_daily"

    signature_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    host_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)


class SignatureDaily(Base):
    """Events and distinct hosts per signature and UTC day (`rpt_signature_daily`)."""

    __tablename__ = "rollup_signature_daily"

    signature_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)
    hosts: Mapped[int] = mapped_column(BigInteger)


class SignatureSources(Base):
    """Events and their repeats per signature and first source (the list's "from where")."""

    __tablename__ = "rollup_signature_sources"

    signature_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(16), primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)
    repeats: Mapped[int] = mapped_column(BigInteger)


class RollupCaptureChange(Base):
    """One capture counted in (+1) or out (-1) of `rollup_capture_daily`, with its event's
    counted columns as they were then (migration 0037's triggers on captures and events)."""

    __tablename__ = "rollup_capture_changes"

    id: Mapped[int] = mapped_column(QueueId, primary_key=True)
    delta: Mapped[int] = mapped_column(SmallInteger)
    crashed_at: Mapped[datetime]
    capture_action: Mapped[str | None] = mapped_column(String(16))
    memory_gb: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    bytes: Mapped[int | None] = mapped_column(BigInteger)
    duration_s: Mapped[float | None] = mapped_column(Float)
    downtime_s: Mapped[float | None] = mapped_column(Float)


class RollupHostChange(Base):
    """One host counted in (+1) or out (-1) of the fleet, as it was then."""

    __tablename__ = "rollup_host_changes"

    id: Mapped[int] = mapped_column(QueueId, primary_key=True)
    delta: Mapped[int] = mapped_column(SmallInteger)
    host_id: Mapped[int] = mapped_column(Integer)
    first_seen: Mapped[datetime]
    retired_at: Mapped[datetime | None]


class CaptureDaily(Base):
    """Captures per UTC day of the crash, decision, status, host memory and duration
    (`rpt_capture_daily`). The key has no NULLs: no decision is '', no memory or duration -1.
    Downtime is summed in whole microseconds: integer sums stay exact as captures come and go."""

    __tablename__ = "rollup_capture_daily"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    capture_action: Mapped[str] = mapped_column(String(16), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    memory_gb: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    duration_s: Mapped[float] = mapped_column(Float, primary_key=True, doc="PostgreSQL: its 5% bucket's top")
    captures: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    bytes_known: Mapped[int] = mapped_column(BigInteger)
    downtime_us: Mapped[int] = mapped_column(BigInteger)
    downtime_known: Mapped[int] = mapped_column(BigInteger)


class HostDays(Base):
    """Per host and UTC day: its crashes that day, plus one on the day of its first sighting.
    A host joins the fleet on its earliest such day (what `rpt_fleet_daily` counts from)."""

    __tablename__ = "rollup_host_days"

    host_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    marks: Mapped[int] = mapped_column(BigInteger)


class FleetDaily(Base):
    """Hosts joining and retiring per UTC day: `rpt_fleet_daily` is their running sum."""

    __tablename__ = "rollup_fleet_daily"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    joined: Mapped[int] = mapped_column(BigInteger)
    retired: Mapped[int] = mapped_column(BigInteger)


class RollupKernelHost(Base):
    """A host whose kernel intervals must be computed again: migration 0048's triggers on a
    host's kernel and its recorded kernel changes (the fold also takes the fleet queue's hosts,
    and a host whose first day in the fleet moved)."""

    __tablename__ = "rollup_kernel_hosts"

    id: Mapped[int] = mapped_column(QueueId, primary_key=True)
    host_id: Mapped[int] = mapped_column(Integer)


class KernelInterval(Base):
    """A stretch of time a host ran one kernel version, as `registry.rollups.kernels` computes
    it from the inventory: what `rollup_kernel_daily` and `rollup_kernel_gaps` hold the sums of."""

    __tablename__ = "rollup_kernel_intervals"

    host_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    valid_from: Mapped[datetime] = mapped_column(primary_key=True)
    kernel_version: Mapped[str] = mapped_column(String(255))
    valid_to: Mapped[datetime | None] = mapped_column(doc="None: still running it")


class KernelDaily(Base):
    """Per UTC day and kernel version: the intervals starting and ending that day, and the sums of
    their moments in microseconds after the day's midnight (an end at midnight counts to the day
    before, at 86,400 s). Host-time over any range is a sum of these (`rpt_kernel_daily`)."""

    __tablename__ = "rollup_kernel_daily"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    kernel_version: Mapped[str] = mapped_column(String(255), primary_key=True)
    starts: Mapped[int] = mapped_column(BigInteger)
    ends: Mapped[int] = mapped_column(BigInteger)
    start_us: Mapped[int] = mapped_column(BigInteger)
    end_us: Mapped[int] = mapped_column(BigInteger)


class KernelGaps(Base):
    """A host that ran a kernel again after running another (a rollback): per kernel, the day its
    earlier interval ended and the day the next began. What makes distinct hosts over a range
    exact (`rpt_kernel_gaps`): such a host's two intervals must count once."""

    __tablename__ = "rollup_kernel_gaps"

    kernel_version: Mapped[str] = mapped_column(String(255), primary_key=True)
    ended_day: Mapped[date] = mapped_column(Date, primary_key=True)
    resumed_day: Mapped[date] = mapped_column(Date, primary_key=True)
    gaps: Mapped[int] = mapped_column(BigInteger)
