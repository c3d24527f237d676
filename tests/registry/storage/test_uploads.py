"""A capture's dump goes to the store through pre-signed multipart URLs, plain HTTP PUTs; the
registry checks the parts against the reporter's MD5s before it completes the upload, and the
capture follows. On moto's S3 server and on the local store, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import select

from agents.reporter.upload import Uploader, UploadError, prepare
from registry.config import Settings
from registry.db import Database
from registry.storage.api import STORE_RETRY_AFTER_S
from registry.storage.local import LocalStore
from registry.storage.models import Dump, DumpDownload
from registry.storage.store import DumpStore, open_store
from tests.support.dumps import PART, Api, content_md5, md5_hex, parts_of, put
from tests.support.http import auth


def test_a_dump_lands_through_presigned_urls_and_the_capture_follows(api: Api, database: Database) -> None:
    dump = os.urandom(2 * PART + 12345)
    event = api.event()
    capture = api.capture(event["event_id"])
    started = api.start(capture["id"], len(dump))
    assert started.status_code == 200, started.text
    answer = started.json()
    assert answer["dump"]["state"] == "uploading"
    assert [(p["number"], p["bytes"]) for p in answer["part_urls"]] == [(1, PART), (2, PART), (3, 12345)]
    parts = parts_of(dump)
    for url in answer["part_urls"]:
        assert "Authorization" not in url["url"]
        data = parts[url["number"]]
        sent = put(url["url"], data, content_md5(data))
        assert sent.status_code == 200, sent.text
        assert sent.headers["ETag"].strip('"') == md5_hex(data)
    done = api.complete(capture["id"], {n: md5_hex(d) for n, d in parts.items()})
    assert done.status_code == 200, done.text
    stored = done.json()
    assert (stored["state"], stored["bytes"], stored["parts"]) == ("stored", len(dump), 3)
    assert stored["etag"].strip('"').endswith("-3")

    # The capture points at the object; the event shows it.
    shown = api.get(f"/api/v1/events/{event['event_id']}").json()
    [recorded] = shown["captures"]
    assert recorded["uri"] == stored["uri"] and recorded["bytes"] == len(dump)
    assert recorded["uri"].startswith(("s3://", "file://")) and recorded["uri"].endswith("/vmcore")

    # Completing again (an answer lost on the way) is the same answer, nothing redone.
    assert api.complete(capture["id"], {n: md5_hex(d) for n, d in parts.items()}).json() == stored
    # A new start for a stored dump signs nothing.
    assert api.start(capture["id"], len(dump)).json()["part_urls"] == []

    # An engineer's link downloads the very bytes, and the link is on record.
    link = api.get(f"/api/v1/captures/{capture['id']}/download")
    assert link.status_code == 200, link.text
    got = requests.get(link.json()["url"], timeout=60)
    assert got.status_code == 200 and got.content == dump
    with database.session() as session:
        [audit] = session.scalars(select(DumpDownload)).all()
        assert (audit.actor, audit.via, audit.object_uri) == ("engineer-ada", "api", stored["uri"])
        assert audit.expires_at > audit.created_at


def test_lost_repeated_and_corrupted_parts_are_named_and_resumed(api: Api) -> None:
    dump = os.urandom(2 * PART + 7)
    parts = parts_of(dump)
    md5s = {n: md5_hex(d) for n, d in parts.items()}
    capture = api.capture(api.event()["event_id"])
    urls = {p["number"]: p["url"] for p in api.start(capture["id"], len(dump)).json()["part_urls"]}

    # Part 1 sent twice (a retry after a lost answer): the last one counts.
    assert put(urls[1], os.urandom(PART)).status_code == 200
    assert put(urls[1], parts[1], content_md5(parts[1])).status_code == 200
    # Part 2 corrupted on the way (no Content-MD5, so the store cannot catch it); part 3 lost.
    assert put(urls[2], parts[2][:-1] + bytes([parts[2][-1] ^ 0xFF])).status_code == 200
    refused = api.complete(capture["id"], md5s)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "parts_incomplete"
    problems = refused.json()["error"]["fields"]["parts"]
    assert [p.split(":")[0] for p in problems] == ["2", "3"]
    assert "not the part's" in problems[0] and "not uploaded" in problems[1]

    # Resuming: new URLs for exactly the parts still wanted, the same upload.
    resumed = api.start(capture["id"], len(dump), parts=[2, 3]).json()
    assert [p["number"] for p in resumed["part_urls"]] == [2, 3]
    for url in resumed["part_urls"]:
        assert put(url["url"], parts[url["number"]], content_md5(parts[url["number"]])).status_code == 200
    # A reporter that vouches for a wrong MD5 is refused too.
    assert api.complete(capture["id"], md5s | {1: md5_hex(b"other")}).status_code == 409
    done = api.complete(capture["id"], md5s)
    assert done.status_code == 200, done.text
    assert requests.get(api.get(f"/api/v1/captures/{capture['id']}/download").json()["url"],
                        timeout=60).content == dump


def test_a_skipped_events_dump_and_a_changed_size_are_refused(api: Api) -> None:
    first = api.event("skipme_function")
    signature_id = first["signature"]["id"]
    patched = requests.patch(f"{api.url}/api/v1/signatures/{signature_id}",
                             json={"capture_policy": {"mode": "skip"}}, headers=auth(api.triage), timeout=30)
    assert patched.status_code == 200, patched.text
    skipped = api.event("skipme_function")
    assert skipped["capture"]["action"] == "skip"
    capture = api.capture(skipped["event_id"])
    refused = api.start(capture["id"], 100)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "capture_skipped", refused.text
    assert "skip" in refused.json()["error"]["message"]

    wanted = api.capture(first["event_id"])
    assert api.start(wanted["id"], 100).status_code == 200
    other = api.start(wanted["id"], 200)
    assert other.status_code == 409 and "one dump per capture" in other.json()["error"]["message"]
    assert api.start(wanted["id"], 100, parts=[2]).status_code == 400
    assert api.start("999999", 100).status_code == 404
    assert api.get("/api/v1/captures/999999/download").status_code == 404
    assert api.get(f"/api/v1/captures/{wanted['id']}/download").status_code == 409  # not stored yet


def test_the_local_stores_urls_expire_and_cannot_be_forged(api: Api, store_kind: str, store_url: str) -> None:
    if store_kind == "s3":
        pytest.skip("moto 5.2 checks neither a pre-signed URL's expiry nor its signature; S3 answers 403")
    capture = api.capture(api.event()["event_id"])
    [part] = api.start(capture["id"], 10).json()["part_urls"]
    upload_id = part["url"].split("/uploads/")[1].split("/")[0]
    signer = LocalStore(Path(store_url), api.url)  # the registry's own key, in the store directory
    expired = put(signer.presign_part("k", upload_id, 1, -1), b"0123456789")
    assert expired.status_code == 403 and "expired" in expired.json()["error"]["message"], expired.text
    forged = put(part["url"].replace("parts/1", "parts/2"), b"0123456789")
    assert forged.status_code == 403 and "signature" in forged.json()["error"]["message"], forged.text
    wrong_md5 = put(part["url"], b"0123456789", content_md5(b"something else"))
    assert wrong_md5.status_code == 400 and wrong_md5.json()["error"]["code"] == "bad_digest"
    assert put(part["url"], b"0123456789", content_md5(b"0123456789")).status_code == 200


@pytest.mark.parametrize("store_kind", ["s3"])
def test_an_unreachable_store_is_a_503_not_a_500(api: Api, monkeypatch: pytest.MonkeyPatch,
                                                 make_token: Callable[..., str]) -> None:
    """Reporters and build pipelines retry any 5xx; a store that is down must say so (503,
    Retry-After), not look like a registry bug: for a dump, and for a symbol file (a 500
    before), which the same store keeps."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", dead)  # read when the store first opens
    capture = api.capture(api.event()["event_id"])
    answer = api.start(capture["id"], 1024)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "unavailable"
    assert "dump store" in answer.json()["error"]["message"]
    assert answer.headers["Retry-After"] == str(STORE_RETRY_AFTER_S)
    upload = {"build_id": "ab" * 20, "bytes": 1024, "sha256": "0" * 64}
    symbols = requests.post(f"{api.url}/api/v1/symbols/uploads", json=upload,
                            headers=auth(make_token("symbols")), timeout=30)
    assert symbols.status_code == 503, symbols.text
    assert symbols.json()["error"]["code"] == "unavailable"
    assert symbols.headers["Retry-After"] == str(STORE_RETRY_AFTER_S)


