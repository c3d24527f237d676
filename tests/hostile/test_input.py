"""Hostile and broken input (issue 14): every case is a 4xx naming the field, never a 500.

Bodies are sent as raw bytes where the case is about the bytes themselves (a lone surrogate,
a 5,000-digit integer, 10,000 levels of nesting), since a JSON library would refuse to make them.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.mangled import itanium_chain, rust_backref_chain
from tests.support.userspace import stack

NUL = "\x00"
SURROGATE = "\ud800"


def send(client: Any, method: str, path: str, token: str, body: Any) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.open(path, method=method, data=data, headers=auth(token), content_type="application/json")


def refused(response: Any, *path: Any, says: str) -> dict[str, Any]:
    """The 400's error, after checking that `path` in its fields carries a message with `says`."""
    assert response.status_code == 400, (response.status_code, response.get_data(as_text=True)[:500])
    error = response.json["error"]
    node: Any = error["fields"]
    for part in path:
        node = node[str(part)] if str(part) in node else node[part]
    assert any(says in message for message in node), node
    for name in path[:1]:
        assert str(name) in error["message"]
    return error


@pytest.fixture
def reporter(make_token):  # type: ignore[no-untyped-def]
    return make_token("admin")


@pytest.fixture
def event_id(client, reporter) -> int:  # type: ignore[no-untyped-def]
    response = send(client, "POST", "/api/v1/reports", reporter, crash_report())
    assert response.status_code == 201
    return int(response.json["event_id"])


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
def test_a_bad_character_in_any_report_string_names_the_field(client, reporter, bad) -> None:
    says = "NUL" if bad == NUL else "surrogate"
    cases: list[tuple[dict[str, Any], tuple[Any, ...]]] = [
        (crash_report(console_log=f"[ 1.0] BUG: x{bad}y\n"), ("console_log",)),
        (crash_report(report_id=f"r{bad}1"), ("report_id",)),
        (crash_report(host={"hostname": f"gpu{bad}a"}), ("host", "hostname")),
        (crash_report(host={"hostname": "gpu-a", "labels": {"pool": f"t{bad}"}}), ("host", "labels", "pool")),
        (crash_report(host={"hostname": "gpu-a", "labels": {f"p{bad}": "t"}}), ("host", "labels")),
        (crash_report(extra_field=f"x{bad}"), ("extra_field",)),
        (crash_report(stack={"frames": [{"function": f"f{bad}"}]}), ("stack", "frames", 0, "function")),
        (crash_report(kernel_build_id=f"ab{bad}"), ("kernel_build_id",)),
        (crash_report(source="dpu", dpu={"crashed_thread": {"frames": [{"function": f"f{bad}"}]}}),
         ("dpu", "crashed_thread", "frames", 0, "function")),
    ]
    for body, path in cases:
        refused(send(client, "POST", "/api/v1/reports", reporter, body), *path, says=says)


@pytest.mark.parametrize(
    "build_id", ["ab\n", "abc", "ab" * 65, "xy"], ids=["newline", "odd", "65-bytes", "not-hex"]
)
def test_a_kernel_build_id_that_is_not_one_names_the_field(client, reporter, build_id) -> None:
    refused(send(client, "POST", "/api/v1/reports", reporter, crash_report(kernel_build_id=build_id)),
            "kernel_build_id", says="GNU build-id")


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
def test_a_bad_character_in_other_bodies_names_the_field(client, reporter, event_id, bad) -> None:
    says = "NUL" if bad == NUL else "surrogate"
    signature = send(client, "POST", "/api/v1/reports", reporter, crash_report()).json["signature"]["id"]
    cases = [
        ("PATCH", f"/api/v1/signatures/{signature}", {"title": f"t{bad}"}, ("title",)),
        ("PATCH", f"/api/v1/signatures/{signature}", {"notes": f"n{bad}"}, ("notes",)),
        ("POST", f"/api/v1/events/{event_id}/captures",
         {"method": "makedumpfile", "status": "completed", "uri": f"s3://b/{bad}"}, ("uri",)),
        ("POST", "/api/v1/hosts", {"hosts": [{"hostname": "h1", "sku": f"s{bad}"}]}, ("hosts", 0, "sku")),
    ]
    for method, path, body, field in cases:
        refused(send(client, method, path, reporter, body), *field, says=says)


