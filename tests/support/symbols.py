"""Real symbol files and a real debuginfod: C programs compiled with gcc (-g, a GNU build-id),
split as distributions ship them (`objcopy --only-keep-debug` for the debug file, `strip
--strip-debug --strip-unneeded` for what is deployed), and elfutils' debuginfod serving a
directory of them on loopback."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from registry.symbols.client import send
from tests.support.dumps import PART, md5_hex
from tests.support.http import SERVER_POLL_S, auth, closed_port

SERVER_START_S = 60  # the longest a debuginfod takes to scan a few files on a busy machine
POLL_S = 0.05

# A program that crashes in a function of its own (a NULL write), called from main: the
# function's name is what symbols must bring back. `release` changes code before the bug.
PROGRAM = r"""
#include <stdio.h>
#include <string.h>

struct header { char name[16]; int length; };

__attribute__((noinline)) int %(function)s(struct header *h, const char *text)
{
    %(extra)s
    strncpy(h->name, text, sizeof h->name - 1);
    h->length = (int)strlen(text);
    return h->length;
}

int main(int argc, char **argv)
{
    struct header *h = argc > 5 ? (struct header *)argv : NULL;
    printf("%%d\n", %(function)s(h, argc > 1 ? argv[1] : "crash"));
    return 0;
}
"""


@dataclass(frozen=True)
class Program:
    """One build: the program as linked (unstripped), stripped, and its debug file."""

    name: str
    function: str
    build_id: str
    unstripped: Path
    stripped: Path
    debug: Path


def build_id_of(path: Path) -> str:
    """The build-id as binutils reads it (readelf -n), not as the registry does."""
    notes = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    for line in notes.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    raise AssertionError(f"{path} has no build-id note:\n{notes}")


def defined_symbols(binary: Path) -> list[str]:
    """The names of the symbols the binary defines, as nm reads its symbol table."""
    listed = subprocess.run(["nm", "--defined-only", str(binary)], capture_output=True, text=True, check=True)
    return [line.split()[-1] for line in listed.stdout.splitlines()]


def function_start(binary: Path, function: str) -> int:
    """The function's link-time address (its offset in a PIE), as nm reads the symbol table."""
    symbols = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    return next(int(line.split()[0], 16) for line in symbols.splitlines() if line.endswith(f" {function}"))


