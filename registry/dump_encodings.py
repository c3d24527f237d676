"""How a stored dump is wrapped, as every domain that stores or hands one out names it: the
suffix its object and its download carry, and the command that unwraps it to stdout."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Encoding:
    suffix: str
    unpack: str | None  # writes the dump unwrapped to stdout, given the file; None: stored as written


# identity: as written (makedumpfile compresses its own pages); gzip: the reporter packed it;
# the rest: a core that was compressed when the reporter found it (systemd-coredump keeps .zst,
# or .xz and .lz4 when built so), sent as it is so that its host compresses nothing again.
ENCODINGS = {
    "identity": Encoding("", None),
    "gzip": Encoding(".gz", "gzip -dc"),
    "zstd": Encoding(".zst", "zstd -dc"),
    "xz": Encoding(".xz", "xz -dc"),
    "lz4": Encoding(".lz4", "lz4 -dc"),
    "bzip2": Encoding(".bz2", "bzip2 -dc"),
}


def wrapping_of(path: str) -> Encoding | None:
    """The encoding a file's name says it is wrapped in (None: none known)."""
    return next((e for e in ENCODINGS.values() if e.suffix and path.endswith(e.suffix)), None)
