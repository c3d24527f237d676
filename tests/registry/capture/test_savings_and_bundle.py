"""What dedup saved (API and /metrics) and the offline policy bundle (ETag, formats)."""

from __future__ import annotations

from sqlalchemy import insert

from registry.core.signatures import SignatureAlias
from tests.support.capture import patch_policy, post_capture, report, storm_report
from tests.support.http import auth

HOUR = 3600.0


def fill_signature(client, token: str, bug: str, sizes: list[int], downtimes: list[float], skips: int):  # type: ignore[no-untyped-def]
    """K full captures completed with these sizes and downtimes, then `skips` skipped events."""
    answers = [report(client, token, storm_report(bug)) for _ in sizes]
    for answer, size, downtime in zip(answers, sizes, downtimes, strict=True):
        assert answer["capture"]["action"] == "full"
        post_capture(client, token, answer["event_id"], bytes=size, downtime_s=downtime)
    for _ in range(skips):
        assert report(client, token, storm_report(bug))["capture"]["action"] == "skip"
    return answers[0]["signature"]


def test_savings_are_skips_times_the_median_full_capture(client, make_token) -> None:
    token, reader = make_token("report"), make_token("read")
    big = fill_signature(client, token, "big_host_bug", [100, 200, 900], [0.5 * HOUR, HOUR, 6 * HOUR], 4)
    small = fill_signature(client, token, "small_bug", [10, 10, 40], [60.0, 60.0, 60.0], 2)
    savings = client.get("/api/v1/captures/savings", headers=auth(reader)).json
    by_id = {s["signature_id"]: s for s in savings["signatures"]}
    assert by_id[big["id"]] == {
        "signature_id": big["id"], "dumps_skipped": 4, "full_captures": 3,
        "median_full_capture_bytes": 200.0, "median_full_capture_downtime_s": HOUR,
        "bytes_avoided": 800, "downtime_hours_avoided": 4.0, "estimated": True,
    }
    assert by_id[small["id"]]["bytes_avoided"] == 20
    assert [s["signature_id"] for s in savings["signatures"]] == [big["id"], small["id"]]
    assert savings["totals"] == {"dumps_skipped": 6, "full_captures": 6, "bytes_avoided": 820,
                                 "downtime_hours_avoided": round(4.0 + 2 * 60 / HOUR, 3),
                                 "skipped_without_estimate": 0}
    one = client.get(f"/api/v1/captures/savings?signature={small['fingerprint']}", headers=auth(reader)).json
    assert [s["signature_id"] for s in one["signatures"]] == [small["id"]]
    assert one["totals"]["dumps_skipped"] == 2
    metrics = client.get("/metrics").get_data(as_text=True)
    assert "crashreg_capture_dumps_skipped 6.0" in metrics
    assert "crashreg_capture_bytes_avoided 820.0" in metrics
    assert "crashreg_capture_downtime_hours_avoided 4.033" in metrics


def test_skips_without_a_completed_full_capture_have_no_estimate(client, make_token) -> None:
    token = make_token("report")
    for _ in range(5):
        report(client, token, storm_report("never_dumped"))
    savings = client.get("/api/v1/captures/savings", headers=auth(make_token("read"))).json
    assert savings["totals"]["dumps_skipped"] == 2
    assert savings["totals"]["skipped_without_estimate"] == 2
    assert savings["totals"]["bytes_avoided"] == 0
    assert client.get("/api/v1/captures/savings?signature=nope",
                      headers=auth(make_token("read"))).status_code == 404


def bundle(client, token, etag=None, fmt="json"):  # type: ignore[no-untyped-def]
    headers = auth(token) | ({"If-None-Match": etag} if etag else {})
    return client.get(f"/api/v1/policy-bundle?format={fmt}", headers=headers)


def test_policy_bundle_lists_current_actions_with_etag(client, make_token, database) -> None:
    token, triage = make_token("report"), make_token("triage")
    fresh = report(client, token, storm_report("fresh_bug"))["signature"]
    exhausted = fill_signature(client, token, "done_bug", [1, 1, 1], [1.0, 1.0, 1.0], 0)
    first = bundle(client, token)
    assert first.status_code == 200
    body = first.json
    assert (body["format"], body["format_version"]) == ("crashreg-policy-bundle", 1)
    assert body["unknown"]["action"] == "full"
    entries = {e["fingerprint"]: e for e in body["entries"]}
    assert entries[fresh["fingerprint"]]["action"] == "full"
    function = client.get(f"/api/v1/signatures/{exhausted['id']}", headers=auth(triage)).json["function"]
    assert entries[exhausted["fingerprint"]] == {
        "fingerprint": exhausted["fingerprint"], "signature_id": exhausted["id"], "action": "skip",
        "dump_level": None, "function": function, "title": exhausted["title"]}
    etag = first.headers["ETag"]
    assert etag.strip('"') == body["version"]

    unchanged = bundle(client, make_token("read"), etag)
    assert unchanged.status_code == 304 and unchanged.get_data() == b""

    patch_policy(client, triage, exhausted["id"], mode="filtered", dump_level=31)
    changed = bundle(client, token, etag)
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    entry = next(e for e in changed.json["entries"] if e["fingerprint"] == exhausted["fingerprint"])
    assert (entry["action"], entry["dump_level"]) == ("filtered", 31)

    with database.session() as session:  # a rebuilt fingerprint routes to the same signature
        session.execute(insert(SignatureAlias).values(
            fingerprint="f" * 24, signature_id=int(exhausted["id"]), reason="rebuild"))
    aliased = {e["fingerprint"]: e for e in bundle(client, token).json["entries"]}
    assert aliased["f" * 24]["signature_id"] == exhausted["id"]
    assert aliased["f" * 24]["action"] == "filtered"


def test_policy_bundle_as_text_for_posix_sh(client, make_token) -> None:
    token = make_token("report")
    signature = fill_signature(client, token, "text_bug", [1, 1, 1], [1.0, 1.0, 1.0], 0)
    response = bundle(client, token, fmt="text")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    header, *lines = response.get_data(as_text=True).splitlines()
    tag, version, bundle_version, _generated = header.split("\t")
    assert (tag, version) == ("#crashreg-policy-bundle", "1")
    assert response.headers["ETag"].strip('"') == f"{bundle_version}-text"
    rows = {line.split("\t")[0]: line.split("\t") for line in lines}
    fingerprint, action, dump_level, function, title = rows[signature["fingerprint"]]
    assert (fingerprint, action, dump_level) == (signature["fingerprint"], "skip", "-")
    assert title == signature["title"]
    assert function != ""
    assert bundle(client, token, response.headers["ETag"], fmt="text").status_code == 304
    assert bundle(client, token, response.headers["ETag"]).status_code == 200  # JSON has its own tag


def test_policy_bundle_needs_report_or_read(client, make_token) -> None:
    assert client.get("/api/v1/policy-bundle").status_code == 401
    assert bundle(client, make_token("triage")).status_code == 200
    assert bundle(client, make_token("read"), fmt="yaml").status_code == 400
