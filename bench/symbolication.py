"""Symbolication: which library, and what it costs ingest (bench/README.md "Symbolication").

    .venv/bin/python -m bench.symbolication [--work DIR] [--big FILE] [--reports N]

1. The libraries on real debug files: Sentry's `symbolic` (a symcache built once per build-id,
   then looked up by mmap), pyelftools (pure Python: an index of the DWARF line programs and
   functions built in-process) and elfutils' eu-addr2line (a process per batch of addresses).
   Files: a C program (gcc -O2), a C++ one (g++ -O2, a call inlined at the crash), a Rust one
   (rustc -g), the largest real debug file on the machine (symbolic's own library, Rust) and a
   ~100 MB one (a generated C++ program of templates, -g -O1, `objcopy --only-keep-debug`;
   built into --work the first time, ~20 minutes on a busy 2-core machine, or given by --big).
   Per file: build time, per-lookup time, inlined frames and file:line at the crash address.
2. Names: the engine's demangler against c++filt over the exported symbols of libstdc++,
   glibc, Rust std and the large C++ libraries the machine has (LLVM, clang, Boost, the JVM,
   SwiftShader: those found); symbolic's Python binding exposes no demangler: its symcaches
   give the raw symbol, which the engine's one demangler names.
3. Ingest: the CPU a userspace report costs (validation and `ingest_report`, SQLite,
   in-process, the calling thread's CPU) with a warm symcache against the same report without
   symbolication, alternated report by report in the same run; the symbolication step's own
   p50/p99; a cold miss (no symcache, the only debuginfod a server that never answers): the
   engine's wall time against the budget.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUSTC = "/root/.cargo/bin/rustc"
C_PROGRAM = r"""
#include <stdio.h>
struct req { int *slot; };
__attribute__((noinline)) int handle(struct req *r) { return *r->slot + 1; }
int main(int argc, char **argv) {
  struct req r = { argc > 5 ? &argc : 0 }; printf("%d\n", handle(&r)); return 0; }
"""
CPP_PROGRAM = r"""
#include <cstdio>
#include <map>
#include <string>
namespace store {
struct Slot { int *value; };
class Journal { public: explicit Journal(int n) : size_(n) {}
  inline int read(const Slot &slot) const { return *slot.value + size_; }
  __attribute__((noinline)) int replay(const Slot &slot) const { return read(slot) * 2; }
  private: int size_; };
}
int main(int argc, char **) { std::map<std::string, int> m{{"a", argc}}; store::Journal j(argc);
  store::Slot s{argc > 5 ? &argc : nullptr}; std::printf("%d %zu\n", j.replay(s), m.size()); return 0; }
