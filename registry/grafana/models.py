"""What crashreg last wrote to Grafana: to stay idempotent and to notice edits made there."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from registry.db import Base, utcnow


class GrafanaProvisioned(Base):
    """One provisioned object (folder, data source, dashboard) as of its last provisioning."""

    __tablename__ = "grafana_provisioned"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int | None] = mapped_column(Integer, doc="Grafana's version after our save")
    content_sha256: Mapped[str] = mapped_column(String(64))
    provisioned_at: Mapped[datetime] = mapped_column(default=utcnow)


class GrafanaAnnotation(Base):
    """An annotation pushed to Grafana, keyed by rpt_annotations.annotation_key (pushed once)."""

    __tablename__ = "grafana_annotations"

    annotation_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    grafana_id: Mapped[int] = mapped_column(Integer)
    pushed_at: Mapped[datetime] = mapped_column(default=utcnow)
