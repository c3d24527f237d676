"""Failure classes from real cores (issue 40, item 5), read by the core reader and labelled by
the engine: programs of tests/support/data/cores/classes.{c,rs} built here (gcc -O0 and -O2,
rustc with panic=abort) and crashed in directories of the test's own.

- A call through a garbage function pointer (unmapped, or data) is not a bad return: the
  caller is guilty, no corruption label.
- A signal handler that faults in its own code is guilty (not the code the signal interrupted);
  one that catches a fault and aborts blames the interrupted code (crashy.c's `handler` in
  test_coredump.py).
- Rust's runtime between a panic and the abort is never guilty: the program's function is.
- A string copied over a return address (ASCII: no canonical address) faults on the `ret`
  itself: `bad-return`, the function returning guilty.
- The C++ standard library's code instantiated in the program (a vector's at(), a string
  made from NULL) is the runtime's: the program's function that called it is guilty.
- A fault in a library of the C library beside libc (libm's modf storing through NULL) is the
  program's function that passed the pointer; so is one inside an allocator that replaces the
  C library's heap (jemalloc, handed a stack buffer to free).
- A runaway recursion is a stack overflow (the fault in the stack's guard, at the stack
  pointer; on a thread's stack too; caught by a handler that aborts, a crash reporter's or
  Rust's runtime's, from the context the signal frame saved): the recursing function is
  guilty, and a NULL dereference in the same place is not labelled so.
- Shipped stripped of every symbol, each class reads alike once its symbols are known (the
  registry's symcache of the program as linked): the standard libraries' code a C++ or Rust
  program carries in its own module is the runtime's by name, never by module.
- Built hardened (_FORTIFY_SOURCE, a stack protector), a fortified memcpy past its buffer and a
  copy over the canary abort from glibc's checks, called from code its header inlined in the
  program: the function that copied is guilty, named by symbol or by its debug info (whose
  inlined frame is the header's wrapper). So is a Rust function whose index went through core's
  generic code, a C++ function whose allocation failed in the C++ runtime linked in, and one
  whose lambda, inlined, faulted (the debug info names every inlined lambda `operator()`).
- strlen handed NULL, a lock that was never made and a double free fault or abort in the C
  library: the program's function that called it is guilty, in its own module (`gcc -static`,
  where the C library's functions are known by name, under whichever alias a reader picks)
  as in libc's.
- A variadic template's instance that faults is guilty under its readable name
  (`inventory::record<int&, double>`, not `_ZN9inventory6recordIJRidEEEvPNS_7JournalEDpOT_`), and
  so is named a variadic template's lambda that called a job that faulted.
- A class template's instance over the standard library's containers faults (its name and the
  std::map code's below it, as c++filt prints them, run past 1,500 characters each): the core
  reader sends the names whole and the registry takes them (a 400 refused the report before);
  the guilty frame is keyed on the name's head and tail, which holds the function's own name.
- A program built with AddressSanitizer that writes past a heap buffer aborts from the
  sanitizer's runtime, which the core reader unwinds (its library is mapped in pieces, some far
  below where it is loaded): the program's function that wrote is guilty.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from agents.coredump import core_file_report
from registry.fingerprint import analyse_stack
from registry.fingerprint.userspace import Evidence, called_through_a_pointer, read_evidence
from registry.signatures.userspace import label_proofs
from registry.symbolication.stack import symbolicate
from registry.symbolication.symcache import Symcaches
from tests.support import DATA
from tests.support.agents import Registry, Site, run_reporter
from tests.support.cores import core_pattern_problem, crash
from tests.support.releases import RUSTC

SOURCES = DATA / "cores"
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")  # linked in: its heap replaces the C library's
# (program, argument) -> (labels, guilty function, the frame after it; None: none is read)
EXPECTED = {
    ("classes", "garbage-call"): (["segfault"], "dispatch", "main"),
    ("classes", "data-call"): (["segfault"], "dispatch", "main"),
    ("classes", "handler-bug"): (["segfault"], "on_reload", "serve_requests"),
    ("classes-O2", "garbage-call"): (["segfault"], "dispatch", "main"),
    ("classes-O2", "data-call"): (["segfault"], "dispatch", "main"),
    ("classes-O2", "handler-bug"): (["segfault"], "on_reload", "main"),  # serve_requests tail-calls raise
    # the return address is the string: the unwinder reads no caller
    ("classes", "smash"): (["bad-return", "segfault"], "copy_name", None),
    ("classes-O2", "smash"): (["bad-return", "segfault"], "copy_name", None),
    # a fault in the C library's libm: the function that handed it the bad pointer
    ("classes", "libm-null"): (["segfault"], "fraction_of", "main"),
    ("classes-O2", "libm-null"): (["segfault"], "fraction_of", "main"),
    # free() of a stack buffer: the C library's heap and jemalloc's each fault inside themselves
    ("classes", "free-stack"): (["segfault"], "forget_buffer", "main"),
    ("classes-jemalloc", "free-stack"): (["segfault"], "forget_buffer", "main"),
    # a runaway recursion: the fault in the stack's guard
    ("classes", "recurse"): (["stack-overflow", "segfault"], "walk_tree", "walk_tree"),
    ("classes-O2", "recurse"): (["stack-overflow", "segfault"], "walk_tree", "walk_tree"),
    ("classes", "thread-recurse"): (["stack-overflow", "segfault"], "walk_tree", "walk_tree"),
    # ... caught by a crash reporter's handler, which aborts: the fault from its saved context
    ("classes", "recurse-caught"): (["stack-overflow", "abort"], "walk_tree", "walk_tree"),
    ("classes-rs", "recurse"): (["stack-overflow", "abort"], "classes::walk_tree", "classes::walk_tree"),
    # AddressSanitizer's report, then its abort
    ("classes-asan", "heap-overflow"): (["abort"], "append_record", "main"),
    ("classes-cc", "at"): (["abort"], "inventory::lookup", "main"),
    ("classes-cc", "null-string"): (["abort"], "inventory::name_length", "main"),
    # an exception escaping a thread's job: std::thread's invoker below it (a variadic template's
    # instance, `std::__invoke_impl<void, void (*)(int), int>`) is the runtime's
    ("classes-cc", "thread-throw"): (["abort"], "inventory::recount", None),
    # a variadic template's instance faults; a job faults, called by a variadic template's lambda
    ("classes-cc", "variadic"): (["segfault"], "inventory::record<int&, double>", "main"),
    # a class template's instance over std::map<std::string, ...>: its name's head and tail
    ("classes-cc", "long-names"): (["segfault"], (
        "inventory::Catalog<std::map<std::__cxx11::basic_string<char, std::char_traits<char>, "
        "std::allocator<…cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > "
        "> > > > > > > > > >::count"), "main"),
    ("classes-cc", "variadic-job"): (
        ["segfault"], "main::{lambda(int*)#1}::operator()",
        "inventory::run_job<main::{lambda(int*)#1}, int*&>(main::{lambda(int*)#1}&&, int*&)"
        "::{lambda()#1}::operator()"),
    ("classes-rs", "option-unwrap"): (["abort"], "classes::pick_worker", "classes::main"),
    ("classes-rs", "result-unwrap"): (["abort"], "classes::parse_port", "classes::main"),
    ("classes-rs", "index"): (["abort"], "classes::read_slot", "classes::main"),
    ("classes-rs", "abort"): (["abort"], "classes::give_up", "classes::main"),
    # core's index, instantiated in the program, panics on a thread the program started
    ("classes-rs", "thread-index"): (["abort"], "classes::tally", "classes::main::{{closure}}"),
    # built hardened: the C library's checks abort from code its header inlined in the program
    ("classes-hardened", "fortify"): (["abort"], "copy_header", "main"),
    ("classes-hardened", "canary"): (["abort"], "label_of", "main"),
    # optimised, with the C++ runtime linked into the program: its operator new throws; a lambda
    # inlined with std::for_each faults (the function it is inlined into is guilty)
    ("classes-cc-static", "bad-alloc"): (["abort"], "inventory::reserve", "main"),
    ("classes-cc-static", "at"): (["abort"], "inventory::lookup", "main"),
    ("classes-cc-static", "lambda"): (["segfault"], "inventory::total", "main"),
    # a bad pointer or a corrupt heap faults in the C library: the function that handed it over
    # (at -O2 main tail-calls the last two: no caller is read)
    ("classes-O2", "string-null"): (["segfault"], "name_length", "main"),
    ("classes-O2", "mutex-null"): (["segfault"], "lock_table", None),
    ("classes-O2", "double-free"): (["abort"], "drop_twice", None),
    # ... with the C library linked into the program (gcc -static): known by name, not module
    ("classes-static", "string-null"): (["segfault"], "name_length", "main"),
    ("classes-static", "mutex-null"): (["segfault"], "lock_table", None),
    ("classes-static", "double-free"): (["abort"], "drop_twice", None),
    ("classes-static", "libm-null"): (["segfault"], "fraction_of", "main"),
    ("classes-static", "free-stack"): (["abort"], "forget_buffer", "main"),
}


@pytest.fixture(scope="module")
def class_programs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The programs of EXPECTED, built with their symbols in a folder of their own."""
    problem = core_pattern_problem()
    if problem:
        pytest.skip(problem)
    if not RUSTC.exists():
        pytest.skip("rustc is not installed")
    root = tmp_path_factory.mktemp("classes")
    unprotected = "-fno-stack-protector"  # where it is the compiler's default, the smash aborts first
    classes_c = [str(SOURCES / "classes.c"), "-lm", "-pthread"]
    builds = {
        "classes": ["gcc", "-g", "-O0", "-fno-omit-frame-pointer", unprotected, *classes_c],
        "classes-O2": ["gcc", "-g", "-O2", unprotected, *classes_c],
        "classes-static": ["gcc", "-g", "-O2", "-static", unprotected, *classes_c],
        "classes-jemalloc": ["gcc", "-g", "-O0", *classes_c, str(JEMALLOC)],
        "classes-asan": ["gcc", "-g", "-O1", "-fsanitize=address", "-fno-omit-frame-pointer", *classes_c],
        # as dpkg-buildflags hardens Debian's packages
        "classes-hardened": ["gcc", "-g", "-O2", "-D_FORTIFY_SOURCE=2", "-fstack-protector-strong",
                             *classes_c],
        "classes-cc": ["g++", "-g", "-O0", "-pthread", str(SOURCES / "classes.cc")],
        "classes-cc-static": ["g++", "-g", "-O2", "-pthread", "-static-libstdc++", "-static-libgcc",
                              str(SOURCES / "classes.cc")],
        "classes-rs": [str(RUSTC), "-g", "-C", "panic=abort", str(SOURCES / "classes.rs")],
    }
    if not JEMALLOC.exists():
        builds.pop("classes-jemalloc")
    for name, command in builds.items():
        subprocess.run([*command, "-o", str(root / name)], check=True, capture_output=True, timeout=300)
    return root


