"""Logging a test client in through the real login form (CSRF token included)."""

from __future__ import annotations

import re
from typing import Any

CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_from(html: str) -> str:
    match = CSRF_FIELD.search(html)
    assert match, "page has no CSRF field"
    return match.group(1)


def login(client: Any, token: str, next_page: str = "/signatures") -> Any:
    form = client.get(f"/login?next={next_page}")
    return client.post(
        "/login",
        data={"token": token, "next": next_page, "csrf_token": csrf_from(form.get_data(as_text=True))},
    )