def test_a_nul_in_a_query_string_or_a_path_is_a_400(client, reporter) -> None:
    refused(client.get("/api/v1/signatures?q=%00", headers=auth(reporter)), "q", says="NUL")
    refused(client.get("/api/v1/signatures/ab%00cd", headers=auth(reporter)), "path", says="NUL")
    refused(client.get("/api/v1/signatures/ab%00cd/events", headers=auth(reporter)), "path", says="NUL")


def test_nesting_and_huge_integers_are_400(client, reporter) -> None:
    deep = b'{"report_id": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    response = send(client, "POST", "/api/v1/reports", reporter, deep)
    assert response.status_code == 400
    assert "nested" in response.json["error"]["message"]
    nested: Any = 1
    for _ in range(40):
        nested = [nested]
    fairly_deep = json.dumps(crash_report(extra={"a": nested, "b": NUL}))
    deep_and_nul = send(client, "POST", "/api/v1/reports", reporter, fairly_deep.encode())
    refused(deep_and_nul, "extra", "_schema", says="nested deeper than 32 levels")
    refused(deep_and_nul, "extra", "b", says="NUL")
    body = json.dumps(crash_report()).replace('"uptime_s": 86400', '"uptime_s": ' + "9" * 5000)
    refused(send(client, "POST", "/api/v1/reports", reporter, body.encode()), "uptime_s", says="longer than")
    past_64_bits = crash_report(uptime_s=2**70)
    refused(send(client, "POST", "/api/v1/reports", reporter, past_64_bits), "uptime_s", says="less than")
    past_column = crash_report(uptime_s=2**40)
    refused(send(client, "POST", "/api/v1/reports", reporter, past_column), "uptime_s", says="less than")
    infinite = json.dumps(crash_report()).replace('"uptime_s": 86400', '"uptime_s": 1e400')
    refused(send(client, "POST", "/api/v1/reports", reporter, infinite.encode()), "uptime_s", says="finite")
    nan = json.dumps(crash_report()).replace('"uptime_s": 86400', '"uptime_s": NaN')
    refused(send(client, "POST", "/api/v1/reports", reporter, nan.encode()), "uptime_s", says="finite")


@pytest.mark.parametrize(
    "crashed_at", ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00", "9999-12-31T00:00:00Z",
                   "1999-12-31T23:59:59Z", "2126-01-01T00:00:00Z"]
)
def test_an_implausible_crash_time_is_400_naming_the_allowed_range(client, reporter, crashed_at) -> None:
    response = send(client, "POST", "/api/v1/reports", reporter, crash_report(crashed_at=crashed_at))
    refused(response, "crashed_at", says="between 2000-01-01T00:00:00+00:00 and a day from now")


@pytest.mark.parametrize(
    "when", ["0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01", "9999-12-31T00:00:00Z",
             "1999-12-31T23:59:59Z"]
)
def test_inventory_times_are_bounded_as_crash_times(client, reporter, when) -> None:
    """observed_at and booted_at: the first two are outside Python's years once in UTC (they
    were a 500); the others would date attribute changes before or after every crash."""
    hosts = [{"hostname": "inv-1"}, {"hostname": "inv-2", "booted_at": when}]
    booted = send(client, "POST", "/api/v1/hosts", reporter, {"hosts": hosts})
    refused(booted, "hosts", 1, "booted_at", says="between 2000-01-01T00:00:00+00:00 and a day from now")
    observed = send(client, "POST", "/api/v1/hosts", reporter, {"hosts": hosts[:1], "observed_at": when})
    refused(observed, "observed_at", says="between 2000-01-01T00:00:00+00:00 and a day from now")
    fine = {"hosts": [*hosts[:1], {"hostname": "inv-2", "booted_at": "2026-11-30T08:00:00+14:00"}],
            "observed_at": "2026-11-30T00:00:00-12:00"}
    assert send(client, "POST", "/api/v1/hosts", reporter, fine).status_code == 200