def cores_of(programs: Path, runs: Path) -> dict[tuple[str, str], dict]:
    """(program, argument) -> the core reader's report of its real core, each of EXPECTED built
    in `programs` crashed in a folder of its own under `runs`."""
    return {(program, argument): core_file_report(str(crash(programs / program, argument,
                                                              runs / f"{program}-{argument}")), "app-3")
            for program, argument in EXPECTED if (programs / program).exists()}


@pytest.fixture(scope="module")
def class_cores(class_programs: Path) -> dict[tuple[str, str], dict]:
    return cores_of(class_programs, class_programs / "runs")


@pytest.fixture(scope="module")
def stripped_class_cores(class_programs: Path) -> dict[tuple[str, str], dict]:
    """The same programs stripped of every symbol (strip --strip-all, as shipped), crashed alike."""
    stripped = class_programs / "stripped"
    stripped.mkdir()
    for program in {program for program, _ in EXPECTED if (class_programs / program).exists()}:
        subprocess.run(["strip", "--strip-all", "-o", str(stripped / program), str(class_programs / program)],
                       check=True, timeout=60)
    return cores_of(stripped, class_programs / "stripped-runs")


@pytest.mark.parametrize(("program", "argument"), list(EXPECTED))
def test_each_class_keeps_its_labels_exact_and_its_guilty_frame_the_programs_own(
        class_cores: dict[tuple[str, str], dict], program: str, argument: str) -> None:
    if (program, argument) not in class_cores:
        pytest.skip(f"{JEMALLOC} is not installed (Debian: libjemalloc2)")
    labels, function, caller = EXPECTED[program, argument]
    signature = analyse_stack(class_cores[program, argument]["stack"])
    assert signature is not None
    assert (signature.labels, signature.function, signature.module) == (labels, function, program)
    assert signature.frames[:2] == [f"{function} [{program}]", *([f"{caller} [{program}]"] if caller else [])]


