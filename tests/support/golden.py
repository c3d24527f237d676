"""Golden console logs: each file states what the engine must make of it.

    .venv/bin/python -m tests.support.golden            # check; print a diff per mismatch
    .venv/bin/python -m tests.support.golden --update   # rewrite the expectations from the
                                                        # engine and print the diff to review

A file (format in docs/signatures.md) is header lines, one blank line, then the raw console
log. TITLE, KIND, FUNCTION and FLAGS are the engine's expected output (no TITLE: the log holds
no crash); GROUP names the bug: files with one GROUP must share a fingerprint, files with
different GROUPs must not; SOURCE says how the log was made. `--update` rewrites only the
four expectation headers (GROUP and SOURCE are an engineer's judgement, never the engine's).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from registry.fingerprint import CrashSignature, analyse_console_log
from tests.support import DATA

GOLDEN = DATA / "golden"
EXPECTED = ("TITLE", "KIND", "FUNCTION", "FLAGS")  # what the engine decides
ORDER = ("TITLE", "KIND", "FUNCTION", "GROUP", "FLAGS", "SOURCE")


@dataclass
class Case:
    """One golden file: its headers (in file order) and its console log."""

    path: Path
    headers: dict[str, str]
    log: str
    name: str  # the path below the golden folder, e.g. "arm64/null-deref-nvme.log"


def parse(path: Path, root: Path | None = None) -> Case:
    text = path.read_text(encoding="utf-8")
    head, separator, log = text.partition("\n\n")
    if not separator:
        raise ValueError(f"{path}: no blank line between the headers and the log")
    headers = {}
    for line in head.splitlines():
        key, colon, value = line.partition(":")
        if not colon or key not in ORDER:
            raise ValueError(f"{path}: unknown header line {line!r} (allowed: {', '.join(ORDER)})")
        headers[key] = value.strip()
    name = path.relative_to(root).as_posix() if root else path.name
    return Case(path, headers, log, name)


def cases(root: Path | None = None) -> list[Case]:
    root = root or GOLDEN
    return [parse(path, root) for path in sorted(root.rglob("*.log"))]


def observed(signature: CrashSignature | None) -> dict[str, str]:
    """The expectation headers the engine's output implies (empty ones are left out)."""
    if signature is None:
        return {}
    values = {"TITLE": signature.title, "KIND": signature.kind,
              "FUNCTION": signature.function or "",
              "FLAGS": ", ".join(signature.explanation.get("flags", []))}
    return {key: value for key, value in values.items() if value or key == "FUNCTION"}


def render(headers: dict[str, str], log: str) -> str:
    ordered = [key for key in ORDER if key in headers]
    return "".join(f"{key}: {headers[key]}\n".replace(": \n", ":\n") for key in ordered) \
        + "\n" + log


def expected_text(case: Case) -> str:
    return render({k: v for k, v in case.headers.items() if k in EXPECTED}, "")


def updated(case: Case, signature: CrashSignature | None) -> dict[str, str]:
    """The file's headers with the expectations replaced by what the engine says now."""
    kept = {key: value for key, value in case.headers.items() if key not in EXPECTED}
    return {**kept, **observed(signature)}


def diff(case: Case, signature: CrashSignature | None) -> str:
    """A unified diff from the file's expectations to the engine's output ("" if they agree)."""
    want = expected_text(case).splitlines(keepends=True)
    got = render(observed(signature), "").splitlines(keepends=True)
    return "".join(difflib.unified_diff(want, got, f"{case.name} (expected)",
                                        f"{case.name} (engine)"))


def group_problems(signatures: dict[str, CrashSignature | None],
                   all_cases: list[Case]) -> list[str]:
    """Files of one GROUP with different fingerprints, and fingerprints shared across GROUPs."""
    by_group: dict[str, set[str]] = defaultdict(set)
    by_fingerprint: dict[str, set[str]] = defaultdict(set)
    members: dict[str, list[str]] = defaultdict(list)
    for case in all_cases:
        group, signature = case.headers.get("GROUP"), signatures[case.name]
        if not group or signature is None:
            continue
        by_group[group].add(signature.fingerprint)
        by_fingerprint[signature.fingerprint].add(group)
        members[group].append(case.name)
    problems = [f"GROUP {group} is split over {len(prints)} fingerprints: "
                f"{', '.join(members[group])}"
                for group, prints in sorted(by_group.items()) if len(prints) > 1]
    problems += [f"GROUPs {', '.join(sorted(groups))} share fingerprint {fingerprint}"
                 for fingerprint, groups in sorted(by_fingerprint.items()) if len(groups) > 1]
    return problems


def log(*lines: str, start: float = 100.0, ctx: str | None = None) -> str:
    """A console log: each line gets a timestamp (and a printk caller context if given)."""
    prefix = f"[ {ctx:>5}]" if ctx else ""
    return "".join(f"[{start + i / 1000:12.6f}]{prefix} {line}\n" for i, line in enumerate(lines))


def golden(name: str) -> str:
    """The console log of one golden file, e.g. golden("kinds/gpf")."""
    return parse(GOLDEN / f"{name}.log").log


TRACE = ("Call Trace:", " <TASK>")
TAIL = (" do_syscall_64+0x3b/0x90", " entry_SYSCALL_64_after_hwframe+0x44/0xae", " </TASK>")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true",
                        help="rewrite TITLE/KIND/FUNCTION/FLAGS from the engine's output")
    args = parser.parse_args(argv)
    all_cases = cases()
    signatures = {case.name: analyse_console_log(case.log) for case in all_cases}
    changed = 0
    for case in all_cases:
        text = diff(case, signatures[case.name])
        if not text:
            continue
        changed += 1
        print(text, end="")
        if args.update:
            case.path.write_text(render(updated(case, signatures[case.name]), case.log),
                                 encoding="utf-8")
    problems = group_problems(signatures, all_cases)
    for problem in problems:
        print(problem)
    verb = "rewrote" if args.update else "disagree"
    print(f"{len(all_cases)} golden files, {changed} {verb}, {len(problems)} grouping problems")
    return 0 if (args.update or not changed) and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
