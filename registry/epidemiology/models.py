"""Stored epidemiology (refreshed by the scheduler): what Grafana's dashboard reads.

- `epidemiology_verdicts`: one row per signature, the verdict and its headline numbers.
- `epidemiology_findings`: the over-represented attribute values, per signature and baseline.
- `epidemiology_components`: a mixed signature's parts: concentrated components, then the
  spread part (migration 0016).
- `epidemiology_suspect_hosts`: fleet-wide suspects (physical hosts spraying signatures).
- `epidemiology_settings`: what the analysis is configured with in the database (the program
  label, set by `crashreg epidemiology program-label` or `crashreg demo`; migration 0022).
- `epidemiology_samples`, `epidemiology_sample_groups`, `epidemiology_sample_counts`
  (PostgreSQL): a large signature's events as the refresh last grouped and counted them, so a
  request reads only the events since (see `queries.stored_sample`; counts: migration 0038).

And, on PostgreSQL, the two indexes on `events` a signature's analysis reads through
(migration 0014; see `SAMPLE_FITS`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from registry.core.events import Event
from registry.core.hosts import HostAttributes
from registry.db import Base, utcnow

from .attributes import HOST_ATTRIBUTES

# What a signature's analysis reads of each event to group it by host snapshot.
SNAPSHOT_COLUMNS: tuple[str, ...] = ("host_id", *HOST_ATTRIBUTES, "labels")

# A btree entry holds at most 2,704 bytes and labels are unbounded (a host may carry dozens of
# long ones): events whose attribute values and labels take more than 2,048 bytes of text stay
# out of the covering index (in a small one of their own), so no insert fails for its sake.
# The test is a PL/pgSQL function (migration 0014), one call in each index's predicate: the
# same sum written inline is compiled for every single-row INSERT (the predicates measured
# +51 us per insert inline, +9 us as the call). The query repeats the call so the planner can
# use the partial indexes.
SAMPLE_FITS = f"epidemiology_row_fits({', '.join(HOST_ATTRIBUTES)}, labels)"


class EpidemiologySetting(Base):
    """A setting stored with the data it describes, so every process on the database (the
    server, the scheduler, `crashreg demo`) analyses alike; the environment overrides it."""

    __tablename__ = "epidemiology_settings"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(255))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class EpidemiologyVerdict(Base):
    __tablename__ = "epidemiology_verdicts"

    signature_id: Mapped[int] = mapped_column(
        ForeignKey("signatures.id", ondelete="CASCADE"), primary_key=True
    )
    verdict: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text)
    baseline: Mapped[str] = mapped_column(String(16), doc="fleet | crashes: what decided")
    events: Mapped[int] = mapped_column(Integer)
    hosts: Mapped[int] = mapped_column(Integer)
    top_attribute: Mapped[str | None] = mapped_column(String(64))
    top_value: Mapped[str | None] = mapped_column(String(255))
    top_in_signature: Mapped[float | None] = mapped_column(Float)
    top_overall: Mapped[float | None] = mapped_column(Float)
    top_lift: Mapped[float | None] = mapped_column(Float)
    top_p_value: Mapped[float | None] = mapped_column(Float)
    more_events_needed: Mapped[int | None] = mapped_column(Integer)
    first_seen: Mapped[datetime | None]
    change_point: Mapped[datetime | None]
    onset_shape: Mapped[str | None] = mapped_column(String(32))
    uptime_statement: Mapped[str | None] = mapped_column(Text)
    analysis: Mapped[dict[str, Any]] = mapped_column(doc="the full endpoint body")
    computed_at: Mapped[datetime]
    concentrated: Mapped[int | None] = mapped_column(Integer, doc="a mixture's concentrated components")
    summary: Mapped[str | None] = mapped_column(Text, doc="the analysis in sentences, one a line")

    __table_args__ = (Index("ix_epidemiology_verdicts_verdict", "verdict"),)


class EpidemiologyComponent(Base):
    """One part of a mixed signature: a concentrated component or the spread part."""

    __tablename__ = "epidemiology_components"

    id: Mapped[int] = mapped_column(primary_key=True)
    signature_id: Mapped[int] = mapped_column(ForeignKey("signatures.id", ondelete="CASCADE"))
    rank: Mapped[int] = mapped_column(Integer, doc="concentrated parts first, strongest first")
    kind: Mapped[str] = mapped_column(String(16), doc="concentrated | spread")
    attribute: Mapped[str | None] = mapped_column(String(64))
    value: Mapped[str | None] = mapped_column(String(255))
    events: Mapped[int] = mapped_column(Integer)
    share: Mapped[float] = mapped_column(Float)
    expected_events: Mapped[float | None] = mapped_column(Float, doc="what the spread part predicts")
    hosts: Mapped[int] = mapped_column(Integer)
    first_seen: Mapped[datetime | None]
    since: Mapped[datetime | None]
    uptime_median_days: Mapped[float | None] = mapped_column(Float)
    uptime_statement: Mapped[str | None] = mapped_column(Text)
    verdict: Mapped[str | None] = mapped_column(String(32), doc="the spread part's")
    statement: Mapped[str] = mapped_column(Text)
    computed_at: Mapped[datetime]

    __table_args__ = (Index("ix_epidemiology_components_signature", "signature_id"),)


class EpidemiologyFinding(Base):
    __tablename__ = "epidemiology_findings"

    id: Mapped[int] = mapped_column(primary_key=True)
    signature_id: Mapped[int] = mapped_column(ForeignKey("signatures.id", ondelete="CASCADE"))
    baseline: Mapped[str] = mapped_column(String(16))
    rank: Mapped[int] = mapped_column(Integer, doc="1 = strongest")
    attribute: Mapped[str] = mapped_column(String(64))
    value: Mapped[str] = mapped_column(String(255))
    in_signature: Mapped[float] = mapped_column(Float)
    overall: Mapped[float] = mapped_column(Float)
    lift: Mapped[float] = mapped_column(Float)
    p_value: Mapped[float] = mapped_column(Float)
    log10_p: Mapped[float] = mapped_column(Float)
    events: Mapped[int] = mapped_column(Integer)
    explained_by: Mapped[str | None] = mapped_column(String(320))
    computed_at: Mapped[datetime]

    __table_args__ = (Index("ix_epidemiology_findings_signature", "signature_id", "baseline"),)


class EpidemiologySuspectHost(Base):
    __tablename__ = "epidemiology_suspect_hosts"

    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    physical_host: Mapped[str] = mapped_column(String(255))
    crashes: Mapped[int] = mapped_column(Integer)
    signatures: Mapped[int] = mapped_column(Integer)
    expected_signatures: Mapped[float] = mapped_column(Float)
    p_value: Mapped[float] = mapped_column(Float)
    log10_p: Mapped[float] = mapped_column(Float)
    evidence: Mapped[str] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column()
    computed_at: Mapped[datetime]


BigIntegerList = JSON().with_variant(ARRAY(BigInteger), "postgresql")


class EpidemiologySample(Base):
    """A large signature's events up to `watermark` (event id), as the refresh grouped them
    (an event's host snapshot, time and uptime never change). Valid while no event moved into
    or out of the signatures at or below the watermark since (queries.stored_sample)."""

    __tablename__ = "epidemiology_samples"

    signature_id: Mapped[int] = mapped_column(
        ForeignKey("signatures.id", ondelete="CASCADE"), primary_key=True
    )
    signature_ids: Mapped[list[Any]] = mapped_column(doc="the signature and those merged into it, ascending")
    watermark: Mapped[int] = mapped_column(Integer)
    events: Mapped[int] = mapped_column(Integer)
    first_event_id: Mapped[int | None] = mapped_column(Integer, doc="its lowest event id (none: no events)")
    daily: Mapped[dict[str, Any]] = mapped_column(doc="events per UTC day (YYYY-MM-DD)")
    uptimes: Mapped[list[int]] = mapped_column(BigIntegerList, doc="the events' uptimes, ascending")
    computed_at: Mapped[datetime]
    inventory_version: Mapped[str | None] = mapped_column(Text, doc="the inventory the two below weighed")
    inventory_events: Mapped[int | None] = mapped_column(Integer, doc="events on hosts the inventory knew")
    unrecorded_changes: Mapped[int | None] = mapped_column(Integer, doc="see `queries._inventory_sql`")


class EpidemiologySampleCount(Base):
    """A sample's events per attribute value (every value: hostnames and labels too), so a
    request adds the events since the sample instead of counting its groups again."""

    __tablename__ = "epidemiology_sample_counts"

    signature_id: Mapped[int] = mapped_column(
        ForeignKey("epidemiology_samples.signature_id", ondelete="CASCADE"), primary_key=True
    )
    attribute: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text, primary_key=True)
    n: Mapped[int] = mapped_column(Integer)


# A signature's most frequent values of an attribute (its busiest hosts): an index range
# (PostgreSQL, where samples are stored).
Index(
    "ix_epidemiology_sample_counts_top",
    EpidemiologySampleCount.signature_id,
    EpidemiologySampleCount.attribute,
    EpidemiologySampleCount.n.desc(),
    EpidemiologySampleCount.value,
).ddl_if(dialect="postgresql")


class EpidemiologySampleGroup(HostAttributes, Base):
    """A sample's events grouped by host snapshot: `n` events of one host with these values."""

    __tablename__ = "epidemiology_sample_groups"

    id: Mapped[int] = mapped_column(primary_key=True)
    signature_id: Mapped[int] = mapped_column(
        ForeignKey("epidemiology_samples.signature_id", ondelete="CASCADE")
    )
    host_id: Mapped[int] = mapped_column(Integer)
    hostname: Mapped[str] = mapped_column(String(255))
    n: Mapped[int] = mapped_column(Integer)

    __table_args__ = (Index("ix_epidemiology_sample_groups_signature", "signature_id"),)


# A signature's events, read index-only (PostgreSQL): contiguous leaf pages instead of one heap
# page per event (a large signature's events are spread over the whole table).
_events = Event.__table__.c
# Keyed by event id within the signature: the events since a stored sample's watermark are a
# range, and new events append at the end of their signature's range.
Index(
    "ix_events_epidemiology",
    _events.signature_id,
    _events.id,
    postgresql_include=[*SNAPSHOT_COLUMNS, "crashed_at", "uptime_s"],
    postgresql_where=text(SAMPLE_FITS),
).ddl_if(dialect="postgresql")
Index(
    "ix_events_epidemiology_wide",
    _events.signature_id,
    _events.id,
    postgresql_where=text(f"NOT ({SAMPLE_FITS})"),
).ddl_if(dialect="postgresql")
