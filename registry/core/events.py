"""Crash events (one per crash) and the raw reports (one per source) that make them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    ForeignKey,
    Index,
    Integer,
    Select,
    String,
    Text,
    UniqueConstraint,
    column,
    exists,
    select,
    table,
    text,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from registry.core.hosts import PSTORE_FIRST_CRASH_KEPT, HostAttributes
from registry.db import Base, utcnow

REPORT_SOURCES = ("crash_kernel", "dpu", "post_boot", "userspace", "live_kernel", "pstore")
# Sources that report a panic while it happens (a pstore record is its log after the reboot).
PANIC_SOURCES = ("crash_kernel", "dpu")


class Event(HostAttributes, Base):
    """One crash. Host attributes are a snapshot at crash time: history must not change."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id"))
    hostname: Mapped[str] = mapped_column(String(255))
    boot_key: Mapped[str] = mapped_column(
        String(160), doc="boot_id, or the first report_id when the reporter sent no boot_id"
    )
    boot_id: Mapped[str | None] = mapped_column(String(128))
    signature_id: Mapped[int | None] = mapped_column(ForeignKey("signatures.id"))
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    algorithm_version: Mapped[int | None] = mapped_column(Integer)
    title: Mapped[str | None] = mapped_column(String(512))
    explanation: Mapped[dict[str, Any] | None] = mapped_column(
        doc="the engine's record of how the fingerprint was made (CrashSignature.explanation)"
    )
    crashed_at: Mapped[datetime]
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
    uptime_s: Mapped[int | None] = mapped_column(BigInteger)
    # a userspace crash's process (the report's stack): the program's release, when it started
    program_version: Mapped[str | None] = mapped_column(
        String(128), doc="stack.process.version, else the executable's stack.build_id"
    )
    process_started_at: Mapped[datetime | None] = mapped_column()
    process_uptime_s: Mapped[int | None] = mapped_column(BigInteger)
    repeats: Mapped[int] = mapped_column(
        BigInteger, default=0, server_default="0",
        doc="further occurrences of the same report in the same boot (a WARN_ON in a hot path), "
        "summed from its reports' repeat_count",
    )
    first_source: Mapped[str] = mapped_column(String(16))
    sources: Mapped[list[Any]] = mapped_column(default=list)
    capture_action: Mapped[str] = mapped_column(String(16))
    capture_reason: Mapped[str] = mapped_column(String(255))
    capture_dump_level: Mapped[int | None] = mapped_column(Integer)
    regression: Mapped[str | None] = mapped_column(
        String(32), doc="regressed | old-kernel | None: how this event bore on a resolved signature"
    )
    fingerprint_error: Mapped[str | None] = mapped_column(
        String(512), doc="the signature engine failed on this event's report: the exception, until "
        "`crashreg signatures rebuild` fingerprints it (None: fingerprinted, or no crash)"
    )

    __table_args__ = (
        # On PostgreSQL events is partitioned by id (docs/partitioning.md): its natural key is kept
        # by the event_keys table and a trigger; each partition indexes it (not unique) for reads.
        UniqueConstraint("host_id", "boot_key").ddl_if(dialect="sqlite"),
        Index("ix_events_host_boot", "host_id", "boot_key").ddl_if(dialect="postgresql"),
        # PostgreSQL has ix_events_signature_crashed_report on the same keys (migration 0027).
        Index("ix_events_signature_crashed", "signature_id", "crashed_at").ddl_if(dialect="sqlite"),
        Index("ix_events_crashed_at", "crashed_at"),
        Index("ix_events_host_crashed", "host_id", "crashed_at"),
        Index("ix_events_unfingerprinted", "id", postgresql_where=text("fingerprint_error IS NOT NULL"),
              sqlite_where=text("fingerprint_error IS NOT NULL")),
        # Events without a signature, whatever the cause (/unfingerprinted, its API and gauges).
        Index("ix_events_without_signature", "id", postgresql_where=text("signature_id IS NULL"),
              sqlite_where=text("signature_id IS NULL")),
        # Covering and partial indexes for Grafana's panels (PostgreSQL only; migration 0011).
        Index(
            "ix_events_signature_crashed_report",
            "signature_id",
            "crashed_at",
            postgresql_include=[
                "hostname",
                "physical_host",
                "region",
                "sku",
                "kernel_version",
                "bios_version",
                "uptime_s",
            ],
        ).ddl_if(dialect="postgresql"),
        Index("ix_events_regressed", "crashed_at", postgresql_where=text("regression IS NOT NULL")).ddl_if(
            dialect="postgresql"
        ),
        Index(
            "ix_events_capture_action_crashed",
            "capture_action",
            "crashed_at",
            postgresql_include=["id", "memory_gb"],
        ).ddl_if(dialect="postgresql"),
    )


class Report(Base):
    """A source's raw report, kept for re-fingerprinting; report_id is the idempotency key."""

    __tablename__ = "reports"

    id: Mapped[int] = mapped_column(primary_key=True)
    report_id: Mapped[str] = mapped_column(String(128))
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"))
    source: Mapped[str] = mapped_column(String(16))
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
    payload_sha256: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column()
    console_log: Mapped[str | None] = mapped_column(Text)
    answer: Mapped[dict[str, Any]] = mapped_column(doc="the first answer, replayed verbatim")

    __table_args__ = (
        Index("ix_reports_event", "event_id"),
        # PostgreSQL: unique by the report_keys table and a trigger (docs/partitioning.md).
        UniqueConstraint("report_id").ddl_if(dialect="sqlite"),
        Index("ix_reports_report_id", "report_id").ddl_if(dialect="postgresql"),
    )


