"""The auth domain's place in the application: `crashreg tokens` and the token table."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.commands["tokens"] = "registry.auth.commands:tokens"
    wiring.table_modules.append("registry.auth.models")
