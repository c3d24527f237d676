"""The epidemiology verdict in words, for the signature page: what the analysis says, in the
order an engineer reads it. Pure: the analysis body in, sentences out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def verdict_statements(body: Mapping[str, Any]) -> list[str]:
    """The analysis' own `statements` when it has them; else (a body stored by an older
    refresh) the same facts read from its verdict, onset and uptime."""
    if body.get("statements"):
        return [str(s) for s in body["statements"]]
    detail = body.get("verdict_detail") or {}
    words = [
        f"{body.get('verdict', 'inconclusive')}: {detail['reason']}"
        if detail.get("reason")
        else str(body.get("verdict", "inconclusive"))
    ]
    onset = body.get("onset") or {}
    if onset.get("first_seen"):
        sentence = f"first seen {onset['first_seen']}"
        if onset.get("shape"):
            sentence += f", {onset['shape']}" + (
                f" on {onset['change_point']}" if onset.get("change_point") else ""
            )
        lined = onset.get("lined_up") or []
        if lined:
            sentence += (
                f"; {lined[0]['hosts']} hosts took {lined[0]['attribute']}={lined[0]['value']} that day"
            )
        words.append(sentence)
    uptime = body.get("uptime") or {}
    if uptime.get("statement"):
        words.append(f"uptime: {uptime['statement']}")
    if detail.get("more_events_needed"):
        words.append(f"about {detail['more_events_needed']} more events would decide")
    return words
