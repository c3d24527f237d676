"""What README.md shows a new user, read from it: the report its quick start sends."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_report() -> dict:
    """The body of the README's `curl ... /api/v1/reports` (its `-d '...'`)."""
    readme = (ROOT / "README.md").read_text()
    body = re.search(r"curl -s -X POST \S+/api/v1/reports .*? -d '(.*?)'", readme, re.DOTALL)
    assert body, "README.md has no report curl"
    return json.loads(body.group(1))
