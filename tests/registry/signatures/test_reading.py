"""Reading signatures and events: filters, sort, cursor pagination, lookups; PATCH triage."""

from __future__ import annotations

from testkit.reports import crash_report
from tests.support.http import auth

WARNING_LOG = "[  5.1] WARNING: CPU: 3 PID: 77 at fs/ext4/inode.c:1234 ext4_do_thing+0x1/0x2\n"
BUG_LOG = (
    "[  7.2] kernel BUG at fs/xfs/xfs_icache.c:321!\n"
    "[  7.3] invalid opcode: 0000 [#1] SMP\n"
    "[  7.3] RIP: 0010:xfs_inode_free+0x1a/0x2b0 [xfs]\n"
)


def seed(client, token, log: str, count: int, day: int) -> dict:  # type: ignore[no-untyped-def]
    answer = {}
    for i in range(count):
        body = crash_report(
            console_log=log, crashed_at=f"2026-11-{day:02d}T0{i}:00:00Z", host={"hostname": f"h-{day}-{i}"}
        )
        answer = client.post("/api/v1/reports", json=body, headers=auth(token)).json
    return answer["signature"]


def test_list_sort_filter_and_paginate(client, make_token) -> None:
    writer, reader = make_token("report"), make_token("read")
    warn = seed(client, writer, WARNING_LOG, 3, 10)
    bug = seed(client, writer, BUG_LOG, 1, 12)
    null = seed(client, writer, crash_report()["console_log"], 2, 11)

    by_events = client.get("/api/v1/signatures?sort=-events", headers=auth(reader)).json
    assert [s["id"] for s in by_events["signatures"]] == [warn["id"], null["id"], bug["id"]]
    by_last = client.get("/api/v1/signatures", headers=auth(reader)).json  # default -last_seen
    assert [s["id"] for s in by_last["signatures"]] == [bug["id"], null["id"], warn["id"]]

    pages, cursor = [], None
    while True:
        url = "/api/v1/signatures?sort=first_seen&limit=1" + (f"&cursor={cursor}" if cursor else "")
        page = client.get(url, headers=auth(reader)).json
        pages.append([s["id"] for s in page["signatures"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [[warn["id"]], [null["id"]], [bug["id"]]]

    found = client.get("/api/v1/signatures?q=xfs_inode", headers=auth(reader)).json["signatures"]
    assert [s["id"] for s in found] == [bug["id"]]
    assert client.get("/api/v1/signatures?status=resolved", headers=auth(reader)).json["signatures"] == []


def test_bad_query_parameters_are_named(client, make_token) -> None:
    reader = make_token("read")
    response = client.get("/api/v1/signatures?sort=color&limit=0", headers=auth(reader))
    assert response.status_code == 400
    assert set(response.json["error"]["fields"]) == {"sort", "limit"}
    garbage = client.get("/api/v1/signatures?cursor=!!notacursor", headers=auth(reader))
    assert garbage.status_code == 400 and "cursor" in garbage.json["error"]["fields"]


def test_get_by_id_and_fingerprint_and_404(client, make_token) -> None:
    signature = seed(client, make_token("report"), WARNING_LOG, 1, 3)
    reader = make_token("read")
    by_id = client.get(f"/api/v1/signatures/{signature['id']}", headers=auth(reader)).json
    by_fp = client.get(f"/api/v1/signatures/{signature['fingerprint']}", headers=auth(reader)).json
    assert by_id == by_fp and by_id["fingerprint"] == signature["fingerprint"]
    assert client.get("/api/v1/signatures/deadbeef", headers=auth(reader)).status_code == 404
    assert client.get("/api/v1/events/999999", headers=auth(reader)).status_code == 404


def test_signature_events_paginate_newest_first(client, make_token) -> None:
    signature = seed(client, make_token("report"), WARNING_LOG, 5, 4)
    reader = make_token("read")
    seen, cursor = [], None
    while True:
        url = f"/api/v1/signatures/{signature['id']}/events?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = client.get(url, headers=auth(reader)).json
        seen += [int(e["id"]) for e in page["events"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == sorted(seen, reverse=True) and len(seen) == 5


def test_patch_triage_fields_and_policy(client, make_token) -> None:
    signature = seed(client, make_token("report"), WARNING_LOG, 1, 5)
    triage = make_token("triage")
    url = f"/api/v1/signatures/{signature['id']}"
    response = client.patch(
        url,
        json={
            "status": "triaged",
            "owner": "alice",
            "capture_policy": {"mode": "filtered", "dump_level": 31},
        },
        headers=auth(triage),
    )
    assert response.status_code == 200
    assert response.json["status"] == "triaged" and response.json["owner"] == "alice"
    assert response.json["capture_policy"]["mode"] == "filtered"
    assert client.patch(url, json={"status": "fixed"}, headers=auth(triage)).status_code == 400
    blank = client.patch(url, json={"title": "   "}, headers=auth(triage))  # accepted before
    assert blank.status_code == 400 and "title" in blank.json["error"]["fields"]
    unchanged = client.patch(url, json={}, headers=auth(triage))  # the document allows {}: a no-op
    assert unchanged.status_code == 200 and unchanged.json["owner"] == "alice"
    no_level = client.patch(
        url, json={"capture_policy": {"mode": "filtered", "dump_level": None}}, headers=auth(triage)
    )
    assert no_level.status_code == 400
    assert client.patch(url, json={"status": "triaged"}, headers=auth(make_token("read"))).status_code == 403
