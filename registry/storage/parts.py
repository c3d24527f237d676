"""Multipart arithmetic and the checks a finished upload must pass (plain data, no I/O).

S3's rules (every S3-compatible store keeps them): at most 10,000 parts, each but the last at
least 5 MiB, at most 5 GiB; a part's ETag is the hex MD5 of its bytes (unencrypted or SSE-S3
objects), and a completed multipart object's ETag is the MD5 of the parts' binary MD5s
followed by `-<part count>`.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

MIB = 1 << 20
MIN_PART_BYTES = 5 * MIB
MAX_PART_BYTES = 5 << 30
MAX_PARTS = 10_000
MD5_HEX = re.compile(r"[0-9a-f]{32}")


class UploadGone(Exception):
    """The store no longer has a multipart upload: completed (by a request whose answer was
    lost), aborted, or expired by the bucket's lifecycle rule while its host was down."""


@dataclass(frozen=True)
class StoredPart:
    """A part as the store holds it (ListParts)."""

    number: int
    bytes: int
    etag: str


@dataclass(frozen=True)
class StoredObject:
    """An object as the store holds it (HEAD)."""

    bytes: int
    etag: str | None


def part_size(total: int, minimum: int) -> int:
    """The part size for a dump of `total` bytes: `minimum` (at least 5 MiB), raised in whole
    MiB until the dump fits in 10,000 parts."""
    size = max(minimum, MIN_PART_BYTES)
    needed = math.ceil(total / MAX_PARTS)
    if needed > size:
        size = math.ceil(needed / MIB) * MIB
    return min(size, MAX_PART_BYTES)


def part_count(total: int, size: int) -> int:
    """Parts of a `total`-byte object; an empty object is one empty part."""
    return max(1, math.ceil(total / size))


def part_bytes(total: int, size: int, number: int) -> int:
    """How long part `number` (1-based) must be."""
    return min(size, total - (number - 1) * size) if total else 0


def clean_etag(etag: str) -> str:
    return etag.strip().strip('"').lower()


def multipart_etag(md5_hexes: list[str]) -> str:
    """The ETag S3 gives a multipart object made of parts with these MD5s."""
    digest = hashlib.md5(b"".join(bytes.fromhex(h) for h in md5_hexes), usedforsecurity=False)
    return f"{digest.hexdigest()}-{len(md5_hexes)}"


def part_problems(
    total: int, size: int, declared: dict[int, str], stored: list[StoredPart]
) -> dict[str, str]:
    """What is wrong with an upload before it may complete, by part number: a part missing or
    of the wrong length in the store, a part whose stored ETag is not the MD5 the reporter
    computed (corrupted on the way), a part the reporter does not vouch for. Parts past the
    last are left out of the completed object. Empty: complete it.

    ETags that are not an MD5 (SSE-KMS objects) cannot be compared and are taken on length."""
    count = part_count(total, size)
    held = {part.number: part for part in stored}
    problems: dict[str, str] = {}
    for number in range(1, count + 1):
        part, md5 = held.get(number), declared.get(number)
        want = part_bytes(total, size, number)
        if md5 is None or not MD5_HEX.fullmatch(md5):
            problems[str(number)] = "no MD5 (32 hex digits) given for this part"
        elif part is None:
            problems[str(number)] = "not uploaded"
        elif part.bytes != want:
            problems[str(number)] = f"the store holds {part.bytes} bytes, the part is {want}"
        elif MD5_HEX.fullmatch(clean_etag(part.etag)) and clean_etag(part.etag) != md5:
            problems[str(number)] = f"the store's MD5 {clean_etag(part.etag)} is not the part's {md5}"
    return problems
