"""`crashreg demo`: simulate, ingest over real HTTP, analyse, print, serve."""

from __future__ import annotations

import re

from click.testing import CliRunner

from registry.app import create_app
from registry.cli import main
from registry.cli_support import cli_database, cli_settings
from registry.config import Settings


def test_demo_feeds_the_api_and_prints_what_managers_and_engineers_want(db_url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CRASHREG_DATABASE_URL", db_url)
    cli_settings.cache_clear()
    cli_database.cache_clear()
    result = CliRunner().invoke(
        main, ["demo", "--no-serve", "--port", "0", "--physical-per-cluster", "10", "--seed", "3"]
    )
    cli_settings.cache_clear()
    cli_database.cache_clear()
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Ingesting crashes through the API" in out
    assert "== For the manager ==" in out and "== For the engineer" in out
    assert re.search(r"\d+ crashes on \d+ hosts in \d+ signatures", out)
    assert "single-host: physical_host=" in out
    assert "hardware-config: bios_version=2.1.4" in out
    assert "never on nodes up more than 3 days" in out
    assert "== Suspect physical hosts" in out and "distinct signatures" in out
    token = re.search(r"Read token: (\S+)", out).group(1)
    url = re.search(r"Registry: (http://\S+)", out).group(1)
    assert url.startswith("http://127.0.0.1:") and token.startswith("crs_")
    # --no-serve stopped the server; the read token it printed works on the same data
    client = create_app(Settings(database_url=db_url)).test_client()
    listed = client.get("/api/v1/epidemiology/hosts", headers={"Authorization": f"Bearer {token}"})
    assert listed.status_code == 200 and listed.json["hosts"]
