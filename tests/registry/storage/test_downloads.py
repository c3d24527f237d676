"""Engineers reach a stored dump through short-lived links, each one on record: the event page,
the triage bundle, and the triage workspace's setup.sh fetching through the bundle's link."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import requests
from sqlalchemy import select

from registry.db import Database
from registry.rca.commands import write_bundle
from registry.storage.models import DumpDownload
from testkit.pages import csrf_from
from tests.support.dumps import Api, stored_dump
from tests.support.http import auth


def audits(database: Database) -> list[tuple[str, str]]:
    with database.session() as session:
        return [(a.via, a.actor) for a in session.scalars(select(DumpDownload).order_by(DumpDownload.id))]


def test_the_event_page_links_the_dump_and_records_who_downloaded_it(api: Api, database: Database) -> None:
    event, capture, data = stored_dump(api)
    browser = requests.Session()
    form = browser.get(f"{api.url}/login", timeout=30)
    logged = browser.post(f"{api.url}/login", timeout=30, data={
        "token": api.read, "next": f"/events/{event['event_id']}", "csrf_token": csrf_from(form.text)})
    assert logged.status_code == 200, logged.text[:300]
    page = logged.text
    link = f"/events/{event['event_id']}/captures/{capture['id']}/download"
    assert f'href="{link}"' in page
    assert audits(database) == []  # showing the page hands out nothing
    got = browser.get(api.url + link, timeout=60, allow_redirects=False)
    location = got.headers["Location"]
    assert got.status_code == 303 and ("expires=" in location or "X-Amz-Expires" in location), location
    assert requests.get(got.headers["Location"], timeout=60).content == data
    assert audits(database) == [("page", "engineer-ada")]
    other = browser.get(f"{api.url}/events/{event['event_id']}/captures/99999/download", timeout=30)
    assert other.status_code == 404


@pytest.mark.parametrize("encoding", ["identity", "xz"])
def test_the_triage_workspace_fetches_the_dump_through_the_bundles_link(
        api: Api, database: Database, tmp_path: Path, encoding: str) -> None:
    """The dump as it was written, a compressed one unpacked."""
    event, capture, data = stored_dump(api, encoding=encoding)
    bundle = requests.get(f"{api.url}/api/v1/signatures/{event['signature']['id']}/triage-bundle",
                          headers=auth(api.read), timeout=60)
    assert bundle.status_code == 200, bundle.text
    [dump] = bundle.json()["dumps"]
    assert dump["capture_id"] == capture["id"] and dump["download_url"] and dump["encoding"] == encoding
    assert audits(database) == [("bundle", "engineer-ada")]

    out = tmp_path / "bundle"
    write_bundle(bundle.json(), out)
    tools = tmp_path / "bin"  # no apt on this machine's test path: the debug info stays missing
    tools.mkdir()
    for name in ("apt-get", "apt-cache"):
        (tools / name).write_text("#!/bin/sh\nexit 1\n")
        (tools / name).chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "CRASHREG_DUMP_ROOT": str(tmp_path / "no-host-root"),
           "CRASHREG_WORKSPACE_SOURCE": "0"}
    done = subprocess.run(["sh", "setup.sh"], cwd=out, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr  # the vmlinux is missing, not the dump
    assert (out / dump["dump"]).read_bytes() == data, done.stderr
    assert f"event {event['event_id']} capture {capture['id']}: {dump['dump']}" in done.stderr
    assert json.loads((out / "bundle.json").read_text())["dumps"][0]["download_url"] == dump["download_url"]
