"""`crashreg import`: back-fill history from console logs and JSON report files."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from sqlalchemy import select

from registry.cli_support import CliContext, pass_cli
from registry.core.events import Report
from registry.errors import ApiError
from registry.fingerprint import analyse_report
from registry.ingest.api import REPORT_SCHEMA
from registry.ingest.schemas import MAX_CONSOLE_LOG_BYTES
from registry.ingest.service import ingest_report
from registry.requests import body_problems, load
from registry.signatures.commands import read_input

IMPORT_PREFIX = "import-"


def _files(paths: tuple[Path, ...]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            for root, dirs, names in os.walk(path):
                dirs.sort()
                yield from (Path(root) / name for name in sorted(names) if not name.startswith("."))
        else:
            yield path


def import_report(path: Path, hostname: str | None) -> dict[str, Any] | None:
    """A contract report for a file, or None for a console log holding no crash."""
    console_log, _, report = read_input(path)
    if report is not None:
        report = dict(report)
        report.setdefault("report_id", IMPORT_PREFIX + hashlib.sha256(path.read_bytes()).hexdigest()[:40])
        return report
    tail = (console_log or "").encode()[-MAX_CONSOLE_LOG_BYTES:].decode("utf-8", "ignore")
    if analyse_report(tail, None) is None:
        return None
    mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return {
        "report_id": IMPORT_PREFIX + hashlib.sha256(path.read_bytes()).hexdigest()[:40],
        "source": "crash_kernel",
        "crashed_at": mtime.isoformat().replace("+00:00", "Z"),
        "host": {"hostname": hostname or path.parent.name or "unknown"},
        "console_log": tail,
    }


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--hostname", help="host of console logs (default: the directory holding each log)")
@pass_cli
def import_command(cli: CliContext, paths: tuple[Path, ...], hostname: str | None) -> None:
    """Back-fill history from console logs and JSON report files (idempotent on re-run).

    A JSON report file is ingested as is (its report_id, or one derived from its content); a
    console log becomes a crash_kernel report whose report_id is derived from its content,
    crashed at the file's modification time. Logs without a crash are skipped.
    """
    database, settings = cli.database(), cli.settings
    files = list(_files(paths))
    outcome: Counter[str] = Counter()
    problems: list[str] = []
    with click.progressbar(files, label="importing", file=None) as bar:
        for path in bar:
            raw = import_report(path, hostname)
            if raw is None:
                outcome["no crash"] += 1
                continue
            with database.session() as session:
                seen = session.scalar(select(Report.id).where(Report.report_id == str(raw["report_id"])))
            if seen is not None:
                outcome["already imported"] += 1
                continue
            try:
                unstorable = body_problems(raw)  # as the API refuses them: a NUL, a lone surrogate, ...
                if unstorable:
                    raise ApiError(400, "invalid", "values that cannot be stored", fields=unstorable)
                result = ingest_report(database, settings, load(REPORT_SCHEMA, raw), raw)
            except ApiError as error:
                outcome["rejected"] += 1
                problems.append(f"{path}: {error.message} {json.dumps(error.fields or {})}")
                continue
            outcome["imported" if result.created else "already imported"] += 1
    click.echo(", ".join(f"{name}: {count}" for name, count in sorted(outcome.items()))
               or "nothing to import")
    for problem in problems:
        click.echo(problem, err=True)
