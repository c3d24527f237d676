"""The bench's held-out split: fixed by seed and file name, a third of the corpus, in the repo."""

from __future__ import annotations

from pathlib import Path

from tests.support.benches import load

ROOT = Path(__file__).resolve().parents[3]
bench = load("signatures")


def test_the_corpus_is_read_from_the_repository_with_its_licence() -> None:
    assert bench.CORPUS == ROOT / "tests/corpus/syzkaller-linux"
    for name in ("LICENSE", "NOTICE", "README.md"):
        assert (bench.CORPUS / name).is_file()
    assert "1e72964b0111319984575e60f266d1fa0a98abb5" in (bench.CORPUS / "NOTICE").read_text()
    names = {sample.name for sample in bench.load_corpus()}
    assert len(names) == 383 and not names & {"LICENSE", "NOTICE", "README.md"}


def test_the_split_is_a_stable_third_whatever_else_is_in_the_folder() -> None:
    samples = bench.load_corpus()
    parts = bench.split(samples)
    assert len(parts["tuned"]) + len(parts["held-out"]) == len(samples)
    assert 0.28 < len(parts["held-out"]) / len(samples) < 0.39
    more = bench.split([*samples, bench.Sample("added-later", None, "")])
    assert [s.name for s in more["held-out"] if s.name != "added-later"] == \
        [s.name for s in parts["held-out"]]


def test_lab_golden_files_are_read_with_their_expectations(tmp_path) -> None:
    (tmp_path / "x86").mkdir()
    (tmp_path / "x86" / "oops.log").write_text(
        "TITLE: BUG: kernel NULL pointer dereference in foo_probe [foo]\nKIND: null-deref\n"
        "FUNCTION: foo_probe\nGROUP: foo-null\nSOURCE: crash lab\n\n[ 1.0] BUG: kernel NULL\n")
    (sample,) = bench.load_lab(tmp_path)
    assert (sample.function, sample.group, sample.log) == ("foo_probe", "foo-null",
                                                           "[ 1.0] BUG: kernel NULL\n")
    assert bench.load_lab(tmp_path / "missing") == []