def test_capture_figures_are_bounded(client, reporter, event_id) -> None:
    path = f"/api/v1/events/{event_id}/captures"
    base = {"method": "makedumpfile", "status": "completed"}
    for field, value, says in [("bytes", 2**70, "less than"), ("bytes", 2**60, "less than"),
                               ("downtime_s", 1e308, "less than"), ("duration_s", 1e308, "less than")]:
        refused(send(client, "POST", path, reporter, base | {field: value}), field, says=says)
    fits = base | {"bytes": 2**40, "downtime_s": 90.5}
    assert send(client, "POST", path, reporter, fits).status_code == 201


def test_ids_past_the_column_range_or_not_ascii_are_404(client, reporter) -> None:
    for path in ["/api/v1/events/99999999999999999999", "/api/v1/events/2147483648",
                 "/api/v1/rcas/9223372036854775808", "/api/v1/signatures/%C2%B2",
                 "/api/v1/signatures/99999999999999999999", "/api/v1/signatures/%C2%B2/events"]:
        response = client.get(path, headers=auth(reporter))
        assert response.status_code == 404, path
        assert response.json["error"]["code"] == "not_found"
    for method, path in [("PATCH", "/api/v1/captures/9223372036854775808"),
                         ("POST", "/api/v1/events/2147483648/captures"),
                         ("POST", "/api/v1/rcas/99999999999999999999/review")]:
        response = send(client, method, path, reporter, {"status": "completed"})
        assert response.status_code == 404, path
        assert response.is_json
    response = client.get(f"/api/v1/integrations/jira/links?after={2**70}", headers=auth(reporter))
    refused(response, "after", says="less than or equal")
    response = client.get(f"/api/v1/integrations/jira/links?after={2**31}", headers=auth(reporter))
    refused(response, "after", says="less than or equal")


def cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


@pytest.mark.parametrize(
    ("sort", "forged"),
    [("events", ["abc", 1]), ("-events", [1.5, 1]), ("last_seen", [12, 1]), ("id", ["x", 1]),
     ("events", [1, 2**70]), ("events", [1, "1"]), ("-first_seen", ["not a time", 3]), ("events", {"a": 1}),
     # each a 500 before: a naive time, a time past the years UTC holds, a count past 32 bits
     ("-last_seen", ["2026-01-01T00:00:00", 1]), ("first_seen", ["2026-01-01", 1]),
     ("last_seen", ["0001-01-01T00:00:00+00:01", 1]), ("-first_seen", ["9999-12-31T23:59:59-23:59", 1]),
     ("-events", [2**63 - 1, 1]), ("events", [2**31, 1]), ("-id", [5, 1])],
)
def test_a_cursor_of_the_wrong_shape_for_its_sort_is_400(client, reporter, sort, forged) -> None:
    response = client.get(f"/api/v1/signatures?sort={sort}&cursor={cursor(forged)}", headers=auth(reporter))
    refused(response, "cursor", says="invalid cursor")
    assert "not one this server issued" in response.json["error"]["message"]


KERNEL_LOG = crash_report()["console_log"]
LONG_NAMES = {  # a crash whose names pass a signature row's columns (module 128, function 255)
    "kernel-module": crash_report(console_log=KERNEL_LOG.replace("[mlx5_core]", "[" + "k" * 129 + "]")),
    "kernel-function": crash_report(console_log=KERNEL_LOG.replace("mlx5e_poll_rx_cq+", "g" * 256 + "+")),
    "userspace-module": crash_report(console_log=None, source="userspace", stack=stack(frames=[
        {"function": "parse_record", "module": "/usr/lib/" + "a" * 200 + ".so"}])),
    "userspace-executable": crash_report(console_log=None, source="userspace", stack=stack(
        executable="/" + "e" * 1023, frames=[{"function": "parse_record", "module": "/" + "e" * 1023}])),
}