def compile_program(directory: Path, name: str, function: str = "parse_header_field", extra: str = "",
                    build_id: str = "--build-id", dwarf: bool = True) -> Program:
    """gcc -g -O0 with a build-id (`build_id="--build-id=none"`: without; `dwarf=False`: no -g),
    then split."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{name}.c"
    source.write_text(PROGRAM % {"function": function, "extra": extra})
    unstripped = directory / name
    subprocess.run(["gcc", *(["-g"] if dwarf else []), "-O0", "-fno-omit-frame-pointer", f"-Wl,{build_id}",
                    "-o", str(unstripped), str(source)], check=True, capture_output=True, timeout=120)
    debug, stripped = directory / f"{name}.debug", directory / f"{name}.stripped"
    subprocess.run(["objcopy", "--only-keep-debug", str(unstripped), str(debug)], check=True, timeout=60)
    subprocess.run(["strip", "--strip-debug", "--strip-unneeded", "-o", str(stripped), str(unstripped)],
                   check=True, timeout=60)
    identity = build_id_of(unstripped) if build_id == "--build-id" else ""
    return Program(name, function, identity, unstripped, stripped, debug)


@dataclass(frozen=True)
class SharedDebugInfo:
    """Two builds' debug files after `dwz -m`: each refers to `common` (the DWARF they shared,
    moved into a supplementary file of its own) by its build-id, as Debian's and Fedora's
    debug packages do."""

    programs: tuple[Program, Program]
    common: Path
    common_build_id: str


def dwz_shared(directory: Path) -> SharedDebugInfo:
    """Two programs compiled and split (compile_program), their debug files run through `dwz -m
    common.debug`."""
    if shutil.which("dwz") is None:
        pytest.skip("dwz is not installed")
    one = compile_program(directory / "one", "one", "parse_one_header")
    two = compile_program(directory / "two", "two", "parse_two_header", "h->length = 2;")
    common = directory / "common.debug"
    subprocess.run(["dwz", "-m", str(common), "-M", common.name,
                    str(one.debug), str(two.debug)], check=True, capture_output=True, timeout=120)
    return SharedDebugInfo((one, two), common, build_id_of(common))


def symbol_tables_of(program: Path, directory: Path) -> tuple[Path, Path]:
    """What a pipeline that strips DWARF alone ships (`strip --strip-debug`: the symbol table and
    the code, serving debuginfo without source lines and the executable), and that symbol table
    in a debug file of its own (`objcopy --only-keep-debug` of it: debuginfo alone)."""
    directory.mkdir(parents=True, exist_ok=True)
    shipped, table = directory / f"{program.name}.symtab", directory / f"{program.name}.symtab.debug"
    subprocess.run(["strip", "--strip-debug", "-o", str(shipped), str(program)], check=True, timeout=60)
    subprocess.run(["objcopy", "--only-keep-debug", str(shipped), str(table)], check=True, timeout=60)
    return shipped, table


def kernel_like_files(directory: Path, release: int = 1) -> dict[str, Path]:
    """A module-like relocatable object (ld -r --build-id, as kbuild links a .ko) and a
    vmlinux-like non-PIE executable, both with DWARF and a build-id note; another `release`
    gives other build-ids."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "driver.c").write_text(f"int driver_probe(int *p) {{ return *p + {release}; }}\n")
    (directory / "kernel.c").write_text(f"int start_kernel(void) {{ return {release}; }}\n"
                                        "int main(void) { return start_kernel(); }\n")
    run = [["gcc", "-c", "-g", "-O1", "driver.c", "-o", "driver.o"],
           ["ld", "-r", "--build-id=sha1", "driver.o", "-o", "driver.ko"],
           ["gcc", "-g", "-no-pie", "-Wl,--build-id", "kernel.c", "-o", "vmlinux"]]
    for command in run:
        subprocess.run(command, cwd=directory, check=True, capture_output=True, timeout=120)
    return {"module": directory / "driver.ko", "vmlinux": directory / "vmlinux"}


@dataclass
class Debuginfod:
    """elfutils' debuginfod over a directory, on loopback."""

    url: str
    process: subprocess.Popen[bytes]

    def has(self, build_id: str, kind: str = "debuginfo") -> bool:
        return requests.get(f"{self.url}/buildid/{build_id}/{kind}", timeout=30).status_code == 200


def start_debuginfod(directory: Path, expect: list[str], log: Path) -> Debuginfod:
    """debuginfod scanning `directory`, once it serves every build-id of `expect`."""
    port = closed_port()  # free: debuginfod binds it
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["debuginfod", "-F", "-p", str(port), "-d", str(directory.parent / f"{directory.name}.sqlite"),
             "-t", "0", "-g", "0", "-c", "1", str(directory)],
            stdout=out, stderr=subprocess.STDOUT, cwd=directory.parent)
    server = Debuginfod(f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + SERVER_START_S
    while True:
        assert process.poll() is None, log.read_text()
        try:
            if all(server.has(build_id) for build_id in expect):
                return server
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, f"debuginfod did not serve {expect}:\n{log.read_text()}"
        time.sleep(POLL_S)


@pytest.fixture(scope="session")
def symbol_programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Program]:
    """`uploaded`: a program whose debug file tests upload; `upstream`: one only the upstream
    debuginfod has; `no_build_id`: linked without a build-id note."""
    if shutil.which("debuginfod") is None:
        pytest.skip("elfutils' debuginfod is not installed (scripts/test-services.sh installs it)")
    root = tmp_path_factory.mktemp("symbol-programs")
    return {
        "uploaded": compile_program(root / "uploaded", "uploaded", "parse_uploaded_header"),
        "upstream": compile_program(root / "upstream", "upstream", "parse_upstream_header", "h->length = 1;"),
        "no_build_id": compile_program(root / "no-build-id", "nobuildid", build_id="--build-id=none"),
    }