def test_a_core_with_names_of_thousands_of_characters_is_registered(
        registry: Registry, make_site: Callable[..., Site], class_programs: Path, tmp_path: Path) -> None:
    """The built reporter (system python3) sends the long-names class's core, its frames named
    whole (1,770 to 2,675 characters, each with its symbol), and the registry stores it: the
    event's guilty frame is the class template's `count`."""
    core = crash(class_programs / "classes-cc", "long-names", tmp_path / "run")
    sent = run_reporter(make_site(), "core", "--core", str(core))
    assert sent.returncode == 0, sent.stderr
    answer = json.loads(sent.stdout)
    assert answer["decided_by"] == "registry", sent.stderr
    event = registry.get(f"/api/v1/events/{answer['event_id']}")
    explanation = event["explanation"]
    keyed = EXPECTED["classes-cc", "long-names"][1]
    assert explanation["frames"][explanation["guilty"]]["function"] == keyed
    frames = event["userspace"]["frames"]
    assert min(len(frame["function"]) for frame in frames[:4]) > 1500 and frames[4]["function"] == "main"
    guilty = frames[event["userspace"]["guilty"]]["function"]
    string = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"
    assert guilty.startswith("inventory::Catalog<std::map<")
    assert guilty.endswith(f" >::count({string} const&) const")