@pytest.mark.parametrize("report", LONG_NAMES.values(), ids=LONG_NAMES.keys())
def test_a_crash_whose_names_pass_a_signature_rows_columns_is_registered(client, reporter, report) -> None:
    """Names within a report's bounds but past the signature row's columns are kept by their
    head there (the fingerprint keys them whole): PostgreSQL refused the row, a 500 that a
    reporter retries forever; SQLite stored them long."""
    first = send(client, "POST", "/api/v1/reports", reporter, report)
    assert first.status_code == 201, first.get_data(as_text=True)[:500]
    signature = client.get(f"/api/v1/signatures/{first.json['signature']['id']}", headers=auth(reporter)).json
    assert len(signature["function"] or "") <= 255 and len(signature["module"] or "") <= 128
    second = {**report, "report_id": report["report_id"] + "-2"}
    again = send(client, "POST", "/api/v1/reports", reporter, second)
    assert again.status_code == 201 and again.json["signature"]["id"] == first.json["signature"]["id"]


@pytest.mark.parametrize("sort", ["id", "-id"])
def test_the_signature_list_pages_by_id_with_the_cursors_it_issues(client, reporter, sort) -> None:
    """Sorted by id, the next page's cursor is one the server takes back, `[null, id]` as every
    list sorted by id pages (it issued `[id, id]` and refused it with a 400, so the list could
    not be paged by id, and a `[null, id]` was a 500)."""
    log = crash_report()["console_log"]
    for n in range(3):
        body = crash_report(report_id=f"paged-{n}", console_log=log.replace("mlx5e_poll_rx_cq", f"poll_{n}"))
        assert send(client, "POST", "/api/v1/reports", reporter, body).status_code == 201
    seen, cursor_now = [], None
    while True:
        query = f"/api/v1/signatures?sort={sort}&limit=1" + (f"&cursor={cursor_now}" if cursor_now else "")
        page = client.get(query, headers=auth(reporter))
        assert page.status_code == 200, page.json
        seen += [int(item["id"]) for item in page.json["signatures"]]
        cursor_now = page.json["next_cursor"]
        if cursor_now is None:
            break
    assert len(seen) == 3 and seen == sorted(seen, reverse=sort.startswith("-"))


def test_a_report_with_nothing_to_fingerprint_is_400_naming_what_is_missing(client, reporter) -> None:
    """The reporter's `fingerprint` is not something to fingerprint: alone it is refused."""
    for body in [crash_report(console_log=None), crash_report(console_log=""),
                 crash_report(console_log=None, stack={"frames": []}),
                 crash_report(console_log=None, fingerprint="a" * 16)]:
        error = refused(send(client, "POST", "/api/v1/reports", reporter, body), "console_log",
                        says="needs console_log or stack.frames")
        assert set(error["fields"]) == {"console_log", "stack"}
    with_frames = crash_report(console_log=None, stack={"frames": [{"function": "main"}]})
    assert send(client, "POST", "/api/v1/reports", reporter, with_frames).status_code == 201


@pytest.mark.parametrize(("symbol", "named"), [(itanium_chain(30), "in f [store]"),
                                               (rust_backref_chain(30), rust_backref_chain(30)[:60])],
                         ids=["itanium", "rust-v0"])
def test_a_symbol_growing_threefold_a_level_is_answered(client, reporter, symbol, named) -> None:
    """A userspace frame named by a hostile symbol within the 512 characters a function may
    have (each level names the type before it three times: 3^30 times the first once read) is
    stored and answered at once, titled by the function's name (C++: its parameters are not
    read) or the raw symbol."""
    assert len(symbol) <= 512
    program = "/opt/app/store"
    stack = {"signal": "SIGSEGV", "executable": program,
             "frames": [{"function": symbol, "module": program}, {"function": "main", "module": program}]}
    response = send(client, "POST", "/api/v1/reports", reporter,
                    crash_report(source="userspace", console_log=None, stack=stack))
    assert response.status_code == 201, response.get_data(as_text=True)[:500]
    assert named in response.json["signature"]["title"]


