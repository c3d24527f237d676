"""`crashreg epidemiology program-label`: the program label stored in the database, which every
analysis on it uses unless the environment names one."""

from __future__ import annotations

from click.testing import CliRunner

from registry.cli import main
from registry.epidemiology.service import load_fleet
from testkit.reports import crash_report


def _run(db_url: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The exit code and what went to stdout (stderr names the database)."""
    result = CliRunner().invoke(main, ["epidemiology", "program-label", *args],
                                env={"CRASHREG_DATABASE_URL": db_url} | (env or {}))
    return result.exit_code, result.stdout if result.exit_code == 0 else result.stderr


def test_the_stored_label_is_shown_set_overridden_and_cleared(db_url) -> None:  # type: ignore[no-untyped-def]
    assert _run(db_url) == (0, "stored: (none: known from crash reports)\n")
    assert _run(db_url, "service") == (0, "stored: service\n")
    code, out = _run(db_url, env={"CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL": "role"})
    assert code == 0 and out.splitlines() == [
        "stored: service", "CRASHREG_EPIDEMIOLOGY_PROGRAM_LABEL=role overrides it in this environment"]
    code, out = _run(db_url, "role", "--clear")
    assert code == 2 and "give a LABEL or --clear, not both" in out
    assert _run(db_url, "--clear") == (0, "stored: (none: known from crash reports)\n")


def test_an_analysis_uses_the_stored_label_unless_it_is_given_one(  # type: ignore[no-untyped-def]
    db_url, client, make_token, database
) -> None:
    answer = client.post("/api/v1/reports", json=crash_report(),
                         headers={"Authorization": f"Bearer {make_token('report', 'agent')}"})
    assert answer.status_code == 201
    _run(db_url, "service")
    with database.session() as session:
        assert load_fleet(session).program_label == "service"
        assert load_fleet(session, "role").program_label == "role"
