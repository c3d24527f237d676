"""The pages say where a signature's events came from and whether it ever panicked."""

from __future__ import annotations

from registry.pages.origins import origins
from testkit.pages import login
from testkit.reports import NULL_DEREF_LOG, crash_report
from tests.support.http import auth
from tests.support.signatures import WARNING_LOG


def test_origins_tell_live_panic_and_pstore_apart() -> None:
    told = origins({"live_kernel": (42, 9000), "crash_kernel": (2, 0), "dpu": (1, 0), "pstore": (1, 0)})
    assert told.phrases == ["42 on live hosts (printed 9,042 times)", "3 panics", "1 panic from pstore"]
    assert told.never_panicked is False
    assert origins({"live_kernel": (1, 0)}) == origins({"live_kernel": (1, 0), "userspace": (0, 0)})
    assert origins({"live_kernel": (1, 0)}).never_panicked is True
    assert origins({"pstore": (1, 0)}).never_panicked is False
    assert origins({}).phrases == [] and origins({}).never_panicked is False


def test_list_and_page_say_where_events_came_from(client, make_token) -> None:  # type: ignore[no-untyped-def]
    token = make_token("report")

    def post(**overrides):  # type: ignore[no-untyped-def]
        response = client.post("/api/v1/reports", json=crash_report(**overrides), headers=auth(token))
        assert response.status_code == 201, response.json
        return response.json

    first = post(source="live_kernel", console_log=WARNING_LOG, report_id="live-a")
    post(source="live_kernel", console_log=WARNING_LOG, host={"hostname": "gpu-b2"})
    post(source="live_kernel", console_log=WARNING_LOG, repeat_of="live-a", repeat_count=6)
    post(source="crash_kernel", console_log=WARNING_LOG)  # the same warning with panic_on_warn
    live_only = post(source="live_kernel", console_log=NULL_DEREF_LOG)

    login(client, make_token("read"))
    listing = client.get("/signatures").get_data(as_text=True)
    assert "2 on live hosts (printed 8 times), 1 panic" in listing
    assert listing.count("never panicked") == 1
    page = client.get(f"/signatures/{live_only['signature']['id']}").get_data(as_text=True)
    assert "1 on a live host" in page and "never panicked" in page
    warning = client.get(f"/signatures/{first['signature']['id']}").get_data(as_text=True)
    assert "2 on live hosts (printed 8 times), 1 panic" in warning and "never panicked" not in warning
