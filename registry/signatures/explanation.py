"""The engine's explanation record (CrashSignature.explanation) read by humans.

The record is the engine's; this is how `crashreg signature --explain` prints it. The signature
page renders the same record with the Jinja partial pages/_explanation.html. Records stored by
an older engine may lack keys, so every key is read with a default.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TypedDict

from registry.fingerprint import ExplanationRecord
from registry.fingerprint.frames import ExplainedFrame

# How a frame's decision reads in the margin: the guilty frame stands out.
MARKS = {"guilty": "=>", "used": "+", "skipped": "-"}


def frame_line(index: int, frame: ExplainedFrame, width: int) -> str:
    function = frame.get("function") or "?"
    module = f" [{frame['module']}]" if frame.get("module") else ""
    decision = frame.get("decision") or "?"
    rule = f"  ({frame['rule']})" if frame.get("rule") else ""
    return f"  {MARKS.get(decision, '?'):>2} #{index:<2} {decision:<8} {(function + module):<{width}}{rule}"


def explanation_lines(explanation: ExplanationRecord | None) -> list[str]:
    """How the fingerprint was made, one line per fact and per frame."""
    if not explanation:
        return ["  no explanation (no crash, or stored before explanations existed)"]
    kind_rule = f" (rule: {explanation['kind_rule']})" if explanation.get("kind_rule") else ""
    frames = explanation.get("frames") or []
    lines = [
        f"  kind        {explanation.get('kind') or '?'}{kind_rule}",
        f"  headline    {explanation.get('headline') or ''}",
        f"  frames from {explanation.get('section') or 'none'}",
    ]
    width = max((len(f.get("function") or "?") + len(f" [{f['module']}]" if f.get("module") else "")
                 for f in frames), default=0)
    lines += [frame_line(index, frame, width).rstrip() for index, frame in enumerate(frames)]
    if frames and explanation.get("guilty") is None:
        lines.append("  no guilty frame: the headline alone tells these crashes apart")
    lines.append(f"  flags       {', '.join(explanation.get('flags') or []) or 'none'}")
    if explanation.get("identity"):
        hashed = " | ".join(str(part) if part else "-" for part in explanation["identity"])
        lines.append(f"  hashed      {hashed}")
    lines.append(f"  engine      version {explanation.get('v', '?')}")
    return lines


class ExplanationVariant(TypedDict):
    label: str
    explanation: ExplanationRecord
    events: list[str]


def explanation_variants(
    events: Iterable[tuple[str, ExplanationRecord | None]],
) -> list[ExplanationVariant]:
    """The distinct explanations among events (id, explanation), in the events' order, each with
    a label and its events: where a merged signature's crashes were explained differently.
    Where a frame lies (its offset and source line, which move from release to release) is not
    how it was explained."""
    variants: dict[str, ExplanationVariant] = {}
    for event_id, explanation in events:
        if not explanation:
            continue
        key = json.dumps(_decisions(explanation), sort_keys=True)
        variant = variants.setdefault(key, {"label": _label(len(variants)), "explanation": explanation,
                                            "events": []})
        variant["events"].append(event_id)
    return list(variants.values())


LOCATION_FIELDS = ("offset", "file", "line")  # of an explained frame: where it is, not what became of it


def _decisions(explanation: ExplanationRecord) -> dict[str, Any]:
    frames = [{key: value for key, value in frame.items() if key not in LOCATION_FIELDS}
              for frame in explanation.get("frames") or []]
    return {**explanation, "frames": frames}


def _label(index: int) -> str:
    """A, B, ... Z, then A2, B2, ...: short enough for a table column."""
    letter, round_ = chr(ord("A") + index % 26), index // 26
    return letter + (str(round_ + 1) if round_ else "")
