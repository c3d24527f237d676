"""detect-secrets plugins of this project's own, loaded by the scanner from this file's path
(tests/support/secret_scan.py, and `plugins_used` in .secrets.baseline for the command line).

A key file holds a long random token alone on a line (the local store's signing key was 64 hex
digits); detect-secrets' entropy detectors only look inside quotes, so they miss it. These look
at whole lines, with the same entropy limits."""

from __future__ import annotations

import re
from typing import Any

# The module, not its classes: the scanner loads every plugin class this file names.
from detect_secrets.plugins import high_entropy_strings as entropy


def whole_line(charset: str, least: int) -> re.Pattern[str]:
    """A line of `least` or more of these characters and nothing else (findall's groups as the
    quoted-string pattern's: the token is the second)."""
    return re.compile(rf"^\s*()([{charset}]{{{least},}}={{0,2}})()\s*$")


class WholeLineHexKey(entropy.HexHighEntropyString):
    secret_type = "Whole-line hex key"  # pragma: allowlist secret (a finding's name)

    def __init__(self, limit: float = 3.0, **kwargs: Any) -> None:
        super().__init__(limit=limit, **kwargs)
        self.regex = whole_line("0-9a-fA-F", 32)


class WholeLineBase64Key(entropy.Base64HighEntropyString):
    secret_type = "Whole-line base64 key"  # pragma: allowlist secret (a finding's name)

    def __init__(self, limit: float = 4.5, **kwargs: Any) -> None:
        super().__init__(limit=limit, **kwargs)
        self.regex = whole_line(r"A-Za-z0-9+/_\-", 32)