@pytest.fixture(scope="session")
def upstream_debuginfod(symbol_programs: dict[str, Program],
                        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Debuginfod]:
    """A real debuginfod holding the `upstream` program's debug file and stripped executable."""
    served = tmp_path_factory.mktemp("debuginfod") / "files"
    served.mkdir()
    program = symbol_programs["upstream"]
    shutil.copy(program.debug, served / program.debug.name)
    shutil.copy(program.stripped, served / program.name)
    server = start_debuginfod(served, [program.build_id], served.parent / "debuginfod.log")
    yield server
    server.process.terminate()
    server.process.wait(timeout=30)


def headers_file(directory: Path, token: str) -> Path:
    """An elfutils DEBUGINFOD_HEADERS_FILE carrying the token."""
    path = directory / "debuginfod-headers"
    path.write_text("".join(f"{name}: {value}\n" for name, value in auth(token).items()))
    path.chmod(0o600)
    return path


def client_env(tmp_path: Path, registry: str, token: str | None) -> dict[str, str]:
    """elfutils' client environment: the registry as the only server, a cache of the test's own."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("DEBUGINFOD_")}
    env |= {"DEBUGINFOD_URLS": f"{registry}/debuginfod/", "DEBUGINFOD_TIMEOUT": "60",
            "DEBUGINFOD_CACHE_PATH": str(tmp_path / "client-cache"), "HOME": str(tmp_path)}
    if token:
        env["DEBUGINFOD_HEADERS_FILE"] = str(headers_file(tmp_path, token))
    return env


class CountingServer:
    """A debuginfod stand-in for what a real one cannot be made to do on cue: answer every
    request with `body` (None: 404) and count the requests, over real HTTP on loopback.
    `trickle_s`: the body a byte at a time, that long apart (a server on a choked link);
    `cut`: half the body announced, then the connection closed; `busy`: the first that many
    requests answered 503 with `Retry-After: 0` (the registry while it fetches the file)."""

    def __init__(self, body: bytes | None = None, trickle_s: float | None = None, cut: bool = False,
                 busy: int = 0) -> None:
        self.body = body
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                if len(outer.requests) <= busy:
                    self.send_response(503)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if outer.body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                if cut:
                    self.wfile.write(outer.body[: len(outer.body) // 2])
                    self.close_connection = True
                elif trickle_s is not None:
                    self._trickle(outer.body, trickle_s)
                else:
                    self.wfile.write(outer.body)

            def _trickle(self, body: bytes, every_s: float) -> None:
                stopped = threading.Event()
                for at in range(len(body)):
                    try:
                        self.wfile.write(body[at:at + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up
                        return
                    if stopped.wait(every_s):  # the pace of the server under test, not a test's wait
                        return

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(SERVER_POLL_S,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def counting_server() -> Iterator[CountingServer]:
    server = CountingServer()
    yield server
    server.stop()


class Pipeline:
    """A build pipeline uploading symbol files with a `symbols` token."""

    def __init__(self, url: str, token: str, scratch: Path) -> None:
        self.url, self.token, self.scratch = url, token, scratch

    def start(self, body: dict[str, Any], token: str | None = None) -> requests.Response:
        return requests.post(f"{self.url}/api/v1/symbols/uploads", json=body,
                             headers=auth(token or self.token), timeout=30)

    def complete(self, upload_id: str, data: bytes, token: str | None = None) -> requests.Response:
        parts = [{"number": n + 1, "md5": md5_hex(data[o:o + PART])}
                 for n, o in enumerate(range(0, max(len(data), 1), PART))]
        return requests.post(f"{self.url}/api/v1/symbols/uploads/{upload_id}/complete", json={"parts": parts},
                             headers=auth(token or self.token), timeout=60)

    def upload(self, data: bytes, build_id: str, sha256: str | None = None,
               sent: list[tuple[int, int]] | None = None) -> requests.Response:
        """The whole upload, by the product's own client (registry/symbols/client.py); `sent`
        gathers its progress calls."""
        file = self.scratch / f"upload-{hashlib.sha256(data).hexdigest()}"
        file.write_bytes(data)
        calls = sent if sent is not None else []
        return send(self.url, self.token, file, build_id, sha256, sent=lambda *call: calls.append(call))
