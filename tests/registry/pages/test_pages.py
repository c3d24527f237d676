"""The signature pages through Flask's test client: login, CSRF, cookies, search, detail."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from registry.app import create_app
from registry.auth.models import ApiToken
from registry.config import Settings
from registry.core.jira_links import JiraLink
from registry.core.secrets import AppSecret
from registry.db import utcnow
from registry.pages.models import WebSession
from testkit.pages import csrf_from, login
from tests.support.rca import ai_rca, post_rca, review, seed

CRASHES = [("gpu-b1", "6.8.0-52", "us-east"), ("gpu-b2", "6.8.0-58", "eu-west")]


@pytest.fixture
def seeded(client, database, make_token):  # type: ignore[no-untyped-def]
    report = make_token("report")
    main = seed(client, database, report, "ext4_evict_inode", CRASHES)
    seed(client, database, report, "tcp_sendmsg_locked", [("net-1", "6.8.0-52", "us-east")])
    return main


def test_pages_redirect_to_login_and_back(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    page = client.get(f"/signatures/{seeded.signature_id}")
    assert page.status_code == 302
    assert page.headers["Location"] == f"/login?next=/signatures/{seeded.signature_id}"
    response = login(client, make_token("read"), f"/signatures/{seeded.signature_id}")
    assert (
        response.status_code == 302 and response.headers["Location"] == f"/signatures/{seeded.signature_id}"
    )
    assert client.get(f"/signatures/{seeded.signature_id}").status_code == 200


def test_login_cookie_is_httponly_samesite_lax_and_holds_no_token(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    token = make_token("read")
    response = login(client, token)
    cookie = next(
        v for k, v in response.headers.items() if k == "Set-Cookie" and v.startswith("crashreg_session=")
    )
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert token not in cookie
    page = client.get("/signatures")
    assert page.headers["Cache-Control"] == "private, no-store"
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]


def test_login_refusals_csrf_unknown_token_and_report_scope(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    client.get("/login")
    no_csrf = client.post("/login", data={"token": make_token("read")})
    assert no_csrf.status_code == 400 and "CSRF" in no_csrf.get_data(as_text=True)
    not_ascii = client.post("/login", data={"token": make_token("read"), "csrf_token": "\xe9"})  # was a 500
    assert not_ascii.status_code == 400 and "CSRF" in not_ascii.get_data(as_text=True)
    unknown = login(client, "crs_nope_nope")
    assert unknown.status_code == 401 and "unknown or revoked token" in unknown.get_data(as_text=True)
    reporter = login(client, make_token("report"))
    assert reporter.status_code == 403 and "log in with a read token" in reporter.get_data(as_text=True)
    assert client.get("/signatures").status_code == 302


def test_login_never_redirects_off_site(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    for target in ("//evil.example/x", "https://evil.example/", "javascript:alert(1)"):
        assert login(client, make_token("read"), target).headers["Location"] == "/signatures"


def test_logout_needs_csrf_and_ends_the_session_server_side(client, database, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    login(client, make_token("read"))
    page = client.get("/signatures").get_data(as_text=True)
    assert client.post("/logout", data={}).status_code == 400
    assert client.get("/signatures").status_code == 200
    assert client.post("/logout", data={"csrf_token": csrf_from(page)}).status_code == 302
    assert client.get("/signatures").status_code == 302
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(WebSession)) == 0


def test_revoking_the_token_ends_its_web_sessions(client, database, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    token = make_token("read", name="revoke-me")
    login(client, token)
    assert client.get("/signatures").status_code == 200
    with database.session() as session:
        session.execute(update(ApiToken).where(ApiToken.name == "revoke-me").values(revoked_at=utcnow()))
    assert client.get("/signatures").status_code == 302


def test_signature_list_searches(client, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    login(client, make_token("read"))
    everything = client.get("/signatures").get_data(as_text=True)
    assert "evict_inode" in everything and "tcp_sendmsg_locked" in everything
    found = client.get("/signatures?q=tcp_sendmsg&status=").get_data(as_text=True)
    assert "tcp_sendmsg_locked" in found and "evict_inode" not in found
    assert "No signatures match." in client.get("/signatures?q=nothing-like-this").get_data(as_text=True)
    bad = client.get("/signatures?status=bogus")
    assert bad.status_code == 400 and "status" in bad.get_data(as_text=True)


def test_signature_page_shows_facts_hosts_rcas_checks_reviews_and_jira(
    client, database, make_token, seeded
) -> None:  # type: ignore[no-untyped-def]
    agent = make_token("triage", kind="agent")
    good = post_rca(client, agent, seeded.signature_id, ai_rca(seeded)).json
    review(client, make_token("triage", name="carol"), good["id"], "confirmed", "dumps agree")
    post_rca(
        client,
        agent,
        seeded.signature_id,
        ai_rca(seeded, summary="bogus theory", fix={"kernel_version": "6.8.0-52"}),
    )
    with database.session() as session:
        session.add(
            JiraLink(
                signature_id=int(seeded.signature_id),
                issue_key="CRASH-7",
                url="https://jira.example/browse/CRASH-7",
            )
        )
    login(client, make_token("read"))
    html = client.get(f"/signatures/{seeded.signature_id}").get_data(as_text=True)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    for text in ("gpu-b1", "gpu-b2", "6.8.0-58", "eu-west", "ext4_evict_inode", "Fixed in kernel"):
        assert text in html
    assert "bogus theory" in html and "FLAGGED" in html and "fix_version_consistent" in html
    assert "confirmed by carol" in html and "dumps agree" in html
    assert 'href="https://jira.example/browse/CRASH-7"' in html
    assert 'id="verdict"' in html and 'id="statements"' in html
    assert f'event_id=<a href="/events/{seeded.event_ids[0]}"><code>' in html  # RCA evidence links the event
    assert client.get("/signatures/424242").status_code == 404
    # ids past the column's range, or not ASCII digits, are pages that do not exist (were a 500)
    for path in ("/events/99999999999999999999", "/events/2147483648/console.txt", "/events/%C2%B2"):
        assert client.get(path).status_code == 404, path


def test_cookie_secret_is_shared_by_workers_through_the_database(settings, database) -> None:  # type: ignore[no-untyped-def]
    workers = [create_app(settings, database) for _ in range(2)]
    for app in workers:
        app.test_client().get("/login")
    assert workers[0].secret_key and workers[0].secret_key == workers[1].secret_key
    with database.session() as session:
        assert session.scalar(select(AppSecret.value)) == workers[0].secret_key
    configured = create_app(
        Settings(database_url=settings.database_url, secret_key="from-env-" + "x" * 32), database
    )
    configured.test_client().get("/login")
    assert configured.secret_key == "from-env-" + "x" * 32


def test_api_requests_open_no_session_even_with_a_login_cookie(client, database, make_token, seeded) -> None:  # type: ignore[no-untyped-def]
    """The API authenticates by bearer token alone: a browser's login cookie does not stand in
    for one, and an API answer never sets or refreshes the cookie."""
    login(client, make_token("read"), "/")
    assert client.get_cookie("crashreg_session") is not None
    refused = client.get(f"/api/v1/signatures/{seeded.signature_id}")
    assert refused.status_code == 401 and "Set-Cookie" not in refused.headers
    read = client.get(f"/api/v1/signatures/{seeded.signature_id}",
                      headers={"Authorization": f"Bearer {make_token('read')}"})
    assert read.status_code == 200 and "Set-Cookie" not in read.headers
