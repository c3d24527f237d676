"""Which events of a signature were explained differently: by what the engine decided of each
frame, not by where the frame lies (offsets and source lines move with every release)."""

from __future__ import annotations

from typing import Any

from registry.signatures.explanation import explanation_variants


def explained(guilty_decision: str, offset: str, line: int) -> Any:
    frames = [
        {"function": "parse_record", "module": "app", "decision": guilty_decision, "rule": None,
         "file": "src/app.c", "line": line, "offset": offset},
        {"function": "main", "module": "app", "decision": "used", "rule": None,
         "file": "src/app.c", "line": line + 20, "offset": "0x1100"},
    ]
    return {"v": 6, "kind": "userspace", "frames": frames, "guilty": 0, "flags": [], "identity": ["x"]}


def test_two_releases_of_one_bug_are_one_explanation_and_a_different_decision_is_another() -> None:
    variants = explanation_variants([
        ("1", explained("guilty", "0x1162", 14)),
        ("2", explained("guilty", "0x1233", 29)),  # the next release: every offset and line moved
        ("3", explained("used", "0x1162", 14)),
    ])
    assert [(each["label"], each["events"]) for each in variants] == [("A", ["1", "2"]), ("B", ["3"])]
    assert variants[0]["explanation"]["frames"][0]["line"] == 14  # shown as the first event's
