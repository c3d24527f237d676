"""Every golden console log gets the title, kind, function and flags its headers state, and the
GROUP headers hold: one group, one fingerprint; two groups, two fingerprints.

A failure prints the diff `python -m tests.support.golden --update` would apply."""

from __future__ import annotations

import pytest

from registry.fingerprint import ALGORITHM_VERSION, analyse_console_log
from tests.support import golden
from tests.support.benches import load

CASES = golden.cases()


def test_the_golden_folder_covers_the_kinds_and_architectures() -> None:
    topics = {case.name.split("/")[0] for case in CASES}
    assert {"kinds", "production", "arm64", "riscv", "garbled", "groups"} <= topics
    assert all(case.headers.get("SOURCE") for case in CASES), "every file says how it was made"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_engine_agrees_with_the_golden_file(case: golden.Case) -> None:
    signature = analyse_console_log(case.log)
    assert golden.diff(case, signature) == "", (
        "\n" + golden.diff(case, signature) + "review, then: .venv/bin/python -m "
        "tests.support.golden --update")
    if signature is not None:
        assert signature.algorithm_version == ALGORITHM_VERSION
        assert signature.explanation["flags"] == [f for f in case.headers.get("FLAGS", "")
                                                  .replace(" ", "").split(",") if f]


def test_groups_share_one_fingerprint_and_never_another_groups() -> None:
    signatures = {case.name: analyse_console_log(case.log) for case in CASES}
    assert golden.group_problems(signatures, CASES) == []


def test_update_rewrites_expectations_keeps_judgement_and_shows_the_diff(tmp_path, monkeypatch,
                                                                          capsys) -> None:
    source = golden.GOLDEN / "kinds" / "gpf.log"
    stale = source.read_text().replace("FUNCTION: tcf_exts_destroy", "FUNCTION: something_else")
    (tmp_path / "kinds").mkdir()
    target = tmp_path / "kinds" / "gpf.log"
    target.write_text(stale)
    monkeypatch.setattr(golden, "GOLDEN", tmp_path)
    assert golden.main([]) == 1
    assert "-FUNCTION: something_else\n+FUNCTION: tcf_exts_destroy" in capsys.readouterr().out
    assert golden.main(["--update"]) == 0
    assert target.read_text() == source.read_text()
    assert golden.main([]) == 0


def test_a_malformed_golden_file_is_refused_with_its_name(tmp_path) -> None:
    bad = tmp_path / "x.log"
    bad.write_text("TITLE: x\nSEVERITY: high\n\nlog\n")
    with pytest.raises(ValueError, match=r"x\.log: unknown header line 'SEVERITY: high'"):
        golden.parse(bad)
    bad.write_text("TITLE: no blank line\n")
    with pytest.raises(ValueError, match="no blank line"):
        golden.parse(bad)


STYLES = load("signatures").STYLES


@pytest.mark.parametrize("style", STYLES, ids=str)
def test_every_golden_log_reads_the_same_in_every_prefix_style(style: str) -> None:
    """The journal, syslog, dmesg, caller ids, replayed and dropped printk lines: the same
    report read through any of them gets the clean log's fingerprint, title and function."""
    bench = load("signatures")
    moved = []
    for case in CASES:
        clean, seen = analyse_console_log(case.log), analyse_console_log(bench.render(case.log, style))
        if not bench.same_crash(seen, clean):
            moved.append(f"{case.name}: {clean and clean.title!r} -> {seen and seen.title!r}")
    assert moved == []