@pytest.mark.parametrize(("program", "argument"), list(EXPECTED))
def test_each_class_stripped_reads_alike_once_the_registry_has_its_symbols(
        class_programs: Path, stripped_class_cores: dict[tuple[str, str], dict], tmp_path: Path,
        program: str, argument: str) -> None:
    """Shipped stripped, the same crash symbolicated from the program's symbols (a symcache of
    the program as linked, by its build-id, as the registry makes one) gives the same labels and
    guilty frame: the standard libraries' code a C++ or Rust program carries in its own module
    (a vector's at(), std's panic and guard-page handlers) is known as the runtime's by name."""
    if (program, argument) not in stripped_class_cores:
        pytest.skip(f"{JEMALLOC} is not installed (Debian: libjemalloc2)")
    labels, function, caller = EXPECTED[program, argument]
    stack = stripped_class_cores[program, argument]["stack"]
    symcaches = Symcaches(tmp_path / "symcaches")
    assert symcaches.build(stack["build_id"], class_programs / program)
    signature = analyse_stack(symbolicate(stack, symcaches.lookup, None).stack)
    assert signature is not None
    assert (signature.labels, signature.function, signature.module) == (labels, function, program)
    assert signature.frames[:2] == [f"{function} [{program}]", *([f"{caller} [{program}]"] if caller else [])]


