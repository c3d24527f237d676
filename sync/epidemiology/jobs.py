"""The epidemiology refresh the scheduler runs: verdicts, findings and suspects for Grafana."""

from __future__ import annotations

from registry.epidemiology.service import refresh
from sync.scheduler import JobContext, register_job

REFRESH_SECONDS = 900


@register_job("epidemiology-refresh", seconds=REFRESH_SECONDS)
def epidemiology_refresh(context: JobContext) -> dict[str, object]:
    with context.database.session() as session, context.database.reads(primary=session) as reads:
        outcome = refresh(session, program_label=context.settings.epidemiology_program_label, reads=reads)
    return {"signatures": outcome.signatures, "suspects": outcome.suspects, "verdicts": outcome.verdicts}