"""
RUST_PROGRAM = r"""
#[inline(never)]
fn pick(workers: &[u32], wanted: usize) -> u32 { *workers.iter().find(|w| **w as usize == wanted).unwrap() }
fn main() { println!("{}", pick(&[1, 2, 3], 7 + std::env::args().count())); }
"""
BIG_UNITS = 8  # units small enough to compile in under 2 GB each
BIG_NAMESPACES = 95  # per unit: 760 in all give ~100 MB of DWARF


def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=3600, **kwargs)


def build_programs(work: Path) -> dict[str, tuple[Path, str]]:
    """name -> (debug file, the function the crash address is in)."""
    out = {}
    for name, source, suffix, command, function in (
            ("C gcc -O2", C_PROGRAM, "c", ["gcc", "-g", "-O2"], "handle"),
            ("C++ g++ -O2", CPP_PROGRAM, "cc", ["g++", "-g", "-O2"], "replay"),
            ("Rust rustc -g", RUST_PROGRAM, "rs", [RUSTC, "-g", "-C", "opt-level=1"], "pick")):
        binary = work / name.split()[0].replace("+", "p").lower()
        if not binary.exists():
            (work / f"{binary.name}.{suffix}").write_text(source)
            run([*command, "-o", str(binary), str(work / f"{binary.name}.{suffix}")])
        out[name] = (binary, function)
    return out


def generated_unit(index: int) -> str:
    lines = ["#include <map>", "#include <string>", "#include <vector>", "#include <memory>",
             "#include <functional>", "#include <algorithm>"]
    for n in range(BIG_NAMESPACES):
        ns = f"u{index}n{n}"
        lines.append(f"""namespace {ns} {{
template <typename T> struct Box {{ std::map<std::string, std::vector<T>> items; std::function<T(T)> f;
  T sum(const std::string &k) const {{ T s{{}}; auto it = items.find(k); if (it != items.end())
    for (auto &v : it->second) s += f ? f(v) : v; return s; }}
  void add(const std::string &k, T v) {{ items[k].push_back(v);
    std::sort(items[k].begin(), items[k].end()); }} }};
struct K {{ int a; double b; bool operator<(const K &o) const {{ return a < o.a; }} }};
int run(int x) {{ Box<long> b; b.add("k", x); Box<double> d; d.add("j", x * 0.5);
  auto p = std::make_shared<Box<int>>(); p->add("z", x); std::map<K, std::string> m; m[K{{x, 1.0}}] = "v";
  return (int)(b.sum("k") + d.sum("j") + p->sum("z")) + (int)m.size(); }}
}}""")
    if index == 0:
        every = [(u, n) for u in range(BIG_UNITS) for n in range(BIG_NAMESPACES)]
        lines += [f"namespace u{u}n{n} {{ int run(int); }}" for u, n in every if u]
        calls = " ".join(f"t += u{u}n{n}::run(c);" for u, n in every)
        lines.append(f"int main(int c, char **) {{ int t = 0; {calls} return t; }}")
    return "\n".join(lines)


def build_big(work: Path) -> Path:
    """A ~100 MB debug file: generated C++ in BIG_UNITS units, -g -O1, the debug info split off."""
    debug = work / "big.debug"
    if debug.exists():
        return debug
    objects = []
    for index in range(BIG_UNITS):
        source = work / f"big{index}.cc"
        source.write_text(generated_unit(index))
        objects.append(work / f"big{index}.o")
        run(["g++", "-g", "-O1", "-c", "-o", str(objects[-1]), str(source)])
    run(["g++", "-o", str(work / "big"), *map(str, objects)])
    run(["objcopy", "--only-keep-debug", str(work / "big"), str(debug)])
    return debug


def symbol_address(binary: Path, function: str) -> int:
    """An address inside `function` (4 bytes past its start), from the unstripped symbol table."""
    for line in run(["nm", "-C", str(binary)]).stdout.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and parts[1] in "tTW" and function in parts[2] \
                and "(" not in parts[2].split(function)[0]:
            return int(parts[0], 16) + 4
    raise SystemExit(f"{function} not found in {binary}")


def function_addresses(binary: Path, count: int) -> list[int]:
    found = []
    for line in run(["nm", "--defined-only", str(binary)]).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            found.append(int(parts[0], 16) + 1)
    step = max(len(found) // count, 1)
    return found[::step][:count]


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


# --- the libraries ------------------------------------------------------------------------


def with_symbolic(debug: Path, crash: int, addresses: list[int]) -> dict[str, Any]:
    import symbolic

    from registry.symbolication.symcache import Symcaches

    build_id = next(symbolic.Archive.open(str(debug)).iter_objects()).code_id
    with tempfile.TemporaryDirectory() as folder:
        caches = Symcaches(Path(folder))
        build_s, _ = timed(lambda: caches.build(build_id, debug))
        size = caches.path(build_id).stat().st_size
        caches.lookup(build_id, addresses[0])
        lookups_s, _ = timed(lambda: [caches.lookup(build_id, a) for a in addresses])
        frames = caches.lookup(build_id, crash) or []
        inlined = sum(len(caches.lookup(build_id, a) or []) > 1 for a in addresses)
    return {"build_s": build_s, "per_lookup_us": lookups_s / len(addresses) * 1e6, "cache_mb": size / 2**20,
            "lookups_with_inlined_frames": inlined,
            "frames": [(f.symbol[:60], Path(f.file or "?").name, f.line) for f in frames]}


def with_pyelftools(debug: Path, crash: int, addresses: list[int], limit_s: float) -> dict[str, Any]:
    """The index a pure-Python symbolicator would build: every line-table row and every
    function's range, then bisect (inlined frames would need the DIE tree walked as well)."""
    code = f"""
import bisect, json, sys, time
from elftools.elf.elffile import ELFFile
start = time.perf_counter()
rows, functions = [], []
with open({str(debug)!r}, "rb") as handle:
    dwarf = ELFFile(handle).get_dwarf_info()
    for unit in dwarf.iter_CUs():
        program = dwarf.line_program_for_CU(unit)
        names = [entry.name.decode() for entry in program.header.file_entry] if program else []
        for entry in program.get_entries() if program else ():
            if entry.state and not entry.state.end_sequence:
                rows.append((entry.state.address, entry.state.file, entry.state.line))
        for die in unit.iter_DIEs():
            ranged = "DW_AT_low_pc" in die.attributes and "DW_AT_high_pc" in die.attributes
            if die.tag == "DW_TAG_subprogram" and ranged:
                low = die.attributes["DW_AT_low_pc"].value
                high = die.attributes["DW_AT_high_pc"].value
                high = high if die.attributes["DW_AT_high_pc"].form == "DW_FORM_addr" else low + high
                name = die.attributes.get("DW_AT_linkage_name") or die.attributes.get("DW_AT_name")
                functions.append((low, high, name.value.decode() if name else "?"))
rows.sort(); functions.sort()
built = time.perf_counter() - start
keys, lows = [r[0] for r in rows], [f[0] for f in functions]
def look(a):
    at = bisect.bisect_right(lows, a) - 1
    row = rows[bisect.bisect_right(keys, a) - 1]
    return functions[at][2] if at >= 0 and functions[at][1] > a else None, row[2]
addresses = {addresses!r}
start = time.perf_counter()
for a in addresses: look(a)
per = (time.perf_counter() - start) / len(addresses)
print(json.dumps({{"build_s": built, "per_lookup_us": per * 1e6, "frames": [look({crash})]}}))
"""
    try:
        done = subprocess.run([str(Path(__file__).resolve().parents[1] / ".venv/bin/python"), "-c", code],
                              capture_output=True, text=True, timeout=limit_s, check=True)
    except subprocess.TimeoutExpired:
        return {"build_s": None, "note": f"index not built in {limit_s:.0f} s"}
    return json.loads(done.stdout)


