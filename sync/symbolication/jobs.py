"""The symbols-arrived job: build-ids reports missed whose symbols are now in the store, however
they came (`crashreg symbols upload` on another machine, another registry process's upload or
fetch, a process that stopped before it was done), and their events fingerprinted again.
The process that receives symbols does this at once; the job is what makes it certain. It also
drops the notes of reports that were never stored."""

from __future__ import annotations

from registry import domains
from registry.core.wiring import load
from registry.db import utcnow
from registry.symbolication.misses import forget_unstored
from registry.symbolication.service import awaited, symbolicator_for
from sync.scheduler import JobContext, register_job

ARRIVED_SECONDS = 60


@register_job("symbols-arrived", seconds=ARRIVED_SECONDS)
def symbols_arrived(context: JobContext) -> dict[str, object]:
    forgotten = forget_unstored(context.database, utcnow())
    build_ids = awaited(context.database)
    if not build_ids:
        return {"build_ids": 0, "notes_forgotten": forgotten}
    wired = domains.wiring()
    symbolicator = symbolicator_for(context.settings, context.database, wired.signatures, load(wired.engine))
    try:
        symbolicator.prepare(build_ids)
        moved = [summary for build_id in sorted(build_ids)
                 if (summary := symbolicator.arrived(build_id)) is not None]
    finally:
        symbolicator.close()
        symbolicator.sources.close()
    return {"build_ids": len(build_ids), "notes_forgotten": forgotten,
            "events": sum(summary.events for summary in moved),
            "refingerprinted": sum(summary.refingerprinted for summary in moved)}
