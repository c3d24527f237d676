"""The triage pages over a large registry on PostgreSQL: what does a page cost beyond its analysis?

    .venv/bin/python bench/pages.py [--events 1000000] [--hosts 20000] [--runs 5] [--json OUT]

Builds the epidemiology bench's database (bench/epidemiology.py: `--events` events over 300
signatures, signature 2 holding 10% of them, signature 1 a BIOS-linked bug of ~1/300), adds one
real report through the ingest path (for an event page with a console log), stores the
refresh's verdicts, then renders through the real Flask app (test client, logged in with a read
token): the signature list, the page of signature 2 and of signature 1, the event page and the
unfingerprinted events' page. `--database-url URL` / `--history N` measure a kept registry
(bench/history.py's, where signature 2 is the largest) instead; each run ingests one report
into it, the refresh stores the verdicts of its first 60 signatures only (the largest; the
list's) and, as the whole refresh does at its end, the large signatures' samples, and the same
pages of an empty registry (1,000 hosts, no event) are the baseline.
Beside each signature page it times, in the same run, the live epidemiology analysis the page
includes (`signature_epidemiology`), so the page's own reads (chart, host counts, marks, latest
events, top hosts) show as the difference; the baseline is `SELECT count(*) FROM events`.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from epidemiology import built_database, count_events, population_parser, timed  # noqa: E402

from registry.app import create_app  # noqa: E402
from registry.auth.tokens import create_token  # noqa: E402
from registry.config import Settings  # noqa: E402
from registry.core.signatures import Signature  # noqa: E402
from registry.db import Database, utcnow  # noqa: E402
from registry.epidemiology.service import refresh, signature_epidemiology, store_samples  # noqa: E402
from testkit.pages import login  # noqa: E402
from testkit.reports import crash_report  # noqa: E402

REFRESHED_OF_HISTORY = 60  # signatures whose verdicts a kept registry's run stores (the list shows 50)


def median_s(function: Any, runs: int) -> float:
    return round(statistics.median(timed(function, runs)[0]), 3)


def get(client: Any, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)


class Enough(Exception):
    """The refresh has stored as many signatures' verdicts as asked."""


def refreshed(session: Any, signatures: int | None) -> dict[str, Any]:
    """The epidemiology refresh (stored verdicts, for the list), of the first `signatures`
    signatures in id order only when given (bench/history.py's largest come first: at 10 M a
    whole refresh takes hours); how long it took a signature."""
    started, done = time.perf_counter(), [0]

    def count(analysed: int, total: int) -> None:
        done[0] = analysed
        if signatures is not None and analysed >= signatures:
            raise Enough

    with contextlib.suppress(Enough):
        refresh(session, count)
    if signatures is not None:  # what the whole refresh does at its end
        store_samples(session, utcnow())
    seconds = time.perf_counter() - started
    return {"refreshed_signatures": done[0], "refresh_s_per_signature": round(seconds / max(done[0], 1), 3)}


def measure(url: str, runs: int, refresh_only: int | None = None) -> dict[str, Any]:
    database = Database(url)
    app = create_app(Settings(database_url=url), database)
    client = app.test_client()
    with database.session() as session:
        reporter, _ = create_token(session, "bench-report", "report")
        reader, _ = create_token(session, "bench-read", "read")
    answer = client.post(
        "/api/v1/reports", json=crash_report(host={"hostname": "bench-pages"}),  # not a storm's host
        headers={"Authorization": f"Bearer {reporter}"}
    ).json
    with database.session() as session:
        figures: dict[str, Any] = refreshed(session, refresh_only)
    login(client, reader)
    with database.session() as session:
        figures["scan_s"] = median_s(partial(count_events, session), runs)
    figures["list_s"] = median_s(partial(get, client, "/signatures"), runs)
    for name, signature_id in (("spread_signature_page", 2), ("bios_signature_page", 1)):
        get(client, f"/signatures/{signature_id}")  # warm: the first analysis builds shared caches
        page = median_s(partial(get, client, f"/signatures/{signature_id}"), runs)
        with database.session() as session:
            signature = session.get_one(Signature, signature_id)
            analysis = median_s(partial(signature_epidemiology, session, signature), runs)
        figures[name] = {
            "page_s": page,
            "analysis_s": analysis,
            "page_without_analysis_s": round(page - analysis, 3),
            "page_ratio_to_scan": round(page / max(figures["scan_s"], 0.001), 2),
        }
    figures["event_page_s"] = median_s(partial(get, client, f"/events/{answer['event_id']}"), runs)
    figures["unfingerprinted_s"] = median_s(partial(get, client, "/unfingerprinted"), runs)
    database.dispose()
    return figures


def main() -> int:
    args = population_parser(__doc__).parse_args()
    from history import history_url

    url = history_url(args)
    if url:
        figures = {"database": url.rsplit("/", 1)[1], "runs": args.runs}
        figures |= measure(url, args.runs, REFRESHED_OF_HISTORY)
        with built_database("crashreg_bench_pages", 1000, 0) as empty:  # the same run's baseline
            figures["empty_registry"] = measure(empty, args.runs)
    else:
        with built_database("crashreg_bench_pages", args.hosts, args.events) as url:
            figures = {"events": args.events, "hosts": args.hosts, "runs": args.runs}
            figures |= measure(url, args.runs)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
