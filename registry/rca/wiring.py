"""The rca domain's place in the application: its API, its commands, its tables, and a merged
signature's RCAs carried in a rebuild or settled in a merge by hand (one confirmed per bug)."""

from __future__ import annotations

from registry.core.wiring import Wiring


def register(wiring: Wiring) -> None:
    wiring.blueprints.append("registry.rca.api:blueprint")
    wiring.commands["rca"] = "registry.rca.commands:rca"
    wiring.commands["triage-bundle"] = "registry.rca.commands:triage_bundle_command"
    wiring.table_modules.append("registry.rca.models")
    wiring.signatures.folded.append("registry.rca.service:carry_rcas")
    wiring.signatures.merged.append("registry.rca.service:settle_merged_rcas")
