"""Userspace cores: failure-mode labels only on proof from the stack's evidence, runtime frames
skipped, the guilty frame the program's own (the function that returned, for a bad return)."""

from __future__ import annotations

from registry.fingerprint import analyse_stack
from registry.fingerprint.userspace import aligned_stack_access, runtime_module
from registry.signatures.userspace import label_proofs
from tests.support.userspace import FRAMES, MAPPINGS, evidence, returned_to, stack

SSE_STORE_TO_STACK = "0f290424"  # movaps %xmm0,(%rsp)


def test_ordinary_fault_skips_runtime_frames_and_clone_suffixes() -> None:
    signature = analyse_stack(stack(evidence=evidence()))
    assert signature.kind == "userspace"
    assert signature.function == "nccl_proxy_progress"
    assert signature.module == "libnccl.so.2"
    assert signature.frames == ["nccl_proxy_progress [libnccl.so.2]", "proxy_service [libnccl.so.2]"]
    assert signature.labels == ["segfault"]
    assert "SIGSEGV" in signature.title and "trainer" in signature.title


def test_registers_alone_prove_nothing() -> None:
    """A report without evidence (an older reader) never gets a corruption label: rsp % 16 == 8
    is normal in a body or a frameless leaf, and pc 0 may be a call through a NULL pointer."""
    for registers in ({"rip": "0x0", "rsp": "0x7fffffffe3a0"},
                      {"rip": "0x7ffff7dc1000", "rsp": "0x7fffffffe3a0"},
                      {"rip": "0x555555560123", "rsp": "0x7fffffffe3a8"}):
        assert analyse_stack(stack(registers=registers)).labels == ["segfault"]


def test_return_to_null_needs_the_popped_zero_and_names_the_function_that_returned() -> None:
    signature = analyse_stack(returned_to("0x0", ""))
    assert signature.labels == ["return-to-null", "segfault"]
    assert (signature.function, signature.module) == ("nccl_schedule", "libnccl.so.2")
    # A NULL function pointer: pc 0, but the call left its return address on top of the stack.
    called = returned_to("0x0", "", slot_value="0x5")
    called["evidence"]["slots"][-1] = {"offset": 0, "value": "0x7ffff7d05678", "function": "proxy_service",
                                       "module": "libnccl.so.2", "call": True}
    assert analyse_stack(called).labels == ["segfault"]


def test_bad_return_needs_data_at_the_pc_and_the_pc_popped() -> None:
    signature = analyse_stack(returned_to("0x7ffff7dc1000", "rw-p"))
    assert signature.labels == ["bad-return", "segfault"]
    assert signature.function == "nccl_schedule"  # never the data object the pc landed on
    assert analyse_stack(returned_to("0x7ffff7dc1000", "rw-p", slot_value="0x42")).labels == ["segfault"]
    assert analyse_stack(returned_to("0x7ffff7a01000", "r-xp")).labels == ["segfault"]


def test_bad_return_without_red_zone_code_takes_the_next_real_frame() -> None:
    bare = returned_to("0x7ffff7dc1000", "rw-p")
    bare["evidence"]["slots"] = [{"offset": -8, "value": "0x7ffff7dc1000"}]
    assert analyse_stack(bare).function == "nccl_proxy_progress"


def test_misaligned_stack_by_an_aligned_sse_access_to_the_stack_faulting_with_si_kernel() -> None:
    proven = stack(evidence=evidence(si_code=0x80, pc_bytes=SSE_STORE_TO_STACK + "4889c4"))
    assert analyse_stack(proven).labels == ["misaligned-stack", "segfault"]
    not_kernel = stack(evidence=evidence(si_code=1, pc_bytes=SSE_STORE_TO_STACK))
    assert analyse_stack(not_kernel).labels == ["segfault"]
    heap = stack(evidence=evidence(si_code=0x80, pc_bytes="0f2900"))  # movaps %xmm0,(%rax)
    assert analyse_stack(heap).labels == ["segfault"]