def test_the_reporters_fingerprint_does_not_route_the_report(client, reporter) -> None:
    """A reporter's fingerprint (an older engine's, or a wrong one) is kept, not used: the
    registry's own engine decides the signature."""
    plain = send(client, "POST", "/api/v1/reports", reporter, crash_report()).json
    other = send(client, "POST", "/api/v1/reports", reporter, crash_report(fingerprint="a" * 16)).json
    assert other["signature"]["fingerprint"] == plain["signature"]["fingerprint"] != "a" * 16
    assert other["known"] is True


def test_a_misspelt_log_is_refused_naming_the_typo_and_what_is_missing(client, reporter) -> None:
    body = crash_report(console_log=None, consolelog="BUG: kernel NULL pointer dereference")
    error = refused(send(client, "POST", "/api/v1/reports", reporter, body), "console_log",
                    says="nothing to fingerprint")
    assert error["message"].endswith("; unknown fields: consolelog")
    assert error["fields"]["consolelog"] == ["unknown field; did you mean console_log?"]
    assert set(error["fields"]) == {"console_log", "stack", "consolelog"}


def test_unknown_fields_are_named_in_the_answer_and_counted(client, reporter) -> None:
    body = crash_report(consolelog="oops", host={"hostname": "gpu-a", "hostnmae": "x"},
                        stack={"frames": [{"function": "f", "fn": 1}, {"function": "g", "fn": 2}]})
    response = send(client, "POST", "/api/v1/reports", reporter, body)
    assert response.status_code == 201
    assert response.json["warnings"] == [
        "unknown field ignored: consolelog",
        "unknown field ignored: host.hostnmae",
        "unknown field ignored: stack.frames[].fn",
    ]
    replay = send(client, "POST", "/api/v1/reports", reporter, body)
    assert replay.status_code == 200 and replay.json["warnings"] == response.json["warnings"]
    assert send(client, "POST", "/api/v1/reports", reporter, crash_report()).json["warnings"] == []
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'crashreg_reports_with_unknown_fields_total{source="crash_kernel"}' in metrics


def test_not_found_and_method_not_allowed_are_json_with_allow(client, reporter) -> None:
    missing = client.get("/api/v1/no-such-thing", headers=auth(reporter))
    assert missing.status_code == 404 and missing.json["error"]["code"] == "not_found"
    wrong = client.delete("/api/v1/reports", headers=auth(reporter))
    assert wrong.status_code == 405 and wrong.json["error"]["code"] == "method_not_allowed"
    assert wrong.headers["Allow"] and "POST" in wrong.headers["Allow"]
    assert wrong.mimetype == "application/json"


def test_integers_with_a_fraction_are_400_not_truncated(client, reporter, event_id) -> None:
    """marshmallow's Integer would store 0.05 bytes as 0 and 86400.5 s of uptime as 86400."""
    capture = send(client, "POST", f"/api/v1/events/{event_id}/captures", reporter,
                   {"method": "makedumpfile", "status": "completed", "bytes": 0.05})
    refused(capture, "bytes", says="Not a valid integer")
    report = send(client, "POST", "/api/v1/reports", reporter, crash_report(uptime_s=86400.5))
    refused(report, "uptime_s", says="Not a valid integer")
    host = send(client, "POST", "/api/v1/hosts", reporter, {"hosts": [{"hostname": "h", "memory_gb": 1.5}]})
    refused(host, "hosts", 0, "memory_gb", says="Not a valid integer")
    whole = send(client, "POST", f"/api/v1/events/{event_id}/captures", reporter,
                 {"method": "makedumpfile", "status": "completed", "bytes": 4096.0})
    assert whole.status_code == 201 and whole.json["bytes"] == 4096
