"""The offline policy bundle: read, and refreshed from the registry (ETag)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agents.reporter.client import Unsent, http_request
from agents.reporter.config import Config
from agents.reporter.files import write_atomically
from agents.reporter.report import cmdline_values, hostname_of


def load_bundle(path: str) -> dict[str, Any] | None:
    try:
        bundle = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(bundle, dict):  # `null`, a list: no bundle this reporter wrote
        return None
    return bundle if bundle.get("format") == "crashreg-policy-bundle" else None


def fetch_bundle(config: Config) -> bool:
    """Refresh both bundle files (ETag / If-None-Match); True when either changed."""
    changed = False
    # Made for this host, the no-signature answer counts its own budget too.
    host = hostname_of(config.hostname, cmdline_values(config.cmdline).get("hostname"))
    for_host = "&host=" + quote(host, safe="")
    for target, query in ((config.bundle_json, "?format=json"), (config.bundle, "?format=text")):
        path = Path(target)
        etag_path = path.with_name(path.name + ".etag")
        headers = {}
        if path.exists() and etag_path.exists():
            headers["If-None-Match"] = etag_path.read_text().strip()
        response = http_request(config, "GET", "/api/v1/policy-bundle" + query + for_host, headers=headers)
        if response.status == 304:
            continue
        if response.status != 200:
            raise Unsent(f"policy bundle: HTTP {response.status} {response.body[:300]!r}")
        write_atomically(path, response.body)
        write_atomically(etag_path, response.headers.get("etag", ""))
        changed = True
    return changed