def test_aligned_sse_decoding() -> None:
    assert aligned_stack_access(bytes.fromhex("660f7f4424f0"))  # movdqa %xmm0,-0x10(%rsp)
    assert aligned_stack_access(bytes.fromhex("0f2945e0"))  # movaps %xmm0,-0x20(%rbp)
    assert not aligned_stack_access(bytes.fromhex("0f1145e0"))  # movups: unaligned is fine
    assert not aligned_stack_access(bytes.fromhex("410f2904 24".replace(" ", "")))  # (%r12): REX.B
    assert not aligned_stack_access(bytes.fromhex("0f28c1"))  # register to register


def test_misaligned_cfa_counts_only_across_modules() -> None:
    """GCC drops the alignment on calls it sees every caller of, inside one module: a CFA
    8 bytes off there is normal. Across modules the ABI holds."""
    frames = [{"function": "memcpy", "module": "/lib/libc.so.6"}, *FRAMES[3:]]
    across = stack(frames=frames, evidence=evidence(cfa="0x7fffffffe3a8"))
    assert analyse_stack(across).labels == ["misaligned-stack", "segfault"]
    inside = stack(frames=FRAMES[3:], evidence=evidence(cfa="0x7fffffffe3a8"))
    assert analyse_stack(inside).labels == ["segfault"]


def test_failure_modes_split_identical_frames_into_separate_signatures() -> None:
    prints = {
        analyse_stack(stack(evidence=evidence())).fingerprint,
        analyse_stack(stack(evidence=evidence(si_code=0x80, pc_bytes=SSE_STORE_TO_STACK))).fingerprint,
        analyse_stack(stack(signal="SIGBUS")).fingerprint,
        analyse_stack(returned_to("0x0", "")).fingerprint,
        analyse_stack(returned_to("0x7ffff7dc1000", "rw-p")).fingerprint,
    }
    assert len(prints) == 5


def test_addresses_do_not_reach_the_fingerprint() -> None:
    moved = stack(registers={"rip": "0x555555561000", "rsp": "0x7ffd00000010"})
    moved["frames"] = [dict(f, address="0x7f0000001234") for f in FRAMES]
    assert analyse_stack(moved).fingerprint == analyse_stack(stack()).fingerprint


def test_unsymbolised_frames_use_module_and_offset() -> None:
    frames = [{"module": "/opt/app/libfoo.so", "offset": "0x1A2B"}, {"function": "??"}]
    signature = analyse_stack(stack(frames=frames))
    assert signature.function == "libfoo.so+0x1a2b"
    assert signature.frames == ["libfoo.so+0x1a2b"]


def test_an_unnamed_guilty_frame_keys_on_its_modules_unnamed_callers_a_named_one_on_itself() -> None:
    """Unnamed, the guilty frame may be a runtime's code the program carries (every Rust panic
    aborts through the same std frames): the callers keep two bugs apart until symbols arrive.
    Named, the callers change between releases of one bug and are left out."""
    def unnamed(*offsets: str, named: str | None = None) -> dict:
        frames = [*FRAMES[:3], *({"module": "/usr/bin/trainer", "offset": o} for o in offsets),
                  *([{"function": named, "module": "/usr/bin/trainer"}] if named else [])]
        return stack(signal="SIGABRT", frames=frames, evidence=evidence(si_code=-6))

    def fingerprint(body: dict) -> str:
        return analyse_stack(body).fingerprint

    panic_in_parse = unnamed("0x3e73a", "0x3d2f9", "0x2d3fa", "0x16b04")
    assert analyse_stack(panic_in_parse).function == "trainer+0x3e73a"
    assert fingerprint(panic_in_parse) == fingerprint(unnamed("0x3e73a", "0x3d2f9", "0x2d3fa", "0x16b04"))
    assert fingerprint(panic_in_parse) != fingerprint(unnamed("0x3e73a", "0x3d2f9", "0x2d3fa", "0x17200"))
    # a named frame ends the unnamed run: what lies below it is not keyed
    assert fingerprint(unnamed("0x3e73a", named="main")) == fingerprint(
        stack(signal="SIGABRT", evidence=evidence(si_code=-6), frames=[
            *FRAMES[:3], {"module": "/usr/bin/trainer", "offset": "0x3e73a"},
            {"function": "main", "module": "/usr/bin/trainer"},
            {"function": "serve", "module": "/usr/bin/trainer"}]))
    # named, callers apart: one fingerprint
    callers = [{"function": "nccl_proxy_progress", "module": "libnccl.so.2"}]
    assert fingerprint(stack(frames=[*callers, {"function": "proxy_service", "module": "libnccl.so.2"}])) == \
        fingerprint(stack(frames=[*callers, {"function": "proxy_retry", "module": "libnccl.so.2"}]))


