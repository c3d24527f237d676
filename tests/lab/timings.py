"""The lab's figures as a Markdown table: `python -m tests.lab.timings $CRASHREG_LAB_OUT/lab-timings.jsonl`.

Every lab run appends to lab-timings.jsonl (one line per guest boot, see lab.Boot.timings); this
prints median, min and max of each phase, for boots that dumped (full) and boots that did not.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

PHASES = (
    ("boot_s", "QEMU start to the first kernel's /init"),
    ("panic_to_answer_s", "panic to the registry's answer in the crash kernel"),
    ("dump_s", "makedumpfile (the decided dump)"),
    ("total_s", "whole guest run"),
)


def table(rows: list[dict[str, object]]) -> str:
    lines = ["| phase | boots | median s | min s | max s |", "|---|---|---|---|---|"]
    for group, selected in (
        ("dumped", [r for r in rows if "dump_s" in r]),
        ("no dump", [r for r in rows if "dump_s" not in r]),
    ):
        for key, label in PHASES:
            values = [float(r[key]) for r in selected if key in r]  # type: ignore[arg-type]
            if values:
                lines.append(
                    f"| {label} ({group}) | {len(values)} | {statistics.median(values):.1f} | "
                    f"{min(values):.1f} | {max(values):.1f} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table([json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line]))
