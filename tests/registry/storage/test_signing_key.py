"""The local store's URL key: each deployment makes its own on first use (mode 0600), a key
others can read stops the registry at start, a rotation voids every URL signed before, and a
URL signed with any other key, for another object, or changed in any parameter, is refused.
Over HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from registry.app import create_app
from registry.cli import main
from registry.cli_support import CliContext
from registry.config import DumpStoreSettings, Settings
from registry.db import Database
from registry.storage.local import KEY_FILE, LocalStore, SigningKeyUnsafe
from tests.support.dumps import Api, content_md5, put, stored_dump

pytestmark = pytest.mark.parametrize("store_kind", ["local"])


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def link(api: Api, capture_id: str) -> str:
    answer = api.get(f"/api/v1/captures/{capture_id}/download")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["url"])


def refused(url: str, why: str) -> None:
    answer = requests.get(url, timeout=30)
    assert answer.status_code == 403, answer.text[:300]
    assert answer.json()["error"]["code"] == "forbidden" and why in answer.json()["error"]["message"]


def test_a_fresh_deployment_makes_its_own_key_and_refuses_urls_it_did_not_sign(
    api: Api, store_url: str, tmp_path: Path
) -> None:
    key = Path(store_url) / KEY_FILE
    assert not key.exists()  # nothing shipped: made on first use
    _, capture, data = stored_dump(api)
    assert mode(key) == 0o600 and len(key.read_text()) == 64
    genuine = link(api, capture["id"])
    assert requests.get(genuine, timeout=60).content == data

    object_path = genuine.split("?")[0].removeprefix(api.url)
    key_of_object = object_path.removeprefix("/dump-store/objects/")
    elsewhere = LocalStore(tmp_path / "another-deployment", api.url)  # its own key, as any other clone
    forged = elsewhere.presign_get(key_of_object, 600, "vmcore")
    assert forged.split("?")[0] == genuine.split("?")[0]
    refused(forged, "signature does not match")
    refused(genuine.replace("filename=", "filename=x"), "signature does not match")
    refused(genuine.replace("expires=", "expires=9"), "signature does not match")
    refused(genuine.split("&signature=")[0], "signature does not match")

    _, other, _ = stored_dump(api, "another_bug_function")  # bound to one object: not the next one
    other_path = link(api, other["id"]).split("?")[0]
    refused(other_path + "?" + genuine.split("?")[1], "signature does not match")

    ours = LocalStore(Path(store_url), api.url)  # the deployment's own key, its time up
    refused(ours.presign_get(key_of_object, -1, "vmcore"), "expired")


def test_rotating_the_key_voids_every_url_signed_before_in_the_running_registry(
    api: Api, settings: Settings, store_url: str
) -> None:
    _, capture, data = stored_dump(api)
    before = link(api, capture["id"])
    waiting = api.capture(api.event("half_uploaded_function")["event_id"])
    [part] = api.start(waiting["id"], 10).json()["part_urls"]
    old_key = (Path(store_url) / KEY_FILE).read_text()

    rotated = CliRunner().invoke(main, ["storage", "rotate-key"], obj=CliContext(settings))
    assert rotated.exit_code == 0, rotated.output
    assert "URLs signed before no longer work" in rotated.output
    key = Path(store_url) / KEY_FILE
    assert key.read_text() != old_key and mode(key) == 0o600

    refused(before, "signature does not match")  # the server was not restarted
    after = put(part["url"], b"0123456789", content_md5(b"0123456789"))
    assert after.status_code == 403, after.text
    assert requests.get(link(api, capture["id"]), timeout=60).content == data
    [again] = api.start(waiting["id"], 10).json()["part_urls"]  # a reporter asks anew
    assert put(again["url"], b"0123456789", content_md5(b"0123456789")).status_code == 200


def test_an_s3_store_has_no_key_to_rotate(settings: Settings) -> None:
    s3 = replace(settings, dump_store=DumpStoreSettings(url="s3://bucket/crash"))
    answer = CliRunner().invoke(main, ["storage", "rotate-key"], obj=CliContext(s3))
    assert answer.exit_code == 1 and "rotate those at the store" in answer.output


@pytest.mark.parametrize(
    ("key_mode", "content", "why"),
    [
        (0o644, "a" * 64, "readable by others than its owner (mode 0644)"),  # as a git checkout leaves it
        (0o640, "a" * 64, "(mode 0640)"),
        (0o604, "a" * 64, "(mode 0604)"),
        (0o600, "secret\n", "holds 6 characters"),
    ],
)
def test_a_key_others_can_read_or_too_short_stops_the_registry_at_start(
    settings: Settings, database: Database, store_url: str, key_mode: int, content: str, why: str
) -> None:
    key = Path(store_url) / KEY_FILE
    key.parent.mkdir(parents=True)
    key.write_text(content)
    key.chmod(key_mode)
    with pytest.raises(SigningKeyUnsafe) as stopped:
        create_app(settings, database)
    assert why in str(stopped.value) and str(key.resolve()) in str(stopped.value)
    assert "crashreg storage rotate-key" in str(stopped.value)

    assert CliRunner().invoke(main, ["storage", "rotate-key"], obj=CliContext(settings)).exit_code == 0
    assert mode(key) == 0o600
    create_app(settings, database)  # the rotated key is private: the registry starts


def test_a_key_made_readable_while_the_registry_runs_is_refused_until_rotated(
    api: Api, settings: Settings, store_url: str
) -> None:
    _, capture, data = stored_dump(api)
    genuine = link(api, capture["id"])
    (Path(store_url) / KEY_FILE).chmod(0o644)
    for answer in (requests.get(genuine, timeout=30), api.get(f"/api/v1/captures/{capture['id']}/download")):
        assert answer.status_code == 503, answer.text  # nothing signed or accepted with it
        assert answer.json()["error"]["code"] == "unavailable" and "signing key" in answer.text
        assert answer.headers["Retry-After"]
    assert CliRunner().invoke(main, ["storage", "rotate-key"], obj=CliContext(settings)).exit_code == 0
    refused(genuine, "signature does not match")
    assert requests.get(link(api, capture["id"]), timeout=60).content == data
