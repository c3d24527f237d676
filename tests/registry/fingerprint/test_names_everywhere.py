"""One name for one symbol, through every path a userspace name is decided on (issue 42,
item 4), over real symbols (tests/support/data/symbols: libstdc++, glibc, Rust std and a Rust
program, dumped with `nm -D --defined-only <library> | awk '{print $3}'`):

- a JSON stack whose frames carry the raw symbol;
- a core read on the host: the core reader names a frame `demangle(symbol)` (agents/coredump
  imports the engine's demangler);
- a core or stack read on the registry: symbolication names a frame from the debug info's raw
  symbol (registry/symbolication/stack.py);
- c++filt's spelling, as a foreign reporter would send it, for every symbol the engine's
  demangler prints as c++filt does.
Each gives the same signature, keyed on demangle.function_name."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from registry.fingerprint import analyse_stack
from registry.fingerprint.demangle import demangle, function_name
from registry.fingerprint.userspace import MAX_NAME
from registry.symbolication.stack import named_frames
from registry.symbolication.symcache import SourceFrame
from tests.support import DATA

SAMPLES = sorted((DATA / "symbols").glob("*.txt"))
MODULE = "/opt/app/bin/service"


def symbols(sample: str) -> list[str]:
    return (DATA / "symbols" / sample).read_text().split()


def signature_of(frame: dict) -> tuple[str, str | None]:
    signature = analyse_stack({"executable": MODULE, "signal": "SIGSEGV",
                               "frames": [frame, {"function": "main", "module": MODULE}]})
    assert signature is not None
    return signature.fingerprint, signature.function


@pytest.mark.parametrize("sample", [path.name for path in SAMPLES])
def test_every_path_names_a_real_symbol_alike(sample: str) -> None:
    names = symbols(sample)
    assert len(names) > 200
    differing = {}
    for symbol in names:
        raw = signature_of({"function": symbol, "module": MODULE})
        host = signature_of({"function": demangle(symbol), "module": MODULE})
        registry = signature_of(named_frames({"module": MODULE, "offset": "0x1000"},
                                             [SourceFrame(symbol, "/src/x.cc", 3, inlined=False)])[0])
        if not raw == host == registry or raw[1] not in (function_name(symbol)[:MAX_NAME], "main"):
            differing[symbol] = (raw[1], host[1], registry[1])
    assert differing == {}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) not installed")
@pytest.mark.parametrize(("sample", "at_least"), [("libstdc++.so.6.txt", 0.97), ("libc.so.6.txt", 1.0),
                                                  ("rust-std.txt", 0.98), ("rust-program.txt", 0.95)])
def test_cxxfilts_spelling_gives_the_same_name(sample: str, at_least: float) -> None:
    """A reporter that demangled with c++filt: the same name as from the raw symbol, for every
    symbol the two demanglers spell alike, and (measured: bench/README.md) nearly all others
    (what differs: symbols this demangler leaves raw, Rust v0 const generics spelled with
    their type by c++filt)."""
    names = symbols(sample)
    printed = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                             check=True).stdout.splitlines()
    pairs = list(zip(names, printed, strict=True))
    assert {s: p for s, p in pairs if demangle(s) == p and function_name(p) != function_name(s)} == {}
    alike = sum(function_name(p) == function_name(s) for s, p in pairs)
    assert alike >= at_least * len(names)


def test_the_one_rule_reads_each_spelling_of_a_name() -> None:
    """The spellings reporters send: the raw symbol, this demangler's, c++filt's (clone
    annotation, Rust crate hashes), gdb's with a clone suffix."""
    assert {function_name(name) for name in (
        "_ZNK3Foo3getEv", "Foo::get() const", "Foo::get() const [clone .cold]", "_ZNK3Foo3getEv.cold",
        "Foo::get", "_ZNK3Foo3getEv.clone.3", "Foo::get() const &&")} == {"Foo::get"}
    assert function_name("_Z3fooi") == function_name("foo(int)") == function_name("foo.clone.3") == "foo"
    assert function_name("int twice<int>(int)") == function_name("_Z5twiceIiET_S0_") == "twice<int>"
    assert function_name("Foo::operator()(int) const") == "Foo::operator()"
    assert function_name("operator()") == function_name("operator()(int) const") == "operator()"
    assert function_name("is_operator()") == "is_operator"
    assert function_name("std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&, char)") \
        == "std::operator<< <std::char_traits<char> >"
    assert function_name("Foo::operator new(unsigned long)") == "Foo::operator new"
    assert function_name("<core[c1f1a4ba060b9bfa]::option::Option<u8>>::unwrap") \
        == "<core::option::Option<u8>>::unwrap"
    assert function_name("r::main::h086b0cfd890a8ea9") == function_name("_ZN1r4main17h086b0cfd890a8ea9E") \
        == "r::main"
