"""Write tests/support/data/vectors.json: inputs with the fingerprint and title the engine gives.

The vectors pin the algorithm: the server engine and the inlined reporter must both reproduce
them, and a change that moves any fingerprint shows up as a diff here (bump
ALGORITHM_VERSION, then regenerate):

    .venv/bin/python -m tests.support.vectors
"""

from __future__ import annotations

import json

from registry.fingerprint import ALGORITHM_VERSION, analyse_report
from tests.support import DATA
from tests.support.golden import cases
from tests.support.userspace import evidence, returned_to, stack

VECTORS = DATA / "vectors.json"


def inputs() -> list[dict]:
    """Every golden console log (lab files included), then userspace stacks."""
    kernel = [{"name": f"golden: {case.name}", "console_log": case.log, "stack": None}
              for case in cases()]
    return [*kernel,
        {"name": "userspace: segfault", "console_log": None, "stack": stack()},
        {"name": "userspace: segfault with evidence", "console_log": None,
         "stack": stack(evidence=evidence())},
        {"name": "userspace: return-to-null", "console_log": None, "stack": returned_to("0x0", "")},
        {"name": "userspace: bad-return", "console_log": None,
         "stack": returned_to("0x7ffff7dc1000", "rw-p")},
        {"name": "userspace: misaligned-stack", "console_log": None,
         "stack": stack(evidence=evidence(si_code=0x80, pc_bytes="0f290424"))},
        {"name": "no crash", "console_log": "[    0.000000] Linux version 6.8.0\n", "stack": None},
    ]


def vectors() -> dict:
    entries = []
    for case in inputs():
        signature = analyse_report(case["console_log"], case["stack"])
        entries.append({**case, "fingerprint": signature.fingerprint if signature else None,
                        "title": signature.title if signature else None})
    return {"algorithm_version": ALGORITHM_VERSION, "vectors": entries}


def main() -> None:
    VECTORS.write_text(json.dumps(vectors(), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(vectors()['vectors'])} vectors to {VECTORS}")


if __name__ == "__main__":
    main()