def with_eu_addr2line(debug: Path, crash: int, addresses: list[int]) -> dict[str, Any]:
    """A process per batch: what it costs to answer one report's frames (startup and DWARF
    reading included), and per address in a batch of all of them."""
    command = ["eu-addr2line", "-e", str(debug), "-f", "-i", "-C"]

    def answer(*args: str, **kwargs: Any) -> str:  # exit status 1 when some address had no answer
        return subprocess.run([*command, *args], capture_output=True, text=True, timeout=3600, check=False,
                              **kwargs).stdout

    one_s, answered = timed(lambda: answer(hex(crash)))
    batch_s, _ = timed(lambda: answer(input="\n".join(hex(a) for a in addresses)))
    lines = answered.splitlines()
    return {"one_report_s": one_s, "per_lookup_us": batch_s / len(addresses) * 1e6,
            "frames": [(lines[i][:60], Path(lines[i + 1].split(":")[0]).name, lines[i + 1].split(":")[1])
                       for i in range(0, len(lines) - 1, 2)]}


def compare_libraries(files: dict[str, tuple[Path, Path, str]], lookups: int, limit_s: float) -> None:
    print("\n## libraries (build once per build-id; per-lookup after)")
    for name, (binary, debug, function) in files.items():
        crash = symbol_address(binary, function)
        addresses = function_addresses(binary, lookups)
        size = debug.stat().st_size / 2**20
        print(f"\n{name}: {debug.name}, {size:.1f} MB; crash address {crash:#x} in {function}")
        for library, figures in (("symbolic", with_symbolic(debug, crash, addresses)),
                                 ("pyelftools", with_pyelftools(debug, crash, addresses, limit_s)),
                                 ("eu-addr2line", with_eu_addr2line(debug, crash, addresses))):
            print(f"  {library:13s} {json.dumps(figures, default=str)}")


# --- names --------------------------------------------------------------------------------

CLONE_NOTE = re.compile(r"(?: \[clone [^\]]*\])+$")  # c++filt's; the engine drops clone suffixes


def exported(path: str) -> list[str]:
    return sorted({line.split()[-1].split("@")[0] for line in run(["nm", "-D", "--defined-only", path]).stdout
                   .splitlines() if len(line.split()) == 3})