def the_open_upload(settings: Settings, database: Database, capture_id: str) -> tuple[DumpStore, Dump]:
    """The store as the registry's own, and the capture's dump row: to act behind its back."""
    with database.session() as session:
        dump = session.scalar(select(Dump).where(Dump.capture_id == int(capture_id)))
        assert dump is not None and dump.upload_id is not None
        session.expunge(dump)
    return open_store(settings.dump_store, "http://crashreg.test"), dump


@pytest.mark.parametrize("asked_again", ["complete", "start"])
def test_a_completion_whose_answer_was_lost_is_recorded_when_asked_again(
    api: Api, settings: Settings, database: Database, asked_again: str
) -> None:
    data = os.urandom(2 * PART + 5)
    parts = parts_of(data)
    event = api.event()
    capture = api.capture(event["event_id"])
    for url in api.start(capture["id"], len(data)).json()["part_urls"]:
        assert put(url["url"], parts[url["number"]], content_md5(parts[url["number"]])).status_code == 200
    # The store completes the upload, and the registry never hears: its request timed out, or
    # its worker was killed mid-request. The store now answers NoSuchUpload for it.
    store, dump = the_open_upload(settings, database, capture["id"])
    assert dump.upload_id is not None
    store.complete_upload(dump.key, dump.upload_id, store.list_parts(dump.key, dump.upload_id))
    assert not store.upload_exists(dump.key, dump.upload_id)

    if asked_again == "complete":
        answer = api.complete(capture["id"], {n: md5_hex(d) for n, d in parts.items()})
        assert answer.status_code == 200, answer.text
        stored = answer.json()
    else:  # the reporter rejoins its upload (the post-boot agent after a reboot)
        answer = api.start(capture["id"], len(data))
        assert answer.status_code == 200, answer.text
        assert answer.json()["part_urls"] == []
        stored = answer.json()["dump"]
    assert (stored["state"], stored["bytes"]) == ("stored", len(data))
    [recorded] = api.get(f"/api/v1/events/{event['event_id']}").json()["captures"]
    assert recorded["uri"] == stored["uri"]
    assert requests.get(api.get(f"/api/v1/captures/{capture['id']}/download").json()["url"],
                        timeout=60).content == data


