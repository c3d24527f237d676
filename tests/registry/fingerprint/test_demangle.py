"""Readable C++ and Rust names: the C++ program's own symbols as c++filt prints them, Rust
symbols as rustc emitted them (legacy and v0), and the raw name for what is not understood."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from registry.fingerprint.demangle import demangle
from tests.support.cores import CPP_MODE, Crash
from tests.support.symbols import defined_symbols

# Real symbols: rustc 1.x, a crate `r` with `mod engine { struct Ring<T> ... fn first }` and a
# closure in main; the standard library's own (v0 since Rust 1.90 builds std with it).
RUST = {
    "_ZN1r4main17h086b0cfd890a8ea9E": "r::main",
    "_ZN1r4main28_$u7b$$u7b$closure$u7d$$u7d$17hbfe5aa28d5fb98e1E": "r::main::{{closure}}",
    "_ZN1r6engine13Ring$LT$T$GT$5first17hba823ab7014c4e33E": "r::engine::Ring<T>::first",
    "_ZN4core3ptr47drop_in_place$LT$r..engine..Ring$LT$u32$GT$$GT$17h61632f59fc801c01E":
        "core::ptr::drop_in_place<r::engine::Ring<u32>>",
    "_RNvCs6GmmlP4bgsG_1r4main": "r::main",
    "_RNCNvCs6GmmlP4bgsG_1r4main0B3_": "r::main::{closure#0}",
    "_RNvMNtCs6GmmlP4bgsG_1r6engineINtB2_4RingmE5firstB4_": "<r::engine::Ring<u32>>::first",
    "_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeINtNtCs6GmmlP4bgsG_1r6engine4RingmEEBL_":
        "core::ptr::drop_in_place::<r::engine::Ring<u32>>",
    "_RNCNCNCNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal00s_0B9_":
        "std::rt::lang_start_internal::{closure#0}::{closure#0}::{closure#1}",
    "_RNvYNCINvNtCsjrHSEGnQ3l9_3std2rt10lang_startuE0INtNtNtCsgEmfK2I1SDS_4core3ops8function6FnOnceuE9"
    "call_onceCs6GmmlP4bgsG_1r":
        "<std::rt::lang_start<()>::{closure#0} as core::ops::function::FnOnce<()>>::call_once",
}
CPP = {
    "_ZN7storage12_GLOBAL__N_17recoverERNS_7JournalINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEEEi":
        "storage::(anonymous namespace)::recover(storage::Journal<std::__cxx11::basic_string<char, "
        "std::char_traits<char>, std::allocator<char> > >&, int)",
    "_ZNKSs4sizeEv": "std::basic_string<char, std::char_traits<char>, std::allocator<char> >::size() const",
    "_ZNSt8ios_base7failureB5cxx11D1Ev": "std::ios_base::failure[abi:cxx11]::~failure()",
    "_ZlsRSoRKSt6vectorIiSaIiEE": "operator<<(std::basic_ostream<char, std::char_traits<char> >&, "
                                  "std::vector<int, std::allocator<int> > const&)",
    "_Z5applyPFviEPKc": "apply(void (*)(int), char const*)",
    "_ZSt11__addressofINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEEPT_RS6_":
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >* "
        "std::__addressof<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > >"
        "(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >&)",
    "_ZN6engine4Ring5flushEv.cold": "engine::Ring::flush()",
    "_ZTVN6engine4RingE": "vtable for engine::Ring",
    # internal linkage (`static`), as g++ -O2 left them out of line
    "_ZL6targetPKci": "target(char const*, int)",
    "_ZN3netL9frame_sumEPKci": "net::frame_sum(char const*, int)",
    "_ZL3maxIiET_S0_S0_": "int max<int>(int, int)",
    "_ZZL3barvE5count": "bar()::count",
}


@pytest.mark.parametrize(("symbol", "name"), [*RUST.items(), *CPP.items()])
def test_known_symbols(symbol: str, name: str) -> None:
    assert demangle(symbol) == name


def test_what_is_not_understood_stays_raw() -> None:
    for symbol in ("main", "_Z", "_ZN3fooE_garbage", "_Z1fIiEvDpT_", "_RNvC", "_ZNK" + "N" * 5000):
        assert demangle(symbol) == symbol


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) not installed")
def test_the_programs_own_cxx_symbols_read_as_cxxfilt_prints_them(crash_cores: dict[str, Crash]) -> None:
    program = crash_cores[CPP_MODE].program
    symbols = sorted({name for name in defined_symbols(program) if name.startswith("_Z") and "@" not in name})
    expected = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True, text=True,
                              check=True).stdout.splitlines()
    assert len(symbols) > 30
    assert [demangle(symbol) for symbol in symbols] == expected