# PostgreSQL: a report's report_id -> its row's id, the natural key of the partitioned
# `reports` (migration 0034, docs/partitioning.md). Found through it, a report_id is one index
# entry to read instead of one per partition.
REPORT_KEYS = table("report_keys", column("report_id", String), column("id", Integer))
# What a PostgreSQL database's schema says about ingest's reads, asked once per connection:
# whether `reports` is partitioned (0034), and whether hosts carry pstore_first_crash_at (0041).
SCHEMA_FACTS = (
    "SELECT (SELECT relkind = 'p' FROM pg_class WHERE oid = 'reports'::regclass), "
    "EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'hosts'::regclass "
    "AND attname = 'pstore_first_crash_at' AND NOT attisdropped "
    f"AND col_description(attrelid, attnum) = '{PSTORE_FIRST_CRASH_KEPT}')"
)


def reports_keyed(connection: Connection) -> bool:
    """Whether this connection's database finds reports through REPORT_KEYS: PostgreSQL once
    migration 0034 has partitioned `reports` (its keys are complete then). Before, a release
    serving while `crashreg db upgrade` converts its database reads `reports` by report_id.
    Asked once per database connection: one that asked before the conversion keeps reading by
    report_id, which stays right after it."""
    return _schema_facts(connection)[0]


def hosts_marked(connection: Connection) -> bool:
    """Whether this connection's database keeps hosts' pstore_first_crash_at: PostgreSQL once
    migration 0041 has given every host its value, which the column's comment then says (before,
    a host's value may be missing). Asked once per database connection, as reports_keyed."""
    return _schema_facts(connection)[1]


def _schema_facts(connection: Connection) -> tuple[bool, bool]:
    facts = connection.info.get("ingest_schema_facts")
    if facts is None:
        if connection.dialect.name != "postgresql":
            facts = (False, False)
        else:
            keyed, marked = connection.exec_driver_sql(SCHEMA_FACTS).one()
            facts = (bool(keyed), bool(marked))
        connection.info["ingest_schema_facts"] = facts
    return facts


def by_report_id(keyed: bool, report_id: Any) -> ColumnElement[bool]:
    """The condition on `reports` that finds the report with `report_id` (`keyed`: through
    REPORT_KEYS)."""
    reports = Report.__table__.c  # type: ignore[attr-defined]
    if not keyed:
        return reports.report_id == report_id
    return reports.id == stored_report_id(keyed, report_id).scalar_subquery()


def stored_report_id(keyed: bool, report_id: Any) -> Select[Any]:
    """The `reports.id` of the report with `report_id`, one row or none (`keyed`: read from
    REPORT_KEYS alone)."""
    if keyed:
        return select(REPORT_KEYS.c.id).where(REPORT_KEYS.c.report_id == report_id)
    reports = Report.__table__.c  # type: ignore[attr-defined]
    return select(reports.id).where(reports.report_id == report_id)


def report_id_stored(keyed: bool, report_id: Any) -> ColumnElement[bool]:
    """Whether a report with `report_id` is stored (`keyed`: read from REPORT_KEYS alone)."""
    key = REPORT_KEYS.c.report_id if keyed else Report.__table__.c.report_id  # type: ignore[attr-defined]
    return exists().where(key == report_id)


class CaptureAnswer(TypedDict):
    """A capture decision on the wire: the ingest answer's and the event's `capture`."""

    action: str
    reason: str
    dump_level: int | None


class EventSummary(TypedDict):
    """An event in a signature's event list."""

    id: str
    hostname: str
    boot_id: str | None
    crashed_at: str
    received_at: str
    uptime_s: int | None
    repeats: int
    sources: list[str]
    host: dict[str, Any]  # host attributes at crash time, labels among them
    signature_id: str | None
    fingerprint: str | None
    title: str | None
    algorithm_version: int | None
    fingerprint_error: str | None  # the engine failed on the report (no signature until a rebuild)
    capture: CaptureAnswer
    regression: str | None


def event_summary(event: Event) -> EventSummary:
    return {
        "id": str(event.id),
        "hostname": event.hostname,
        "boot_id": event.boot_id,
        "crashed_at": event.crashed_at.isoformat(),
        "received_at": event.received_at.isoformat(),
        "uptime_s": event.uptime_s,
        "repeats": event.repeats,
        "sources": list(event.sources),
        "host": event.attributes(),
        "signature_id": str(event.signature_id) if event.signature_id else None,
        "fingerprint": event.fingerprint,
        "title": event.title,
        "algorithm_version": event.algorithm_version,
        "fingerprint_error": event.fingerprint_error,
        "capture": {
            "action": event.capture_action,
            "reason": event.capture_reason,
            "dump_level": event.capture_dump_level,
        },
        "regression": event.regression,
    }



def userspace_stacks(session: Session, event_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Per event: the `stack` of its first core reader's report (a userspace crash's frames,
    registers, evidence, process), kept whole in the report's payload."""
    stacks: dict[int, dict[str, Any]] = {}
    if not event_ids:
        return stacks
    rows = session.execute(
        select(Report.event_id, Report.payload)
        .where(Report.event_id.in_(event_ids), Report.source == "userspace")
        .order_by(Report.received_at, Report.id))
    for event_id, payload in rows:
        stack = (payload or {}).get("stack")
        if isinstance(stack, dict):
            stacks.setdefault(event_id, stack)
    return stacks