def test_an_upload_the_store_lost_is_sent_again_whole_by_the_agent(
    api: Api, settings: Settings, database: Database, tmp_path: Path
) -> None:
    data = b"KDUMP   " + os.urandom(2 * PART)  # compressed already: sent as it is, three parts
    source, spool = tmp_path / "vmcore", tmp_path / "spool"
    source.write_bytes(data)
    spool.mkdir()
    capture = api.capture(api.event()["event_id"])
    state_path = prepare(spool, "kdump-x", capture["id"], source)
    cut: list[str] = []

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/complete") and not cut:
            cut.append(path)
            raise UploadError("the host rebooted")
        answer = requests.post(api.url + path, json=body, headers=auth(api.report), timeout=30)
        if answer.status_code != 200:
            raise UploadError(f"{path} refused: {answer.text}")
        return answer.json()

    said: list[str] = []
    uploader = Uploader(post, threads=1, log=said.append)
    with pytest.raises(UploadError, match="rebooted"):
        uploader.upload(state_path)  # every part sent, then the power went
    # Days later the bucket's lifecycle rule aborts the incomplete upload.
    store, dump = the_open_upload(settings, database, capture["id"])
    assert dump.upload_id is not None
    store.abort_upload(dump.key, dump.upload_id)

    # The post-boot agent's completion is refused naming every part; it sends them again into
    # the new upload the registry opens when it asks for their URLs.
    stored = uploader.upload(state_path)
    assert (stored["state"], stored["bytes"]) == ("stored", len(data))
    assert "the registry wants parts [1, 2, 3] again" in said, said
    assert requests.get(api.get(f"/api/v1/captures/{capture['id']}/download").json()["url"],
                        timeout=60).content == data


@pytest.mark.parametrize("store_kind", ["local"])  # S3's URLs are the store's own
def test_a_part_sent_with_a_form_content_type_is_taken(api: Api) -> None:
    """urllib sends `Content-Type: application/x-www-form-urlencoded` with a body unless told
    otherwise: the registry read such a part as a form (for its NUL check) up to its 2 MiB body
    limit before the part's route lifted it, and refused it."""
    dump = os.urandom(PART + 7)
    capture = api.capture(api.event("form_typed_part")["event_id"])
    for url in api.start(capture["id"], len(dump)).json()["part_urls"]:
        data = parts_of(dump)[url["number"]]
        sent = requests.put(url["url"], data=data, timeout=60, headers={
            "Content-Type": "application/x-www-form-urlencoded", "Content-MD5": content_md5(data)})
        assert sent.status_code == 200, sent.text
    done = api.complete(capture["id"], {n: md5_hex(d) for n, d in parts_of(dump).items()})
    assert done.status_code == 200 and done.json()["state"] == "stored", done.text
