"""The compressions a dump or core may be in, told by its first bytes: what reads it (the
standard library's reader, else a program's `-dc`) and the name the registry stores it under
(registry/dump_encodings.py names the same)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class Compression:
    name: str  # also the registry's encoding
    magic: bytes
    stream: Callable[[str], IO[bytes]] | None = None  # the standard library's reader
    program: str = ""  # else this program's -dc writes it out


COMPRESSIONS = (
    Compression("zstd", b"\x28\xb5\x2f\xfd", program="zstd"),  # systemd-coredump's default
    Compression("xz", b"\xfd7zXZ\x00", stream=lzma.open),
    Compression("lz4", b"\x04\x22\x4d\x18", program="lz4"),
    Compression("gzip", b"\x1f\x8b", stream=gzip.open),
    Compression("bzip2", b"BZh", stream=bz2.open),
)
HEAD_BYTES = 16  # enough for every magic above and makedumpfile's


def compression_at(head: bytes) -> Compression | None:
    """The compression a file beginning with `head` is in (None: none of these)."""
    return next((c for c in COMPRESSIONS if head.startswith(c.magic)), None)


def file_head(path: str | Path) -> bytes:
    with open(path, "rb") as file:
        return file.read(HEAD_BYTES)


class DecompressorMissing(ValueError):
    """A file in a compression whose program is not on this host."""


def decompress(path: str | Path, compression: Compression, out: IO[bytes]) -> int:
    """Write the file at `path`, decompressed, into `out`; the bytes written."""
    if compression.stream is not None:
        with compression.stream(str(path)) as stream:
            return _copied(stream, out)
    program = shutil.which(compression.program)
    if program is None:
        raise DecompressorMissing(
            f"a {compression.name}-compressed file needs the {compression.program} program (install it, "
            f"or decompress the file first; a core: coredumpctl dump -o FILE)")
    command = [program, "-dcq", str(path)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as run:
        assert run.stdout is not None and run.stderr is not None
        written = _copied(run.stdout, out)
        problem = run.stderr.read()
    if run.returncode != 0:
        raise OSError(f"{compression.program} -dc {path}: {problem.decode(errors='replace').strip()}")
    return written


def _copied(source: IO[bytes], out: IO[bytes]) -> int:
    written = 0
    while chunk := source.read(1 << 20):
        out.write(chunk)
        written += len(chunk)
    return written