def test_runtime_modules_are_skipped_even_without_symbols() -> None:
    frames = [{"module": "/usr/lib/x86_64-linux-gnu/libc.so.6", "offset": "0x8aeec"},
              {"module": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", "offset": "0x9d919"},
              {"function": "std::terminate()", "module": "libstdc++.so.6"},
              {"function": "ns::Store::flush(int)", "module": "/opt/app/store"}]
    signature = analyse_stack(stack(signal="SIGABRT", frames=frames))
    assert (signature.function, signature.module) == ("ns::Store::flush", "store")
    assert signature.labels == ["abort"]
    explained = {f["function"]: f["decision"] for f in signature.explanation["frames"]}
    assert explained["libc.so.6+0x8aeec"] == "skipped" and explained["ns::Store::flush"] == "guilty"


# The runtime's modules, by their file names on the distributions the fleet runs, and programs'
# own libraries that look like them (OpenSSL, Mozilla's NSS, the CUDA driver, DPDK, ...).
RUNTIME_MODULES = (
    "/lib/x86_64-linux-gnu/libc.so.6", "libc-2.28.so", "libpthread-2.28.so", "libpthread.so.0",
    "/lib/x86_64-linux-gnu/libm.so.6", "libm-2.31.so", "libmvec.so.1", "/lib64/libdl.so.2", "librt.so.1",
    "libresolv.so.2", "libnss_files.so.2", "libnss_systemd.so.2", "libc_malloc_debug.so.0",
    "ld-linux-x86-64.so.2", "ld-musl-x86_64.so.1", "libstdc++.so.6.0.30", "libgcc_s.so.1", "libgomp.so.1",
    "libasan.so.8", "libtsan.so.2", "libubsan.so.1", "libclang_rt.asan-x86_64.so", "libjemalloc.so.2",
    "libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libmimalloc.so.2", "[vdso]",
)
PROGRAM_MODULES = (
    "/opt/app/lib/libmyapp.so", "libcrypto.so.3", "libnss3.so", "libcuda.so.1", "libmagic.so.1",
    "libmpi.so.40", "libmd.so.0", "libdlt.so.2", "librte_eal.so.23", "libcurl.so.4", "libmlx5.so.1",
    "libmount.so.1", "libutils.so", "libcups.so.2", "libasound.so.2",
)


def test_the_runtimes_modules_are_the_c_library_compiler_runtimes_sanitizers_and_allocators() -> None:
    assert [module for module in RUNTIME_MODULES if not runtime_module(module)] == []
    assert [module for module in PROGRAM_MODULES if runtime_module(module)] == []


def test_the_standard_libraries_code_in_the_program_is_the_runtimes_but_not_a_namesake() -> None:
    """std:: (C++ or Rust) and Rust's core and alloc crates are library code even where their
    templates and generics are compiled into the program, also as a raw symbol the demangler
    does not read; a C++ program's own `core::` namespace is not Rust's."""
    program = "/opt/app/store"
    for library in ("std::vector<int, std::allocator<int> >::_M_range_check(unsigned long) const",
                    "__gnu_cxx::__ops::_Iter_less_iter::operator()", "core::option::unwrap_failed",
                    "<alloc::vec::Vec<u32> as core::ops::index::Index<usize>>::index",
                    "core::slice::index::slice_end_index_len_fail",
                    "<usize as core::slice::index::SliceIndex<[T]>>::index",
                    "<&mut [u8] as std::io::Write>::write_all", "<T as alloc::string::ToString>::to_string",
                    "operator new(unsigned long)", "operator delete[](void*)", "__dynamic_cast",
                    "_ZSt13__invoke_implIvPFviEJiEET_St14__invoke_otherOT0_DpOT1_", "_ZNKSs4sizeEv",
                    "_ZN9__gnu_cxx13new_allocatorIiE8allocateEm",
                    # raw: a decltype in its return type, which the demangler does not read
                    "_ZSt4swapIiEDTcl1gfp_EET_"):
        frames = [{"function": library, "module": program},
                  {"function": "ns::Store::flush(int)", "module": program}]
        assert analyse_stack(stack(signal="SIGABRT", frames=frames)).function == "ns::Store::flush", library
    # the program's own: its types implementing the standard library's traits, its class's own
    # allocation operator, a function that only begins like the runtime's
    for own in ("core::Engine::run()", "core::net::Socket::read(char*)", "alloc_pool::grow(int)",
                "<store::Config as core::fmt::Display>::fmt", "<&store::Key as core::hash::Hash>::hash",
                "Pool::operator new(unsigned long)", "operator_newline(int)", "dynamic_cast_table",
                "ZStory(int)"):
        frames = [{"function": own, "module": program}, {"function": "main", "module": program}]
        assert analyse_stack(stack(frames=frames)).function == own.split("(")[0], own


def test_the_c_librarys_functions_linked_into_the_program_are_the_runtimes_by_exact_name() -> None:
    """A static program carries the C library in its own module: its functions are known by
    their names and aliases, exactly, and the CPU variants by their implementation's `__`
    prefix; a program's function that only begins like one of them is its own."""
    program = "/opt/app/store"
    for library in ("__memmove_avx_unaligned_erms", "memcpy", "__strlen_evex", "__memcpy_chk", "_int_free",
                    "malloc_consolidate", "free", "__libc_malloc", "___pthread_mutex_lock",
                    "pthread_cond_wait", "modff32x", "frexpl", "__vfprintf_internal", "_IO_fwrite",
                    "msort_with_tmp", "____strtol_l_internal"):
        caller = {"function": "store::flush(int)", "module": program}
        assert analyse_stack(stack(frames=[{"function": library, "module": program}, caller])).function == (
            "store::flush"), library
    for own in ("memcpy_wrapper(char*)", "strlen_utf8", "free_list", "freeze", "printf_table",
                "modf_table", "lock_table", "string_new"):
        frames = [{"function": own, "module": program}, {"function": "main", "module": program}]
        assert analyse_stack(stack(frames=frames)).function == own.split("(")[0], own


def test_code_from_a_system_header_or_rusts_library_is_the_runtimes_by_its_source_file() -> None:
    """Symbolicated from debug info, a frame names the source file its code comes from: glibc's
    fortified wrappers inlined from its headers (which call the C library's checks), GCC's
    intrinsics, Rust's std compiled into the program are the runtime's code in the program's
    module; the program's own files, a third-party crate's or a header of its own are not."""
    program = "/opt/app/store"

    def guilty(file: str, function: str = "memcpy") -> str:
        frames = [{"module": "/usr/lib/x86_64-linux-gnu/libc.so.6", "function": "__chk_fail"},
                  {"function": function, "module": program, "offset": "0x12e6", "file": file, "line": 29,
                   "inlined": True},
                  {"function": "copy_header", "module": program, "offset": "0x12e6",
                   "file": "/src/store/io.c", "line": 11}]
        signature = analyse_stack(stack(signal="SIGABRT", frames=frames))
        assert signature is not None
        return signature.function

    for runtime in ("/usr/include/x86_64-linux-gnu/bits/string_fortified.h",
                    "/usr/include/c++/12/bits/stl_vector.h",
                    "/usr/lib/gcc/x86_64-linux-gnu/12/include/emmintrin.h",
                    "/usr/lib/llvm-16/lib/clang/16/include/xmmintrin.h",
                    "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/slice/index.rs"):
        assert guilty(runtime) == "copy_header", runtime
    for own in ("/src/store/include/usr/include/buffer.h", "store/bits/string_fortified.h",
                "/root/.cargo/registry/src/index.crates.io-6f17d22bba15001f/bytes-1.5.0/src/buf/buf_impl.rs",
                "/usr/local/include/store/buffer.h"):
        assert guilty(own, function="fill_buffer") == "fill_buffer", own


def test_an_inlined_lambda_names_no_bug_the_function_it_was_inlined_into_does() -> None:
    """Debug info names a lambda's inlined call `operator()` with nothing around it, the same for
    every lambda of a program: the function it was inlined into is guilty. A call operator read
    by its symbol (a lambda's or functor's own function) keeps its qualified name."""
    program = "/opt/app/store"
    inlined = {"function": "operator()", "module": program, "offset": "0x1421", "file": "/src/store/sum.cc",
               "line": 10, "inlined": True}
    caller = {"function": "store::total(std::vector<int>&)", "module": program, "offset": "0x1421",
              "file": "/src/store/sum.cc", "line": 9}
    signature = analyse_stack(stack(frames=[inlined, caller, {"function": "main", "module": program}]))
    assert signature is not None and signature.function == "store::total"
    assert signature.frames == ["store::total [store]", "main [store]"]
    skipped = next(frame for frame in signature.explanation["frames"] if frame["function"] == "operator()")
    assert (skipped["decision"], skipped["rule"]) == ("skipped", "inlined-lambda")
    for own, name in (("store::total(std::vector<int>&)::{lambda(int)#1}::operator()(int) const",
                       "store::total(std::vector<int>&)::{lambda(int)#1}::operator()"),
                      ("Adder::operator()(int)", "Adder::operator()")):
        named = {"function": own, "module": program, "offset": "0x1421"}
        assert analyse_stack(stack(frames=[named, caller])).function == name


def test_a_function_of_an_anonymous_namespace_is_one_bug_inlined_or_not() -> None:
    """GCC names an inlined function of internal linkage by its last component (no linkage name
    in the debug info) and its out-of-line copy by its symbol, scopes included: the guilty frame
    is keyed as the inlined spelling, so a release that stops inlining it keeps the signature.
    The title shows the name as read; a lambda in such a function, or the runtime's code in an
    anonymous namespace of std, are read as before."""
    program = "/opt/app/store"
    caller = {"function": "store::replay(int*, int)", "module": program, "offset": "0x1190"}
    spellings = [
        ("read_slot", {"file": "/src/store.cc", "line": 7, "inlined": True}),
        ("store::(anonymous namespace)::read_slot(store::(anonymous namespace)::Slot const&, int)",
         {"file": "/src/store.cc", "line": 7}),
        ("_ZN5store12_GLOBAL__N_19read_slotERKNS0_4SlotEi.isra.0", {}),
        ("(anonymous namespace)::Codec::read_slot(char const*)", {}),
    ]
    guilty = [{"function": name, "module": program, "offset": "0x11a0"} | more for name, more in spellings]
    signatures = [analyse_stack(stack(frames=[frame, caller])) for frame in guilty]
    assert {signature.fingerprint for signature in signatures if signature} == {signatures[0].fingerprint}
    assert [signature.function for signature in signatures if signature] == [
        "read_slot", "store::(anonymous namespace)::read_slot", "store::(anonymous namespace)::read_slot",
        "(anonymous namespace)::Codec::read_slot"]
    # a namespace's own function of the same name is another bug
    named = analyse_stack(stack(frames=[{"function": "store::read_slot(int)", "module": program}, caller]))
    assert named is not None and named.fingerprint != signatures[0].fingerprint
    lambda_ = "(anonymous namespace)::load()::{lambda(int)#1}::operator()(int) const"
    assert analyse_stack(stack(frames=[{"function": lambda_, "module": program}, caller])).function == (
        "(anonymous namespace)::load()::{lambda(int)#1}::operator()")
    message = "std::(anonymous namespace)::generic_error_category::message[abi:cxx11](int) const"
    runtime = {"function": message, "module": program, "offset": "0x1200"}
    assert analyse_stack(stack(frames=[runtime, caller])).function == "store::replay"


def test_a_static_function_of_a_named_namespace_is_one_bug_inlined_or_not() -> None:
    """A `static` function's demangled spelling (`store::read_slot(store::Slot const&, int)`)
    does not say it has internal linkage; its symbol does (`_ZN5storeL9read_slot...`, the L),
    which the core reader and the registry's symbolication send in `symbol`: keyed as debug info
    names an inlined call of it, `read_slot`. Read from `symbol`, the name is the symbol's
    whatever `function` says (a reporter may have cut it). A frame with the demangled spelling
    alone (an older reporter), a namespace's function of external linkage of the same name and a
    lambda in a static function keep their scopes."""
    program = "/opt/app/store"
    caller = {"function": "store::replay(int*, int)", "module": program, "offset": "0x1190"}
    symbol = "_ZN5storeL9read_slotERKNS_4SlotEi.isra.0"
    inlined = {"function": "read_slot", "symbol": "read_slot", "file": "/src/store.cc", "line": 7,
               "inlined": True}
    out_of_line = {"function": "store::read_slot(store::Slot const&, int)", "symbol": symbol}
    cut = {"function": "store::read_slot(store::Slot co", "symbol": symbol}
    guilty = [{"module": program, "offset": "0x11a0"} | more for more in (inlined, out_of_line, cut)]
    signatures = [analyse_stack(stack(frames=[frame, caller])) for frame in guilty]
    assert {signature.fingerprint for signature in signatures if signature} == {signatures[0].fingerprint}
    assert [signature.function for signature in signatures if signature] == [
        "read_slot", "store::read_slot", "store::read_slot"]
    for other in ({"function": out_of_line["function"]},
                  {"function": "store::read_slot(int)", "symbol": "_ZN5store9read_slotEi"}):
        named = analyse_stack(stack(frames=[{"module": program} | other, caller]))
        assert named is not None and named.fingerprint != signatures[0].fingerprint
    lambda_ = {"function": "store::load(int)::{lambda(int)#1}::operator()(int) const",
               "symbol": "_ZZN5storeL4loadEiENKUliE_clEi", "module": program}
    unknown = {"function": "store::read_slot(int)", "symbol": "??", "module": program}  # no name in `symbol`
    assert analyse_stack(stack(frames=[unknown, caller])).function == "store::read_slot"
    keyed, spelled = (analyse_stack(stack(frames=[frame, caller]))
                      for frame in (lambda_, {key: lambda_[key] for key in ("function", "module")}))
    assert keyed is not None and spelled is not None and keyed.fingerprint == spelled.fingerprint
    assert keyed.function == "store::load(int)::{lambda(int)#1}::operator()"


def test_a_ret_that_faults_on_a_target_that_is_not_canonical_is_a_bad_return() -> None:
    """A string over the return address: the `ret` (c3) faults as a general protection fault
    with the pc on it; the function returning is guilty. A canonical target, another
    instruction or another si_code prove nothing."""
    ascii_target = {"offset": 0, "value": "0x206e61687420656d"}

    def on_ret(pc_bytes: str = "c3554889e5", si_code: int = 0x80, top: dict = ascii_target) -> dict:
        smashed = stack(evidence=evidence(si_code=si_code, pc_bytes=pc_bytes))
        smashed["evidence"]["slots"] = [top]
        return smashed

    signature = analyse_stack(on_ret())
    assert signature.labels == ["bad-return", "segfault"] and signature.function == "nccl_proxy_progress"
    assert analyse_stack(on_ret(pc_bytes="f3c3")).labels == ["bad-return", "segfault"]
    assert analyse_stack(on_ret(pc_bytes="4889c4")).labels == ["segfault"]
    assert analyse_stack(on_ret(si_code=1)).labels == ["segfault"]
    assert analyse_stack(on_ret(top={"offset": 0, "value": "0x7ffff7a01234"})).labels == ["segfault"]


def test_garbage_stacks_are_refused_not_crashed_on() -> None:
    assert analyse_stack({}) is None
    assert analyse_stack("not a dict") is None  # type: ignore[arg-type]
    weird = {"frames": [None, 3, {"function": 7}], "registers": {"rip": [1]}, "mappings": "x",
             "signal": 11, "evidence": {"slots": [None, {"offset": "x"}, {"offset": -8, "value": 0}],
                                        "pc_bytes": "zz", "pc_perms": 5, "cfa": [], "si_code": "a"}}
    assert analyse_stack(weird) is None
    assert analyse_stack({"registers": {"rip": "0x0"}}) is None
    hostile = {"registers": {"rip": "0x0", "rsp": "0x10"},
               "evidence": {"slots": [{"offset": -8, "value": "0"}]}}
    assert analyse_stack(hostile).labels == ["return-to-null"]


def test_a_handler_that_dies_leaves_the_guilty_frame_to_what_the_signal_interrupted() -> None:
    frames = [{"function": "raise", "module": "libc.so.6"}, {"function": "abort", "module": "libc.so.6"},
              {"function": "on_fault", "module": "/opt/app/store"},
              {"module": "/lib/libc.so.6", "offset": "0x3c050", "signal_frame": True},
              {"function": "load_config", "module": "/opt/app/store"},
              {"function": "main", "module": "/opt/app/store"}]
    signature = analyse_stack(stack(signal="SIGABRT", frames=frames))
    assert (signature.function, signature.frames) == ("load_config", ["load_config [store]", "main [store]"])
    runtime_only_after = [*frames[:4], {"function": "start_thread", "module": "libc.so.6"}]
    assert analyse_stack(stack(signal="SIGABRT", frames=runtime_only_after)).function == "on_fault"


# The main thread's stack, 8 MiB, its guard gap below it unmapped; a thread's stack with its
# no-access guard page; a library's writable data.
MAIN_STACK = {"start": "0x7ffffe000000", "end": "0x7ffffe800000", "perms": "rw-p", "path": "[stack]"}
THREAD_GUARD = {"start": "0x7fffe0000000", "end": "0x7fffe0001000", "perms": "---p", "path": ""}
THREAD_STACK = {"start": "0x7fffe0001000", "end": "0x7fffe0041000", "perms": "rw-p", "path": ""}
LIBRARY_DATA = {"start": "0x7ffff7e00000", "end": "0x7ffff7e10000", "perms": "rw-p",
                "path": "/usr/lib/libnccl.so.2"}


def overflow(sp: str, si_addr: str, *extra: dict, **changes: object) -> dict:
    return stack(registers={"rip": "0x555555560123", "rsp": sp}, mappings=[*MAPPINGS, MAIN_STACK, *extra],
                 evidence=evidence(si_addr=si_addr, **changes))


def test_a_stack_overflow_is_a_fault_in_a_stacks_guard_at_the_stack_pointer() -> None:
    labels = {
        "main thread, a push below %rsp": overflow("0x7ffffdfffff0", "0x7ffffdffffe8"),
        "main thread, a local above %rsp": overflow("0x7ffffdffff00", "0x7ffffdffff0c"),
        "a thread, in its guard page": overflow(
            "0x7fffe0000ff8", "0x7fffe0000ff0", THREAD_GUARD, THREAD_STACK),
        "a NULL pointer": overflow("0x7ffffe7fe000", "0x0"),
        "the guard, %rsp elsewhere (another thread's wild write)": overflow(
            "0x7ffffe7fe000", "0x7fffe0000ff0", THREAD_GUARD, THREAD_STACK),
        "below a library's data, not a stack": overflow("0x7ffff7dffff8", "0x7ffff7dffff0", LIBRARY_DATA),
        "past the guard gap": overflow("0x7ffffd000000", "0x7ffffd000008"),
        "a mapping that refused a write (SEGV_ACCERR)": overflow(
            "0x7ffff7a00010", "0x7ffff7a00008", si_code=2),
    }
    found = {case: analyse_stack(body).labels for case, body in labels.items()}
    assert found == {
        "main thread, a push below %rsp": ["stack-overflow", "segfault"],
        "main thread, a local above %rsp": ["stack-overflow", "segfault"],
        "a thread, in its guard page": ["stack-overflow", "segfault"],
        "a NULL pointer": ["segfault"],
        "the guard, %rsp elsewhere (another thread's wild write)": ["segfault"],
        "below a library's data, not a stack": ["segfault"],
        "past the guard gap": ["segfault"],
        "a mapping that refused a write (SEGV_ACCERR)": ["segfault"],
    }
    assert analyse_stack(labels["main thread, a push below %rsp"]).fingerprint != analyse_stack(
        labels["a NULL pointer"]).fingerprint


def test_a_fault_a_handler_caught_in_a_guard_is_a_stack_overflow_when_the_process_aborts() -> None:
    """A crash reporter's handler (or Rust's std) caught the fault on an alternate stack, then
    aborted: the saved context's fault address and stack pointer prove it."""
    def caught(address: str, sp: str) -> dict:
        body = overflow("0x7fffe0041f00", "0x0")  # the abort's own registers: the handler's stack
        body["signal"] = "SIGABRT"
        body["evidence"] = evidence(si_code=-6, caught_fault_address=address, caught_fault_sp=sp)
        body["evidence"].pop("si_addr")
        return body

    in_the_guard = caught("0x7ffffdffffe8", "0x7ffffdfffff0")
    assert analyse_stack(in_the_guard).labels == ["stack-overflow", "abort"]
    assert label_proofs(in_the_guard, ["stack-overflow"])[0]["proof"].endswith(
        "the thread used up its stack; a signal handler caught that fault, then the process died")
    assert analyse_stack(caught("0x10", "0x7ffffdfffff0")).labels == ["abort"]  # a NULL pointer
    assert analyse_stack(caught("0x7ffffdffffe8", "0x7ffffe700000")).labels == ["abort"]  # %rsp far


def test_rusts_guard_page_handler_on_the_stack_is_a_stack_overflow_and_its_proof_says_so() -> None:
    handler = {"function": "std::sys::pal::unix::stack_overflow::imp::signal_handler", "module": "trainer"}
    body = stack(signal="SIGABRT", frames=[*FRAMES[:3], handler, *FRAMES[3:]], evidence=evidence(si_code=-6))
    signature = analyse_stack(body)
    assert signature.labels == ["stack-overflow", "abort"]
    assert signature.function == "nccl_proxy_progress"
    [proof, _] = label_proofs(body, signature.labels)
    assert "std::sys::pal::unix::stack_overflow::imp::signal_handler" in proof["proof"]
    guard = label_proofs(overflow("0x7ffffdfffff0", "0x7ffffdffffe8"), ["stack-overflow"])[0]["proof"]
    assert guard.startswith("the fault address 0x7ffffdffffe8 is in the guard below the stack that starts at "
                            "0x7ffffe000000")