def test_classes_stripped_without_symbols_keep_their_labels_and_different_bugs_apart(
        stripped_class_cores: dict[tuple[str, str], dict]) -> None:
    """Before any symbol arrives, a stripped program's labels are exact (they come from the
    evidence, not from names) and its different bugs stay apart: a Rust program's panics and
    aborts all leave through the same std frames in its own module, the guilty frame read
    (`+0x...`), so its unnamed callers tell them apart."""
    prints: dict[tuple[object, ...], set[str]] = {}
    for (program, argument), report in stripped_class_cores.items():
        labels, function, _ = EXPECTED[program, argument]
        signature = analyse_stack(report["stack"])
        assert signature is not None and "+0x" in signature.title
        assert signature.labels == labels, (program, argument)
        prints.setdefault((program, tuple(labels), function), set()).add(signature.fingerprint)
    apart = [fingerprints for fingerprints in prints.values()]
    assert len(set().union(*apart)) == sum(len(fingerprints) for fingerprints in apart)  # none shared


def test_a_garbage_call_is_not_a_bad_return_even_when_the_popped_slot_holds_the_pc(
        class_cores: dict[tuple[str, str], dict]) -> None:
    """What separates a call from a `ret` is the top slot (the return address the call pushed,
    into the caller) and what the slots below name, not the chance value below %rsp: the real
    core's stack with the slot under %rsp set to the pc stays a call; crashy.c's unbalanced
    return (its own calls' addresses below, the caller's on top) stays a bad return."""
    stack = class_cores["classes", "data-call"]["stack"]
    evidence = read_evidence(stack)
    assert isinstance(evidence, Evidence) and evidence.pc_perms == "rw-p"
    assert called_through_a_pointer(evidence)
    pc = stack["registers"]["rip"]
    slots = [slot | {"value": pc} if slot["offset"] == -8 else slot for slot in stack["evidence"]["slots"]]
    coincidence = analyse_stack(stack | {"evidence": stack["evidence"] | {"slots": slots}})
    assert coincidence is not None
    assert (coincidence.labels, coincidence.function) == (["segfault"], "dispatch")
    own_call = replace(evidence.slots[0], offset=-16, function="unbalanced")
    returned = replace(evidence, slots={**evidence.slots, -16: own_call})
    assert not called_through_a_pointer(returned)


def test_the_smash_is_proved_by_the_ret_it_faulted_on(class_cores: dict[tuple[str, str], dict]) -> None:
    """What the event page and the API say proves `bad-return` for a smashed return address:
    the `ret` that faulted, and the target that is not an address (ASCII of the string)."""
    stack = class_cores["classes", "smash"]["stack"]
    signature = analyse_stack(stack)
    assert signature is not None
    proofs = {proof["label"]: proof["proof"] for proof in label_proofs(stack, signature.labels)}
    target = next(slot["value"] for slot in stack["evidence"]["slots"] if slot["offset"] == 0)
    assert bytes.fromhex(target[2:])[::-1].isascii()  # the string's bytes, little-endian
    pc = stack["registers"]["rip"]
    assert proofs["bad-return"].startswith(f"the `ret` at pc {pc} faulted before it jumped")
    assert f"its target on top of the stack, {target}, is not a canonical address" in proofs["bad-return"]


def test_the_sanitizers_runtime_is_unwound_frame_by_frame(class_cores: dict[tuple[str, str], dict]) -> None:
    """Between the C library's abort and the program's function, every frame is the sanitizer's
    runtime, named, in its library, as AddressSanitizer's own report lists them: no frame
    without a module, none read off the stack by chance."""
    frames = class_cores["classes-asan", "heap-overflow"]["stack"]["frames"]
    assert all(frame.get("module") for frame in frames), frames
    names = [frame.get("function") for frame in frames]
    aborted, wrote = names.index("abort"), names.index("append_record")
    runtime = frames[aborted + 1:wrote]
    assert runtime and all(Path(frame["module"]).name.startswith("libasan.so") for frame in runtime)
    assert "__asan_report_store1" in names[aborted + 1:wrote]
    assert names.count("append_record") == 1 and names[wrote + 1] == "main"
