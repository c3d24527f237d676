"""Readable C++ and Rust names: the C++ program's own symbols as c++filt prints them, Rust
symbols as rustc emitted them (legacy and v0), and the raw name for what is not understood."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from registry.fingerprint.demangle import demangle, function_name, internal_linkage
from tests.support import DATA
from tests.support.cores import CPP_MODE, Crash
from tests.support.mangled import itanium_chain, rust_backref_chain
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
RECOGNIZER = "llvm::ScheduleHazardRecognizer"
HAZARD = f"std::unique_ptr<{RECOGNIZER}, std::default_delete<{RECOGNIZER}> >"
PREDICATE = "__gnu_cxx::__ops::_Iter_pred<std::_Mem_fn<bool (llvm::ScheduleHazardRecognizer::*)() const> >"
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
    # variadic templates: a pack expansion is one parameter per element (references collapse)
    "_Z8log_lineIJiEEiPKcDpOT_": "int log_line<int>(char const*, int&&)",
    "_Z1fIJiRdEEvDpOT_": "void f<int, double&>(int&&, double&)",
    "_Z10count_refsIJEEivDpRKT_": "int count_refs<>()",
    "_ZN3BoxIJicEE3putIJidEEEiDpPT_": "int Box<int, char>::put<int, double>(int*, double*)",
    "_Z1fIJidEEvSt5tupleIJDpT_EE": "void f<int, double>(std::tuple<int, double>)",
    "_ZSt10make_tupleIJidEESt5tupleIJDpNSt25__strip_reference_wrapperINSt5decayIT_E4typeEE6__typeEEEDpOS3_":
        "std::tuple<std::__strip_reference_wrapper<std::decay<int>::type>::__type, "
        "std::__strip_reference_wrapper<std::decay<double>::type>::__type> "
        "std::make_tuple<int, double>(int&&, double&&)",
    # a lambda of a variadic template; a local entity of a function template (no return type)
    "_ZZN4Pool6submitIZ4mainEUliE_JiEEEvOT_DpOT0_ENKUlvE_clEv":
        "Pool::submit<main::{lambda(int)#1}, int>(main::{lambda(int)#1}&&, int&&)::{lambda()#1}"
        "::operator()() const",
    "_ZZ5tallyIiEiT_E5total": "tally<int>(int)::total",
    # GCC reuses `T_` (and `OT_`) spelled in the lambda's enclosing template for the template
    # around it, where `T_` is that one's own first argument (here the lambda): c++filt reads
    # them in the lambda's template (`main::{lambda(int)#1}&&`), which is not the parameter's type
    "_ZNKSt9_Any_data9_M_accessIZN4Pool6submitIZ4mainEUliE_JiEEEvOT_DpOT0_EUlvE_EERKS4_v":
        "Pool::submit<main::{lambda(int)#1}, int>(main::{lambda(int)#1}&&, int&&)::{lambda()#1} const& "
        "std::_Any_data::_M_access<Pool::submit<main::{lambda(int)#1}, int>(main::{lambda(int)#1}&&, "
        "int&&)::{lambda()#1}>() const",
    "_ZNSt8functionIFvvEEC1IZN4Pool6submitIZ4mainEUliE_JiEEEvOT_DpOT0_EUlvE_vEES7_":
        "std::function<void ()>::function<Pool::submit<main::{lambda(int)#1}, int>(main::{lambda(int)#1}&&, "
        "int&&)::{lambda()#1}, void>(Pool::submit<main::{lambda(int)#1}, int>(main::{lambda(int)#1}&&, "
        "int&&)::{lambda()#1}&&)",
    # thunks; arrays by pointer and reference, a const array's element, a const function type
    "_ZThn16_N7Channel5writeEv": "non-virtual thunk to Channel::write()",
    "_ZTv0_n24_N4Leaf6weightEv": "virtual thunk to Leaf::weight()",
    "_ZTch0_h16_N6Circle4copyEv": "covariant return thunk to Circle::copy()",
    "_Z8sum_rowsPA4_ii": "sum_rows(int (*) [4], int)",
    "_Z6extentIiLj7EEjRAT0__T_": "unsigned int extent<int, 7u>(int (&) [7u])",
    "_Z5applyIJA2_cEEvDpRKT_": "void apply<char [2]>(char const (&) [2])",
    "_ZTIKFvRK4NodeE": "typeinfo for void (Node const&) const",
    # (LLVM 15's) a const argument made const again is const once; a member function's const
    # type is one substitution, its unqualified type none (SG_ is the first parameter's type)
    "_Z1fIKiEvRKT_": "void f<int const>(int const&)",
    "_ZSt9__find_ifIPKSt10unique_ptrIN4llvm24ScheduleHazardRecognizerESt14default_deleteIS2_EEN9__gnu_cxx5__ops"
    "10_Iter_predISt7_Mem_fnIMS2_KFbvEEEEET_SG_SG_T0_St26random_access_iterator_tag":
        f"{HAZARD} const* std::__find_if<{HAZARD} const*, {PREDICATE} >({HAZARD} const*, {HAZARD} const*, "
        f"{PREDICATE}, std::random_access_iterator_tag)",
    # SFINAE: a dependent type's member (sr) and its negation (nt) in a template argument
    "_ZN4llvm10checkedAddIlEENSt9enable_ifIXsr3std9is_signedIT_EE5valueENS_8OptionalIS2_EEE4typeES2_S2_":
        "std::enable_if<std::is_signed<long>::value, llvm::Optional<long> >::type "
        "llvm::checkedAdd<long>(long, long)",
    "_ZSt11make_sharedI4NodeJEESt10shared_ptrINSt9enable_ifIXntsr8is_arrayIT_EE5valueES3_E4typeEEDpOT0_":
        "std::shared_ptr<std::enable_if<!is_array<Node>::value, Node>::type> std::make_shared<Node>()",
    # a generic lambda (its `auto` parameters are its template's, named by the call operator's
    # instance); a constructor inherited from a base (`using Counter::Counter`)
    "_ZZ4mainENKUlT_T0_E_clIiiEEDaS_S0_":
        "auto main::{lambda(auto:1, auto:2)#1}::operator()<int, int>(int, int) const",
    "_ZN5TallyCI17CounterEi": "Tally::Counter(int)",
    # a template parameter passed on as an expression; c++filt's `>>` after an empty pack's
    # expansion (libiberty drops the separator and keeps its space as the last character)
    "_ZSt12__get_helperILm1ESt14default_deleteIN3svc7RequestEEJEERT0_RSt11_Tuple_implIXT_EJS4_DpT1_EE":
        "std::default_delete<svc::Request>& std::__get_helper<1ul, std::default_delete<svc::Request>>"
        "(std::_Tuple_impl<1ul, std::default_delete<svc::Request>>&)",
    # a transaction clone (libstdc++'s -fgnu-tm copies)
    "_ZGTtNKSt11logic_error4whatEv": "transaction clone for std::logic_error::what() const",
    # callbacks as template arguments: the address of a function, a member function, a variable
    "_ZN5TimerIXadL_Z5checkiEEE3runEi": "Timer<&(check(int))>::run(int)",
    "_ZN5TimerIXadL_Z5twiceIiET_S1_EEE3runEi": "Timer<&(int twice<int>(int))>::run(int)",
    "_ZN8ScheduleIXadL_ZN6Worker4tickEvEEE3runERS0_": "Schedule<&Worker::tick>::run(Worker&)",
    "_Z4bumpIXadL_Z5ticksEEEiv": "int bump<&ticks>()",
}
# What a fingerprint keys on, from the names above that need more than the name's own part.
KEYS = {
    "_ZZN4Pool6submitIZ4mainEUliE_JiEEEvOT_DpOT0_ENKUlvE_clEv":
        "Pool::submit<main::{lambda(int)#1}, int>(main::{lambda(int)#1}&&, int&&)::{lambda()#1}::operator()",
    "_ZThn16_N7Channel5writeEv": "Channel::write",  # a thunk is keyed as the function it adjusts for
    "_ZTch0_h16_N6Circle4copyEv": "Circle::copy",
    "_ZGTtNKSt11logic_error4whatEv": "std::logic_error::what",
    "_ZZ4mainENKUlT_T0_E_clIiiEEDaS_S0_": "main::{lambda(auto:1, auto:2)#1}::operator()<int, int>",
    "_ZN3BoxIJicEE3putIJidEEEiDpPT_": "Box<int, char>::put<int, double>",
    # left raw for an expression it does not read in its return type (decltype), keyed as
    # c++filt's spelling is
    "_ZSt4swapIiEDTcl1gfp_EET_": "std::swap<int>",
}
# ... and how c++filt spells those
CXXFILT_SPELLINGS = {"_ZSt4swapIiEDTcl1gfp_EET_": "decltype (g({parm#1})) std::swap<int>(int)"}


@pytest.mark.parametrize(("symbol", "name"), [*RUST.items(), *CPP.items()])
def test_known_symbols(symbol: str, name: str) -> None:
    assert demangle(symbol) == name


@pytest.mark.parametrize(("symbol", "key"), KEYS.items())
def test_a_name_is_keyed_on_its_function(symbol: str, key: str) -> None:
    assert function_name(symbol) == key == function_name(CXXFILT_SPELLINGS.get(symbol, demangle(symbol)))


# Names that end in a qualifier's word, or an operator that is one (a name of its own), and
# names with qualifiers after their parameters, as c++filt and gdb print them -> their key.
QUALIFIED = {
    "is_const": "is_const",
    "core::ptr::write_volatile": "core::ptr::write_volatile",
    "apply_restrict(opt*)": "apply_restrict",
    "set_noexcept": "set_noexcept",
    "_ZNK3Foo8is_constEv": "Foo::is_const",
    "Foo::is_const() const": "Foo::is_const",
    "Foo::operator&(Foo const&)": "Foo::operator&",
    "Foo::operator&&": "Foo::operator&&",
    "Foo::get() const &": "Foo::get",
    "Foo::get()&&": "Foo::get",
    "Foo::get() const noexcept": "Foo::get",
    "bar_volatile(int) volatile [clone .cold]": "bar_volatile",
}


@pytest.mark.parametrize(("name", "key"), QUALIFIED.items())
def test_a_qualifiers_word_ends_a_name_only_after_its_parameters(name: str, key: str) -> None:
    assert function_name(name) == key


# Symbol -> whether its own name has internal linkage (a `static` function: L <name>)
LINKAGE = {
    "_ZN3netL6targetEPi": True,  # net::target(int*), static
    "_ZL6targetPi": True,  # target(int*), static at file scope
    "_ZN5storeL9read_slotERKNS_4SlotEi.isra.0": True,
    "_ZN3netL4pickINS_3FooEEEvv": True,  # a static template: its argument's name is not its own
    "_ZN3net6targetEPi": False,
    "_ZN3net3Box4openEPi": False,  # a static member function has external linkage
    "_ZZN3netL6targetEPiENKUlvE_clEv": False,  # a lambda in a static function
    "_ZN12_GLOBAL__N_18anon_topEPi": False,  # an anonymous namespace's (its name says so)
    "_ZN3net5outerIXadL_ZNS_L4fromEvEEE3runEv": False,  # a static function as a template argument
    "_ZN3netL4pickILi5EEEvv": True,
    "target": False,
    "_ZN1r4main17h0123456789abcdefE": False,  # Rust
}


@pytest.mark.parametrize(("symbol", "internal"), LINKAGE.items())
def test_a_static_functions_symbol_says_so(symbol: str, internal: bool) -> None:
    assert internal_linkage(symbol) is internal


def test_what_is_not_understood_stays_raw() -> None:
    # an expansion of no pack, a pack outside its expansion, an expression it does not read
    for symbol in ("main", "_Z", "_ZN3fooE_garbage", "_Z1fIiEvDpT_", "_Z1fIJidEEvDpT_S0_", "_RNvC",
                   "_Z1fIiEDTcl1gfp_EET_", "_ZNK" + "N" * 5000):
        assert demangle(symbol) == symbol


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) not installed")
def test_the_programs_own_cxx_symbols_read_as_cxxfilt_prints_them(crash_cores: dict[str, Crash]) -> None:
    program = crash_cores[CPP_MODE].program
    symbols = sorted({name for name in defined_symbols(program) if name.startswith("_Z") and "@" not in name})
    expected = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True, text=True,
                              check=True).stdout.splitlines()
    assert len(symbols) > 30
    assert [demangle(symbol) for symbol in symbols] == expected


def over_the_lambda(symbol: str) -> bool:
    """One of std's templates instantiated over Pool::submit's lambda, whose type (a local name)
    is in its template arguments: c++filt misreads the parameters GCC reuses there (see CPP)."""
    return "ZN4Pool6submitI" in symbol and not symbol.startswith(("_ZN4Pool6submit", "_ZZN4Pool6submit"))


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) not installed")
def test_a_template_heavy_programs_symbols_read_as_cxxfilt_prints_them(tmp_path: Path) -> None:
    """tests/support/data/demangle/templates.cc built by g++: variadic templates, a lambda of
    one run through std::function, thunks, a function template's local variable, arrays."""
    program = tmp_path / "templates"
    subprocess.run(["g++", "-g", "-O0", str(DATA / "demangle/templates.cc"), "-o", str(program)],
                   check=True, capture_output=True, timeout=300)
    symbols = sorted({name for name in defined_symbols(program) if name.startswith("_Z") and "@" not in name})
    expected = dict(zip(symbols, subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True,
                                                text=True, check=True).stdout.splitlines(), strict=True))
    read = {symbol: demangle(symbol) for symbol in symbols}
    assert sum("Dp" in symbol for symbol in symbols) > 40
    assert sum(symbol.startswith(("_ZTh", "_ZTv", "_ZTc")) for symbol in symbols) >= 3
    assert {s: read[s] for s in symbols if not over_the_lambda(s)} == \
           {s: expected[s] for s in symbols if not over_the_lambda(s)}
    instances = [symbol for symbol in symbols if over_the_lambda(symbol)]
    assert len(instances) > 20
    # each is read (or, with an expression in its template arguments, left raw) and names the lambda
    lambdas = ("Pool::submit<main::{lambda(int)#1}, int>(main::{lambda(int)#1}&&, int&&)::{lambda()#1}",
               "Pool::submit<main::{lambda(int, double)#2}, int, double&>(main::{lambda(int, double)#2}&&, "
               "int&&, double&)::{lambda()#1}")
    assert all(any(name in read[s] for name in lambdas) or ("X" in s and read[s] == s) for s in instances)


def test_a_symbol_naming_a_type_many_times_over_stays_raw() -> None:
    """Each level names the type before three times (a substitution, a Rust backref): the name
    grows threefold a level, to gigabytes in 40 levels of a few hundred characters. Beyond a
    bounded length and what may be read again, the symbol stays raw."""
    assert demangle(itanium_chain(2)) == (  # as c++filt prints it
        "f(int*, void (*)(int*, int*, int*), void (*)(void (*)(int*, int*, int*), "
        "void (*)(int*, int*, int*), void (*)(int*, int*, int*)))")
    triple = "(i32, i32, i32)"
    assert demangle(rust_backref_chain(1)) == f"a::<{triple}, ({triple}, {triple}, {triple})>"
    for symbol in (itanium_chain(40), rust_backref_chain(40)):
        assert demangle(symbol) == symbol
