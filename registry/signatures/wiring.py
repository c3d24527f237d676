"""The signatures domain's place in the application: its API, merges, and its commands."""

from __future__ import annotations

from registry.core.wiring import Wiring
from registry.signatures.api import blueprint
from registry.signatures.commands import signature_command, signatures
from registry.signatures.identify import identify
from registry.signatures.merge_api import blueprint as merges_blueprint


def register(wiring: Wiring) -> None:
    wiring.blueprints += [blueprint, merges_blueprint]
    wiring.commands += [signature_command, signatures]
    wiring.engine = identify