LIBRARIES = {  # name -> path (a glob: the first match; absent ones are left out)
    "libstdc++.so.6": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6",
    "Rust std": str(Path.home() / ".rustup/toolchains/*stable*/lib/rustlib/*/lib/libstd-*.so"),
    "LLVM": "/usr/lib/x86_64-linux-gnu/libLLVM-1[0-9].so.1",
    "clang": "/usr/lib/llvm-1[0-9]/lib/libclang-cpp.so.1[0-9]",
    "Boost (5 libraries)": "/usr/lib/x86_64-linux-gnu/libboost_*.so.1.*",
    "the JVM": "/usr/lib/jvm/java-*/lib/server/libjvm.so",
    "SwiftShader": "/usr/lib/chromium/libvk_swiftshader.so",
}


def compare_names() -> None:
    from registry.fingerprint.demangle import demangle, function_name

    print("\n## names: the engine's demangler against c++filt (exported symbols)")
    for name, pattern in LIBRARIES.items():
        paths = sorted(glob.glob(pattern))
        if not paths:
            continue
        paths = paths if name.startswith("Boost") else paths[:1]
        symbols = sorted({symbol for path in paths for symbol in exported(path)})
        filtered = [CLONE_NOTE.sub("", line)
                    for line in run(["c++filt"], input="\n".join(symbols)).stdout.splitlines()]
        elapsed, ours = timed(lambda symbols=symbols: [demangle(s) for s in symbols])
        mangled = [i for i, s in enumerate(symbols) if s[:2] in ("_Z", "_R")]
        same = sum(ours[i] == filtered[i] for i in mangled)
        raw = sum(ours[i] == symbols[i] != filtered[i] for i in mangled)
        keyed = sum(function_name(symbols[i]) == function_name(filtered[i]) for i in range(len(symbols)))
        print(f"  {name}: {len(symbols)} symbols, {len(mangled)} mangled: as c++filt prints {same}, left raw "
              f"{raw}, printed otherwise {len(mangled) - same - raw}; same fingerprint name from the raw "
              f"symbol and from c++filt's {keyed}/{len(symbols)}; {elapsed / max(len(symbols), 1) * 1e6:.1f} "
              "us a symbol")


# --- ingest -------------------------------------------------------------------------------


def stripped_report(work: Path) -> tuple[dict[str, Any], Path, str]:
    """A real core of the stripped C++ program, read by the core reader: (report, debug, build-id)."""
    import resource

    from agents.coredump.filemode import core_file_report

    binary = work / "cpp"
    debug, stripped = work / "cpp.debug", work / "cpp.stripped"
    run(["objcopy", "--only-keep-debug", str(binary), str(debug)])
    run(["strip", "--strip-debug", "--strip-unneeded", "-o", str(stripped), str(binary)])
    crashes = work / "crash"
    crashes.mkdir(exist_ok=True)
    for old in crashes.glob("core*"):
        old.unlink()
    subprocess.run([str(stripped)], cwd=crashes, capture_output=True, check=False, preexec_fn=lambda: (
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))))
    core = next(crashes.glob("core*"))
    report = core_file_report(str(core), "bench-host", executable=str(stripped))
    return report, debug, report["stack"]["build_id"]


class Silent:
    """A debuginfod that accepts connections and never answers (the slowest server there is)."""

    def __init__(self) -> None:
        import socket

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"


