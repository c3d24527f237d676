"""One bug shipped in two releases, stripped as distributions ship programs: C (gcc), C++
(g++ -O2, the bug in an inlined function), Rust (rustc, an unwrap that panics and aborts) and
C again whose first release tail-calls the bug's function (only the second has `main` on the
stack); apart, C++ whose first release inlines the bug's function and the second does not
(INLINED_IN_RELEASE_1). The second release adds code before the bug, so every offset moves.
Each release is built with -g, split (`objcopy --only-keep-debug`, `strip --strip-debug
--strip-unneeded`), and the stripped program crashed for real in a directory of its own; its
core read by the core reader as a host would (agents/coredump) gives the report."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.coredump.filemode import core_file_report
from tests.support.cores import core_pattern_problem, crash
from tests.support.symbols import build_id_of

RUSTC = Path("/root/.cargo/bin/rustc")

C_BUG = r"""
#include <stdio.h>
#include <string.h>
struct header { char name[16]; int length; };
%(before)s
__attribute__((noinline)) int parse_header_field(struct header *h, const char *text)
{
    strncpy(h->name, text, sizeof h->name - 1);
    h->length = (int)strlen(text);
    return h->length;
}
"""
C_SOURCE = C_BUG + r"""
int main(int argc, char **argv)
{
    struct header *h = argc > 5 ? (struct header *)argv : NULL;
    %(call)s
    printf("%%d\n", parse_header_field(h, argc > 1 ? argv[1] : "crash"));
    return 0;
}
"""
C_RELEASE_2 = {
    "before": "__attribute__((noinline)) int checksum(const char *t) { int s = 0; "
              "while (*t) s = s * 31 + *t++; return s; }",
    "call": 'if (argc > 7) printf("%d\\n", checksum(argv[0]));',
}

# Release 1: `main` ends in the call, which gcc -O2 makes a jump (no frame of main's); release
# 2 prints the result after it, so the call returns to main. (A conditional print would not do:
# gcc duplicates the return into the branch that skips it, a tail call again.)
C_TAIL_CALL_SOURCE = C_BUG + r"""
int main(int argc, char **argv)
{
    struct header *h = argc > 5 ? (struct header *)argv : NULL;
    int length = parse_header_field(h, argc > 1 ? argv[1] : "crash");
    %(call)s
    return length;
}
"""

CPP_SOURCE = r"""
#include <cstdio>
#include <map>
#include <string>
namespace store {
%(before)s
struct Slot { int *value; };
class Journal {
public:
    explicit Journal(int n) : size_(n) {}
    inline int read(const Slot &slot) const { return *slot.value + size_; }
    __attribute__((noinline)) int replay(const Slot &slot) const;
private:
    int size_;
};
int Journal::replay(const Slot &slot) const { return read(slot) * 2; }
}
int main(int argc, char **argv)
{
    store::Journal journal(argc);
    store::Slot slot{argc > 5 ? &argc : nullptr};
    %(call)s
    std::printf("%%d\n", journal.replay(slot));
    return 0;
}
"""
CPP_RELEASE_2 = {
    "before": "__attribute__((noinline)) int tally(const std::map<std::string, int> &m) { int s = 0; "
              "for (auto &kv : m) s += kv.second * (int)kv.first.size(); return s; }",
    "call": 'if (argc > 7) { std::map<std::string, int> m{{"a", 1}}; '
            'std::printf("%d\\n", store::tally(m)); }',
}

RUST_SOURCE = r"""
use std::env;
%(before)s
#[inline(never)]
fn pick_worker(workers: &[u32], wanted: usize) -> u32 {
    let found = workers.iter().find(|w| **w as usize == wanted);
    *found.unwrap()
}
fn main() {
    let count = env::args().count();
    %(call)s
    println!("{}", pick_worker(&[1, 2, 3], 7 + count));
}
"""
RUST_RELEASE_2 = {
    "before": "#[inline(never)] fn checksum(t: &str) -> u64 { t.bytes().fold(7, |s, b| s * 31 + b as u64) }",
    "call": 'if count > 7 { println!("{}", checksum("x")); }',
}

# C++ whose bug is in a function of internal linkage (in an anonymous namespace, or `static` in
# a named one) that release 1 inlines (g++ -O2, one caller) and release 2 does not: the debug
# info names the inlined call `read_slot`, the out-of-line copy's symbol
# `store::(anonymous namespace)::read_slot` or `store::read_slot` (_ZN5storeL9read_slot...).
CPP_INTERNAL_SOURCE = r"""
#include <cstdio>
#include <map>
#include <string>
namespace store {
%(before)s
@OPEN@
struct Slot { int *value; };
@STORAGE@ %(linkage)s int read_slot(const Slot &slot, int size) { return *slot.value * 3 + size; }
@CLOSE@
__attribute__((noinline)) int replay(int *value, int size)
{
    Slot slot{value};
    return read_slot(slot, size) * 2;
}
}
int main(int argc, char **argv)
{
    %(call)s
    std::printf("%%d\n", store::replay(argc > 5 ? &argc : nullptr, argc));
    return 0;
}
"""


def internal_source(anonymous: bool) -> str:
    """CPP_INTERNAL_SOURCE with read_slot in an anonymous namespace, or `static`."""
    marks = ({"@OPEN@": "namespace {", "@CLOSE@": "}", "@STORAGE@": ""} if anonymous
             else {"@OPEN@": "", "@CLOSE@": "", "@STORAGE@": "static"})
    source = CPP_INTERNAL_SOURCE
    for mark, text in marks.items():
        source = source.replace(mark, text)
    return source


NOT_INLINED = CPP_RELEASE_2 | {"linkage": "__attribute__((noinline))"}
INLINED_IN_RELEASE_1 = {
    "c++-internal": (internal_source(anonymous=True), "cc", "read_slot", NOT_INLINED),
    "c++-static": (internal_source(anonymous=False), "cc", "read_slot", NOT_INLINED),
}

# language -> (source, file suffix, the function the bug is in as the engine names it, release 2's edits)
LANGUAGES = {
    "c": (C_SOURCE, "c", "parse_header_field", C_RELEASE_2),
    "c++": (CPP_SOURCE, "cc", "store::Journal::read", CPP_RELEASE_2),
    "rust": (RUST_SOURCE, "rs", "releases::pick_worker", RUST_RELEASE_2),
    "c-tail-call": (C_TAIL_CALL_SOURCE, "c", "parse_header_field",
                    C_RELEASE_2 | {"call": 'printf("%d\\n", length);'}),
}


@dataclass(frozen=True)
class Release:
    """One build of a program: as linked, stripped, its debug file, and a crash of the stripped one."""

    language: str
    number: int
    build_id: str
    unstripped: Path
    stripped: Path
    debug: Path
    source: Path
    report: dict

    def program_frames(self) -> int:
        """How many of the crash's stack frames are the program's own code."""
        return sum(frame.get("module") == str(self.stripped) for frame in self.report["stack"]["frames"])


def compiler(source: Path, output: Path) -> list[str]:
    if source.suffix == ".c":
        return ["gcc", "-g", "-O2", "-o", str(output), str(source)]
    if source.suffix == ".cc":
        return ["g++", "-g", "-O2", "-o", str(output), str(source)]
    return [str(RUSTC), "-g", "-C", "panic=abort", "-C", "opt-level=1", "--crate-name", "releases",
            "-o", str(output), str(source)]


def build_release(root: Path, language: str, number: int, hostname: str = "app-17") -> Release:
    template, suffix, _, edits = (LANGUAGES | INLINED_IN_RELEASE_1)[language]
    directory = root / f"{language}-{number}"
    directory.mkdir(parents=True)
    source = directory / f"service.{suffix}"
    source.write_text(template % (edits if number == 2 else {"before": "", "call": "", "linkage": ""}))
    unstripped = directory / "service.full"
    subprocess.run(compiler(source, unstripped), check=True, capture_output=True, timeout=300)
    debug, stripped = directory / "service.debug", directory / "service"
    subprocess.run(["objcopy", "--only-keep-debug", str(unstripped), str(debug)], check=True, timeout=60)
    subprocess.run(["strip", "--strip-debug", "--strip-unneeded", "-o", str(stripped), str(unstripped)],
                   check=True, timeout=60)
    core = crash(stripped, None, directory / "run")
    report = core_file_report(str(core), hostname, executable=str(stripped))
    return Release(language, number, build_id_of(unstripped), unstripped, stripped, debug, source, report)


@pytest.fixture(scope="session")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Release, Release]]:
    """language -> its two releases, each crashed once (stripped)."""
    return built_releases(tmp_path_factory, LANGUAGES)


@pytest.fixture(scope="session")
def inlining_releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Release, Release]]:
    """INLINED_IN_RELEASE_1's programs: release 1 inlines the bug's function, release 2 does not."""
    return built_releases(tmp_path_factory, INLINED_IN_RELEASE_1)


def built_releases(tmp_path_factory: pytest.TempPathFactory,
                   languages: dict[str, Any]) -> dict[str, tuple[Release, Release]]:
    problem = core_pattern_problem()
    if problem:
        pytest.skip(problem)
    if not RUSTC.exists() or shutil.which("objcopy") is None:
        pytest.skip("rustc or binutils missing")
    root = tmp_path_factory.mktemp("releases")
    return {language: (build_release(root, language, 1), build_release(root, language, 2))
            for language in languages}
