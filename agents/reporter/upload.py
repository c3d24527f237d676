"""A dump's way to the dump store: plain HTTP(S) PUTs to pre-signed URLs, part by part, each part
checked (Content-MD5, and the store's ETag compared with it), resumable after a reboot.

Standard library only (zipped into crashreg-report.pyz). The host holds no store credential: it
asks the registry (its own token) for URLs scoped to one part of one object, a few minutes
long. Progress is kept in the spool, `<report_id>.upload`, in a text format the sh reporter
writes too, so whichever of them is interrupted, the post-boot agent finishes the upload:

    capture_id=12
    path=/var/crash/<boot_id>/vmcore          the dump as the writer saw it
    from_spool=../../crash/<boot_id>/vmcore   the same, from the spool directory (a crash
                                              kernel may mount the disk elsewhere)
    encoding=identity                         gzip: `path` is our compressed copy; zstd, xz,
                                              lz4, bzip2: the dump was compressed so already
    bytes=123456789                           the object's size
    raw_bytes=123456789                       the dump's size before compression
    part_size=16777216                        the registry's answer (0 until known)
    part 1 0cc175b9c0f1b6a831c399e269772661   one line per part stored, with its MD5
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import os
import re
import shutil
import ssl
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, cast
from urllib.parse import urlsplit

from agents.reporter.compression import compression_at, decompress, file_head
from agents.reporter.files import atomic_file, write_atomically

STATE_SUFFIX = ".upload"
URL_BATCH = 200  # URLs asked for at once (each lives a few minutes)
MAX_ROUNDS = 5  # asks for URLs and completions before the rest waits for the next run
# makedumpfile's output (kdump-compressed, flattened) goes as written: crash reads it so.
MAKEDUMPFILE_MAGIC = (b"KDUMP   ", b"makedumpfile")
PACKED_SUFFIX = ".crashreg.gz"  # our gzipped copy beside a dump, removed once stored
# What every release of the registry stores. One from before another compression's name
# (zstd, xz, lz4, bzip2: 0040) refuses it, a 400 naming `encoding`; the dump then goes gzipped.
BASIC_ENCODINGS = ("identity", "gzip")
HEADER = re.compile(r"^([a-z_]+)=(.*)$")
PART = re.compile(r"^part (\d+) ([0-9a-f]{32})$")

# (path under /api/v1, JSON body) -> the registry's JSON answer; raises on refusal
Post = Callable[[str, dict[str, Any]], dict[str, Any]]


class UploadError(Exception):
    """The upload stopped; its state stays in the spool for the next run."""


@dataclass
class UploadState:
    capture_id: str
    path: str
    from_spool: str
    encoding: str
    bytes: int
    raw_bytes: int
    part_size: int = 0
    done: dict[int, str] = field(default_factory=dict)

    HEADERS = ("capture_id", "path", "from_spool", "encoding", "bytes", "raw_bytes", "part_size")

    @classmethod
    def read(cls, path: Path) -> UploadState:
        values: dict[str, str] = {}
        done: dict[int, str] = {}
        for line in path.read_text().splitlines():
            if part := PART.match(line):
                done[int(part.group(1))] = part.group(2)
            elif header := HEADER.match(line):
                values[header.group(1)] = header.group(2)
        missing = [name for name in cls.HEADERS if name not in values]
        if missing:
            raise UploadError(f"{path.name}: no {', '.join(missing)}")
        return cls(values["capture_id"], values["path"], values["from_spool"], values["encoding"],
                   int(values["bytes"]), int(values["raw_bytes"]), int(values["part_size"]), done)

    def text(self) -> str:
        lines = [f"{name}={getattr(self, name)}" for name in self.HEADERS]
        lines += [f"part {number} {md5}" for number, md5 in sorted(self.done.items())]
        return "\n".join(lines) + "\n"

    def request(self) -> dict[str, Any]:
        """What the registry is asked to open the upload with."""
        return {"bytes": self.bytes, "raw_bytes": self.raw_bytes, "encoding": self.encoding}

    def write(self, path: Path) -> None:
        write_atomically(path, self.text())


def compression_of(path: Path) -> str | None:
    """The encoding a dump is compressed in already, under which it goes as it is (a core a
    core handler compressed, systemd-coredump's .zst say); None: not compressed, to be gzipped."""
    head = file_head(path)
    if head.startswith(MAKEDUMPFILE_MAGIC):
        return "identity"
    compression = compression_at(head)
    return compression.name if compression else None


def prepare(spool_dir: Path, report_id: str, capture_id: str, dump: Path) -> Path:
    """Write the upload's state for a dump file (gzipping a copy beside it first when the dump
    is not compressed already); the state file's path."""
    raw_bytes = dump.stat().st_size
    encoding, source = compression_of(dump), dump
    if encoding is None:
        with gzipped_copy(dump) as (source, out), dump.open("rb") as raw:
            shutil.copyfileobj(raw, out, 1 << 20)
        encoding = "gzip"
    state = UploadState(capture_id, str(source), os.path.relpath(source, spool_dir), encoding,
                        source.stat().st_size, raw_bytes)
    path = spool_dir / f"{report_id}{STATE_SUFFIX}"
    state.write(path)
    return path


@contextmanager
def gzipped_copy(dump: Path) -> Iterator[tuple[Path, BinaryIO]]:
    """Our gzipped copy beside `dump` (its path) and the stream to write it through: readable
    by its owner alone, as it holds what the dump does (a process's memory, a kernel's)."""
    packed = dump.with_name(dump.name + PACKED_SUFFIX)
    with (atomic_file(packed, mode=0o600) as out,
          gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as gz):
        yield packed, cast(BinaryIO, gz)


def encoding_refused(error: UploadError) -> bool:
    """The registry refused the upload's encoding (a release that does not know it)."""
    return getattr(error.__cause__, "status", None) == 400 and '"encoding"' in str(error)


def repacked(state: UploadState, state_path: Path, source: Path) -> UploadState:
    """The upload of a dump in a compression the registry does not take, started again as our
    gzipped copy of it, decompressed; UploadError (kept for the next run) when this host
    cannot decompress it."""
    compression = compression_at(file_head(source))
    try:
        if compression is None:
            raise ValueError(f"{source} is no longer {state.encoding}-compressed")
        with gzipped_copy(source) as (packed, out):
            raw_bytes = decompress(source, compression, out)
    except (ValueError, OSError) as error:
        raise UploadError(
            f"{state_path.name}: the registry does not take {state.encoding}, and {error}") from error
    again = UploadState(state.capture_id, str(packed), os.path.relpath(packed, state_path.parent), "gzip",
                        packed.stat().st_size, raw_bytes)
    again.write(state_path)
    return again


def put_part(url: str, body: bytes, md5: bytes, timeout: float, ca_file: str | None) -> tuple[int, str]:
    """One PUT; (status, ETag or error text)."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=ca_file or None)
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname or "", parts.port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        conn.request("PUT", f"{parts.path}?{parts.query}", body=body, headers={
            "Content-Length": str(len(body)), "Content-MD5": base64.b64encode(md5).decode(),
            "Content-Type": "application/octet-stream"})
        answer = conn.getresponse()
        text = answer.read()
        if answer.status == 200:
            return 200, (answer.getheader("ETag") or "").strip('"').lower()
        return answer.status, text[:300].decode("utf-8", "replace")
    finally:
        conn.close()


@dataclass
class Uploader:
    post: Post
    threads: int = 4
    timeout: float = 300.0
    ca_file: str | None = None
    log: Callable[[str], None] = print
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _send(self, source: Path, state: UploadState, state_path: Path, url: dict[str, Any]) -> str | None:
        """Read, checksum and PUT one part; record it. None when stored, else what went wrong."""
        number = url["number"]
        with source.open("rb") as dump:
            dump.seek((number - 1) * state.part_size)
            body = dump.read(url["bytes"])
        digest = hashlib.md5(body, usedforsecurity=False)
        try:
            status, answer = put_part(url["url"], body, digest.digest(), self.timeout, self.ca_file)
        except (OSError, http.client.HTTPException) as error:
            return f"part {number}: {type(error).__name__}: {error}"
        if status != 200:
            return f"part {number}: HTTP {status} {answer}"
        if re.fullmatch(r"[0-9a-f]{32}", answer) and answer != digest.hexdigest():
            return f"part {number}: the store's MD5 {answer} is not the part's {digest.hexdigest()}"
        with self._lock:
            state.done[number] = digest.hexdigest()
            with state_path.open("a") as progress:  # append-only: a cut line is ignored on read
                progress.write(f"part {number} {digest.hexdigest()}\n")
                progress.flush()
                os.fsync(progress.fileno())
        return None

    def upload(self, state_path: Path) -> dict[str, Any]:
        """Finish the upload a state file describes; the registry's view of the stored dump.
        Raises UploadError when it must wait for another run (the state is kept)."""
        state = UploadState.read(state_path)
        source = Path(state.path)
        if not source.exists():
            source = (state_path.parent / state.from_spool).resolve()
        if not source.exists() or source.stat().st_size != state.bytes:
            raise UploadError(f"{state_path.name}: the dump {state.path} is gone or changed")
        base = f"/api/v1/captures/{state.capture_id}/upload"
        for _ in range(MAX_ROUNDS):
            missing = []
            if state.part_size:  # known from an earlier answer: ask for what is still missing
                count = max(1, -(-state.bytes // state.part_size))
                missing = [n for n in range(1, count + 1) if n not in state.done]
                if not missing:
                    stored = self._complete(base, state, state_path)
                    if stored is not None:
                        return stored
                    continue
            asked = {"parts": missing[:URL_BATCH]} if missing else {}
            try:
                answer = self.post(base, state.request() | asked)
            except UploadError as refused:
                if state.part_size or state.encoding in BASIC_ENCODINGS or not encoding_refused(refused):
                    raise
                self.log(f"{state_path.name}: the registry does not take {state.encoding}-compressed dumps "
                         f"(an older release): sending the dump gzipped")
                state = repacked(state, state_path, source)
                source = Path(state.path)
                continue
            if answer["dump"]["state"] == "stored":  # completed before an answer was lost
                self._finish(state, state_path)
                return answer["dump"]
            if not state.part_size:
                state.part_size = answer["dump"]["part_size"]
                state.write(state_path)
            numbers = [u["number"] for u in answer["part_urls"]]
            self.log(f"{state_path.name}: sending {len(numbers)} of {answer['dump']['parts']} parts "
                     f"({numbers[0]}..{numbers[-1]})" if numbers else f"{state_path.name}: no part to send")
            with ThreadPoolExecutor(max_workers=self.threads) as pool:
                sent = partial(self._send, source, state, state_path)
                failures = [f for f in pool.map(sent, answer["part_urls"]) if f]
            for failure in failures:
                self.log(failure)
        raise UploadError(f"{state_path.name}: not finished after {MAX_ROUNDS} rounds; kept for the next run")

    def _complete(self, base: str, state: UploadState, state_path: Path) -> dict[str, Any] | None:
        """Ask the registry to complete; parts it finds missing or corrupt are forgotten (None)."""
        parts = [{"number": n, "md5": m} for n, m in sorted(state.done.items())]
        try:
            stored = self.post(base + "/complete", {"parts": parts})
        except UploadError as refused:
            bad = [int(n) for n in re.findall(r"(\d+): ", str(refused))]
            if not bad:
                raise
            self.log(f"the registry wants parts {bad} again")
            for number in bad:
                state.done.pop(number, None)
            state.write(state_path)
            return None
        self._finish(state, state_path)
        return stored

    @staticmethod
    def _finish(state: UploadState, state_path: Path) -> None:
        remove_packed_copy(state)
        state_path.unlink(missing_ok=True)


def remove_packed_copy(state: UploadState) -> None:
    """Our compressed copy of the upload's dump, once stored or refused; never the dump itself."""
    if state.path.endswith(PACKED_SUFFIX):
        Path(state.path).unlink(missing_ok=True)

