"""Reporters against a live registry: real shells (dash, busybox ash), real curl, real HTTP.

A `Site` is one host's view: its reporter.conf, crash-kernel command line, spool and
decision file in a temp dir, pointed at the live registry (or at a closed port, which is
what a crash kernel with its network down sees).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import pytest
import requests

from agents import build_reporter
from tests.support import DATA
from tests.support.http import SERVER_POLL_S, auth, closed_port

REPO = Path(__file__).resolve().parents[2]
KDUMP_SH = REPO / "agents" / "kdump" / "crashreg-kdump.sh"
# The hosts' python3, not the venv's: a reporter that needed anything beyond the standard
# library would fail here. -I: no user site, no PYTHON* variables, no script dir on sys.path.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
FIXTURES = DATA / "agents"
BUSYBOX = shutil.which("busybox")
# What an initramfs built with busybox offers; curl is the one real binary beside it.
BUSYBOX_APPLETS = (
    "sh", "awk", "sed", "tr", "tail", "head", "cut", "grep", "sort", "wc", "cat", "cp", "mv",
    "rm", "mkdir", "mktemp", "dirname", "date", "sleep", "hostname", "uname",
    "dd", "md5sum", "od", "sync", "gzip",  # the dump upload's
)


def control_character_console(crash: bytes, noise_bytes: int) -> bytes:
    """A kernel log ending in `crash` after `noise_bytes` of lines full of control characters
    (a noisy serial line, an ANSI-coloured console): its tail within the contract's 1 MiB as
    UTF-8, but past a 2 MiB body as JSON, where each such character is six bytes."""
    line = b"[    1.000000] " + b"\x1b\x01\x02\x03\x07\x0e\x0f\x10" * 20 + b"\n"
    return line * (noise_bytes // len(line) + 1) + crash


def closed_port_url() -> str:
    """A URL nothing listens on: connections are refused at once."""
    return f"http://127.0.0.1:{closed_port()}"


@dataclass
class Registry:
    url: str
    report_token: str
    read_token: str
    triage_token: str

    def get(self, path: str) -> Any:
        response = requests.get(self.url + path, headers=auth(self.read_token), timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def patch_signature(self, signature_id: str, body: dict[str, Any]) -> None:
        response = requests.patch(
            f"{self.url}/api/v1/signatures/{signature_id}",
            json=body,
            headers=auth(self.triage_token),
            timeout=10,
        )
        assert response.status_code == 200, response.text

    def post_report(self, body: bytes) -> requests.Response:
        headers = auth(self.report_token) | {"Content-Type": "application/json"}
        return requests.post(f"{self.url}/api/v1/reports", data=body, headers=headers, timeout=10)


@pytest.fixture
def registry(live_server: str, make_token: Callable[..., str]) -> Registry:
    return Registry(live_server, make_token("report", kind="agent"), make_token("read"), make_token("triage"))


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/usr/lib/crashreg as agents/README.md installs it: the pyz built by the same code as
    `make reporter` (the DPU agent is its `dpu` command)."""
    root = tmp_path_factory.mktemp("usr-lib-crashreg")
    build_reporter.build(root / "crashreg-report.pyz")
    return root


@dataclass
class Site:
    """One crashed host's reporter setup."""

    root: Path
    url: str
    install: Path
    token_file: Path
    hostname: str
    boot_id: str
    kernel: str = "6.1.0-13-amd64"
    dmesg: Path = FIXTURES / "mlx5_null_deref.log"
    extra: dict[str, str] | None = None

    @property
    def conf(self) -> Path:
        return self.root / "reporter.conf"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def bundle(self) -> Path:
        return self.root / "policy-bundle.txt"

    @property
    def bundle_json(self) -> Path:
        return self.root / "policy-bundle.json"

    @property
    def decision_file(self) -> Path:
        return self.root / "run" / "decision.env"

    def write(self) -> Path:
        cmdline = self.root / "cmdline"
        cmdline.write_text(
            f"BOOT_IMAGE=/vmlinuz irqpoll nr_cpus=1 reset_devices crashreg.boot_id={self.boot_id} "
            f"crashreg.hostname={self.hostname} crashreg.kernel={self.kernel}\n"
        )
        values = {
            "CRASHREG_URL": self.url,
            "CRASHREG_TOKEN_FILE": str(self.token_file),
            "CRASHREG_CONNECT_TIMEOUT": "3",
            "CRASHREG_MAX_TIME": "20",
            "CRASHREG_RETRIES": "3",
            "CRASHREG_RETRY_DELAY": "0",
            "CRASHREG_SPOOL_DIR": str(self.spool),
            "CRASHREG_BUNDLE": str(self.bundle),
            "CRASHREG_BUNDLE_JSON": str(self.bundle_json),
            "CRASHREG_DECISION_FILE": str(self.decision_file),
            "CRASHREG_CMDLINE": str(cmdline),
            "CRASHREG_DMESG_FILE": str(self.dmesg),
        } | (self.extra or {})
        lines = "".join(f'{key}="{value}"\n' for key, value in values.items())
        self.conf.write_text("# written by tests/agents\n" + lines)
        return self.conf

    def decision(self) -> dict[str, str]:
        """The decision file as the kdump hook's shell sees it after sourcing it."""
        script = f'set -a; . "{self.decision_file}"; env | grep -E "^(CRASHREG_|MAKEDUMP_ARGS=)"'
        out = subprocess.run(["dash", "-c", script], capture_output=True, text=True, check=True, env={})
        return dict(line.split("=", 1) for line in out.stdout.splitlines())

    @property
    def reporter(self) -> Path:
        return self.install / "crashreg-report.pyz"

    def spooled(self) -> list[Path]:
        return sorted(self.spool.glob("*.json"))


