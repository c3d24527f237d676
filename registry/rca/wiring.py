"""The rca domain's place in the application: its API, its commands, its tables, and a merged
signature's RCAs carried in a rebuild."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.rca.api import blueprint
from registry.rca.commands import rca, triage_bundle_command
from registry.rca.service import carry_rcas


def register(wiring: Wiring) -> None:
    wiring.blueprints.append(blueprint)
    wiring.commands += [rca, triage_bundle_command]
    wiring.table_modules.append("registry.rca.models")
    wiring.signatures.folded.append(carry_rcas)
