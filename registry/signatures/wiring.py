"""The signatures domain's place in the application: its API, merges, its commands, the engine."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints += ["registry.signatures.api:blueprint", "registry.signatures.merge_api:blueprint"]
    wiring.commands["signature"] = "registry.signatures.commands:signature_command"
    wiring.commands["signatures"] = "registry.signatures.commands:signatures"
    wiring.engine = "registry.signatures.identify:identify"
    wiring.table_modules.append("registry.signatures.checkpoint")