@pytest.fixture
def make_site(tmp_path: Path, registry: Registry, installed: Path) -> Callable[..., Site]:
    token_file = tmp_path / "token"
    token_file.write_text(registry.report_token + "\n")

    def make(**kwargs: Any) -> Site:
        root = tmp_path / f"site-{uuid.uuid4().hex[:8]}"
        root.mkdir()
        values = {"url": registry.url, "token_file": token_file, "hostname": "gpu-a017",
                  "boot_id": str(uuid.uuid4()), "install": installed} | kwargs
        site = Site(root=root, **values)
        site.write()
        return site

    return make


def busybox_path(tmp_path: Path) -> str:
    """A PATH holding only busybox applets and curl, like a busybox kdump initramfs."""
    assert BUSYBOX
    bin_dir = tmp_path / "busybox-bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for applet in BUSYBOX_APPLETS:
            (bin_dir / applet).symlink_to(BUSYBOX)
        (bin_dir / "curl").symlink_to(shutil.which("curl") or "/usr/bin/curl")
    return str(bin_dir)


SHELLS = [
    pytest.param("dash", id="dash"),
    pytest.param(
        "busybox",
        id="busybox-ash",
        marks=pytest.mark.skipif(BUSYBOX is None, reason="busybox not installed (apt-get install busybox)"),
    ),
]


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def args(self) -> str:
        """The makedumpfile arguments the hook printed (empty: no dump)."""
        return self.stdout.strip()


@pytest.fixture(params=SHELLS)
def run_sh(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Run]:
    """Run crashreg-kdump.sh for real under dash or busybox ash."""
    shell = request.param

    def run(site: Site, *args: str, tmpdir: Path = tmp_path, script: Path = KDUMP_SH,
            environ: dict[str, str] | None = None) -> Run:
        env = {"CRASHREG_CONF": str(site.conf), "TMPDIR": str(tmpdir), "LC_ALL": "C"} | (environ or {})
        if shell == "busybox":
            command = [BUSYBOX, "ash", str(script), *args]
            env["PATH"] = busybox_path(tmp_path)
        else:
            command = ["dash", str(script), *args]
            env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert "not found" not in done.stderr, f"a tool is missing under {shell}: {done.stderr}"
        return Run(done.returncode, done.stdout, done.stderr)

    run.shell = shell  # type: ignore[attr-defined]
    return run


def run_reporter(site: Site, *args: str, script: Path | None = None) -> Run:
    """Run an installed Python reporter (the pyz by default) as its own process with the
    system python3, as a host would."""
    env = {"CRASHREG_CONF": str(site.conf), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(
        [SYSTEM_PYTHON, "-I", str(script or site.reporter), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)



class LoopbackServer:
    """A real HTTP server on loopback with `handler`, serving in a thread inside `with`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(SERVER_POLL_S,),
                                       daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.thread.join()
        self.server.server_close()


class FlakyFront(LoopbackServer):
    """A real HTTP front that answers 503 to the first `failures` requests, then forwards
    each request to the registry: a registry that is briefly overloaded or restarting."""

    def __init__(self, upstream: str, failures: int) -> None:
        self.upstream, self.failures, self.seen = upstream, failures, 0
        front = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                front.seen += 1
                if front.seen <= front.failures:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = requests.post(front.upstream + self.path, data=body, headers=headers, timeout=10)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


Answer = tuple[int, dict[str, str], bytes]


class ScriptedServer(LoopbackServer):
    """A real HTTP server on loopback that answers POSTs from a script: the n-th request gets
    `answers[n]` (status, headers, body; the last one again for any after it), after
    `before_answer()` has run (what another process does meanwhile). The requests' paths are
    kept in `seen`."""

    def __init__(self, answers: list[Answer], before_answer: Callable[[], None] = lambda: None) -> None:
        self.answers, self.seen = answers, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.seen.append(self.path)
                before_answer()
                status, headers, body = outer.answers[min(len(outer.seen), len(outer.answers)) - 1]
                self.send_response(status)
                for name, value in (headers | {"Content-Length": str(len(body))}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


CREATED: Answer = (201, {"Content-Type": "application/json"},
                   b'{"event_id": "1", "capture": {"action": "full", "reason": "a new bug"}}')