def measure_ingest(work: Path, reports: int) -> None:
    from dataclasses import replace

    from registry.config import Settings, SymbolSettings
    from registry.core.wiring import SignatureListeners
    from registry.db import Database
    from registry.ingest.api import REPORT_SCHEMA
    from registry.ingest.service import ingest_report
    from registry.migrate import upgrade
    from registry.signatures.identify import identify
    from registry.symbolication.service import symbolicator_for
    from registry.symbolication.stack import symbolicate

    report, debug, build_id = stripped_report(work)
    silent = Silent()
    print(f"\n## ingest: {reports} reports of a stripped C++ program's real core "
          f"({len(report['stack']['frames'])} frames), SQLite, in-process")
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/bench.db"
        upgrade(url)
        settings = replace(Settings(database_url=url), symbols=SymbolSettings(
            debuginfod_urls=(silent.url,), cache_dir=f"{folder}/symbols", timeout_s=2))
        database = Database(url)
        warm = symbolicator_for(settings, database, SignatureListeners(), identify)
        warm.symcaches.build(build_id, debug)
        warm.engine(None, report["stack"])  # opened once, as a live process holds it

        def cpu(engine: Callable[..., Any], tag: str) -> float:
            """The calling thread's CPU for one report (validation and ingest_report)."""
            body = report | {"report_id": tag}
            start = time.thread_time()
            ingest_report(database, settings, REPORT_SCHEMA.load(body), body, None, engine)
            return time.thread_time() - start

        for n in range(20):
            cpu(identify, f"warmup-plain-{n}")
            cpu(warm.engine, f"warmup-symbolicated-{n}")
        pairs = [(cpu(identify, f"plain-{n}"), cpu(warm.engine, f"symbolicated-{n}")) for n in range(reports)]
        plain = statistics.median(p for p, _ in pairs)
        symbolicated = statistics.median(s for _, s in pairs)
        steps = []
        for _ in range(reports):
            start = time.thread_time()
            symbolicate(report["stack"], warm.symcaches.lookup, None)
            steps.append(time.thread_time() - start)
        steps.sort()
        cold = symbolicator_for(settings, database, SignatureListeners(), identify)
        cold_s, cold_cpu = [], []
        for n in range(100):  # cold: no symcache, the only server silent
            stack = report["stack"] | {"build_id": f"{n:040x}"}
            stack["frames"] = [f | {"build_id": f"{n:040x}"} if "build_id" in f and f["build_id"] == build_id
                               else f for f in stack["frames"]]
            cpu_start = time.thread_time()
            elapsed, _ = timed(lambda stack=stack: cold.engine(None, stack))
            cold_s.append(elapsed)
            cold_cpu.append(time.thread_time() - cpu_start)
        for symbolicator in (cold, warm):
            symbolicator.close()
            symbolicator.sources.close()
        database.dispose()
    print(f"  ingest CPU a report (median, calling thread, reports alternated): {plain * 1e3:.2f} ms "
          f"without symbolication, {symbolicated * 1e3:.2f} ms with (warm symcache): "
          f"{(symbolicated - plain) / plain * 100:+.1f}%")
    print(f"  the symbolication step alone: p50 {steps[len(steps) // 2] * 1e6:.0f} us, "
          f"p99 {steps[int(len(steps) * 0.99)] * 1e6:.0f} us, "
          f"{(steps[len(steps) // 2]) / plain * 100:.1f}% of a report's ingest CPU at p50")
    cold_s.sort()
    print(f"  cold miss (no symcache, debuginfod silent), {len(cold_s)} build-ids: engine wall time median "
          f"{cold_s[len(cold_s) // 2] * 1e3:.2f} ms, p99 {cold_s[int(len(cold_s) * 0.99)] * 1e3:.2f} ms, "
          f"max {cold_s[-1] * 1e3:.2f} ms (its thread's CPU max {max(cold_cpu) * 1e3:.2f} ms); "
          f"budget {warm.budget_s * 1e3:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "crashreg-bench-symbols")
    parser.add_argument("--big", type=Path, help="a ~100 MB debug file (else one is generated into --work)")
    parser.add_argument("--reports", type=int, default=300)
    parser.add_argument("--lookups", type=int, default=1000)
    parser.add_argument("--pyelftools-limit-s", type=float, default=600)
    parser.add_argument("--only", choices=("libraries", "big", "names", "ingest"), action="append",
                        help="run only these parts (big: the libraries on the ~100 MB file alone)")
    options = parser.parse_args()
    parts = set(options.only or ("libraries", "big", "names", "ingest"))
    options.work.mkdir(parents=True, exist_ok=True)
    programs = build_programs(options.work)
    files = {}
    if "libraries" in parts:
        import symbolic

        files = {name: (binary, binary, function) for name, (binary, function) in programs.items()}
        own = Path(symbolic.__file__).parent / "_lowlevel__lib.so"
        files["symbolic's own library (Rust)"] = (own, own, "symbolic_symcache_lookup")
    if "big" in parts:
        big = options.big or build_big(options.work)
        binary = big.with_suffix("") if big.with_suffix("").exists() else big
        files["generated C++ -g -O1"] = (binary, big, "run")
    if files:
        compare_libraries(files, options.lookups, options.pyelftools_limit_s)
    if "names" in parts:
        compare_names()
    if "ingest" in parts:
        measure_ingest(options.work, options.reports)


if __name__ == "__main__":
    main()
