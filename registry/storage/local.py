"""The dump store as a local directory: the embedded default for one machine.

It speaks the same protocol to the hosts as S3 does: the registry hands out its own
pre-signed-style URLs (HMAC-signed, expiring, scoped to one part or one object) and the
storage blueprint serves them, so a reporter uploads the same way to either store. Layout:
`<root>/<key>` the objects, `<root>/.etags/<key>` their ETags, `<root>/.uploads/<id>/` the
parts of an open upload, `<root>/.signing-key` the URLs' key (SigningKey).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote, urlencode

from registry.errors import ApiError
from registry.storage.parts import (
    MAX_PART_BYTES,
    StoredObject,
    StoredPart,
    UploadGone,
    clean_etag,
    multipart_etag,
)

PARTS_PREFIX = "/dump-store/uploads"
OBJECTS_PREFIX = "/dump-store/objects"
CHUNK = 1 << 20


KEY_FILE = ".signing-key"
KEY_BYTES = 32
EXPOSED = 0o077  # any permission for the group or others


class SigningKeyUnsafe(RuntimeError):
    """The local store's signing key may be known to others: the store refuses to run with it."""


class SigningKey:
    """The key the local store signs its URLs with: a file in the store's directory, never in
    the repository or the image, so each deployment has its own. Made on first use (mode 0600,
    created with it, never widened); refused when the group or others may read it, since whoever
    reads it can sign a download URL for any dump. Read again whenever the file changes, so a
    rotation takes effect in every running worker at its next URL (and a key made readable by
    others while the registry runs is refused from then on)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._read: tuple[tuple[int, ...], bytes] | None = None

    def check(self) -> None:
        """Refuse an existing key that is unsafe (a missing one is made on first use)."""
        with contextlib.suppress(FileNotFoundError):
            self._load(self.path.stat())

    def value(self) -> bytes:
        try:
            found = self.path.stat()
        except FileNotFoundError:
            self._create()
            found = self.path.stat()
        identity = (found.st_dev, found.st_ino, found.st_mtime_ns, found.st_ctime_ns)  # ctime: a chmod
        if self._read is None or self._read[0] != identity:
            self._read = (identity, self._load(found))
        return self._read[1]

    def rotate(self) -> None:
        """A new key in place of the old one (atomically): every URL signed before stops working."""
        os.replace(self._written(), self.path)
        self._read = None

    def _create(self) -> None:
        written = self._written()
        with contextlib.suppress(FileExistsError):  # the first process wins; the others read its key
            os.link(written, self.path)
        written.unlink()

    def _written(self) -> Path:
        """A new key in a file of its own beside the key's place, private from its creation."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f"{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(KEY_BYTES))
            out.flush()
            os.fsync(out.fileno())
        return temporary

    def _load(self, found: os.stat_result) -> bytes:
        mode = stat.S_IMODE(found.st_mode)
        if mode & EXPOSED:
            raise SigningKeyUnsafe(
                f"the dump store's signing key {self.path} is readable by others than its owner "
                f"(mode {mode:04o}): whoever reads it can sign a download URL for any dump. "
                f"If nobody else could have read it, `chmod 600 {self.path}`; otherwise replace it "
                "with `crashreg storage rotate-key`"
            )
        key = self.path.read_text().strip()
        if len(key) < 2 * KEY_BYTES:
            raise SigningKeyUnsafe(
                f"the dump store's signing key {self.path} holds {len(key)} characters, not a key of "
                f"{KEY_BYTES} random bytes ({2 * KEY_BYTES} hex digits): replace it with "
                "`crashreg storage rotate-key`"
            )
        return key.encode()


class LocalStore:
    def __init__(self, root: Path, base_url: str, signing_key: SigningKey | None = None) -> None:
        self.root = root.resolve()
        self.base_url = base_url
        self.signing_key = signing_key or SigningKey(self.root / KEY_FILE)
        if signing_key is None:
            self.signing_key.check()

    def at(self, base_url: str) -> LocalStore:
        """The same store, its URLs naming `base_url`: the registry as the asking host reached it."""
        return LocalStore(self.root, base_url, self.signing_key)

    # --- signed URLs ----------------------------------------------------------------------

    def _signature(self, method: str, resource: str, query: Mapping[str, str]) -> str:
        """The HMAC of everything the URL asks: the method, the one object or part it names, its
        expiry and every other parameter (a download's file name), in a fixed order."""
        signed = "&".join(
            f"{name}={quote(value, safe='', errors='replace')}" for name, value in sorted(query.items())
        )
        message = f"{method}\n{resource}\n{signed}".encode()
        return hmac.new(self.signing_key.value(), message, hashlib.sha256).hexdigest()

    def _signed(self, method: str, resource: str, ttl_s: int, **extra: str) -> str:
        query = {"expires": str(int(time.time()) + ttl_s), **extra}
        query["signature"] = self._signature(method, resource, query)
        return f"{self.base_url}{resource}?{urlencode(query)}"

    def check(self, method: str, resource: str, query: Mapping[str, str]) -> None:
        """Refuse a request whose URL this store did not sign, for this object and these
        parameters, with its current key; or whose time is up."""
        signed = {name: value for name, value in query.items() if name != "signature"}
        try:
            deadline = int(signed.get("expires", ""))
        except ValueError:
            raise ApiError(
                403, "forbidden", "the URL has no valid expiry: not one this registry signed"
            ) from None
        signature = query.get("signature", "").encode(errors="replace")
        if not hmac.compare_digest(self._signature(method, resource, signed).encode(), signature):
            raise ApiError(
                403, "forbidden", "the URL's signature does not match: not one this registry signed"
            )
        if time.time() > deadline:
            raise ApiError(403, "forbidden", "the URL has expired: ask the registry for a new one")

    # --- the interface ----------------------------------------------------------------------

    def _upload_dir(self, upload_id: str) -> Path:
        if not upload_id.isalnum():
            raise ApiError(404, "not_found", "no such upload")
        return self.root / ".uploads" / upload_id

    def _gone_unless_open(self, upload_id: str) -> Path:
        folder = self._upload_dir(upload_id)
        if not folder.is_dir():
            raise UploadGone(f"no upload {upload_id}: completed or aborted")
        return folder

    def _object(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ApiError(404, "not_found", "no such object")
        return path

    def uri(self, key: str) -> str:
        return (self.root / key).as_uri()

    def create_upload(self, key: str) -> str:
        upload_id = secrets.token_hex(16)
        folder = self._upload_dir(upload_id)
        folder.mkdir(parents=True)
        (folder / "key").write_text(key)
        return upload_id

    def presign_part(self, key: str, upload_id: str, number: int, ttl_s: int) -> str:
        return self._signed("PUT", f"{PARTS_PREFIX}/{upload_id}/parts/{number}", ttl_s)

    def upload_exists(self, key: str, upload_id: str) -> bool:
        return self._upload_dir(upload_id).is_dir()

    def list_parts(self, key: str, upload_id: str) -> list[StoredPart]:
        folder = self._gone_unless_open(upload_id)
        return [
            StoredPart(int(part.stem), part.stat().st_size, part.with_suffix(".md5").read_text())
            for part in sorted(folder.glob("*.part"))
            if part.with_suffix(".md5").exists()
        ]

    def complete_upload(self, key: str, upload_id: str, parts: list[StoredPart]) -> StoredObject:
        folder, target = self._gone_unless_open(upload_id), self._object(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{upload_id}.tmp")
        with temporary.open("wb") as out:
            for part in sorted(parts, key=lambda p: p.number):
                with (folder / f"{part.number:05d}.part").open("rb") as source:
                    shutil.copyfileobj(source, out, CHUNK)
        etag = multipart_etag([clean_etag(p.etag) for p in sorted(parts, key=lambda p: p.number)])
        etag_path = self._etag_path(key)
        etag_path.parent.mkdir(parents=True, exist_ok=True)
        etag_path.write_text(etag)
        temporary.replace(target)
        shutil.rmtree(folder)
        return StoredObject(target.stat().st_size, etag)

    def abort_upload(self, key: str, upload_id: str) -> None:
        shutil.rmtree(self._upload_dir(upload_id), ignore_errors=True)

    def _etag_path(self, key: str) -> Path:
        return self.root / ".etags" / key

    def head(self, key: str) -> StoredObject | None:
        path = self._object(key)
        if not path.is_file():
            return None
        etag = self._etag_path(key)
        return StoredObject(path.stat().st_size, etag.read_text() if etag.exists() else None)

    def delete(self, key: str) -> None:
        self._object(key).unlink(missing_ok=True)
        self._etag_path(key).unlink(missing_ok=True)

    def presign_get(self, key: str, ttl_s: int, filename: str) -> str:
        return self._signed("GET", f"{OBJECTS_PREFIX}/{quote(key)}", ttl_s, filename=filename)

    def put_file(self, key: str, source: Path) -> StoredObject:
        target = self._object(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        digest = hashlib.md5(usedforsecurity=False)
        with source.open("rb") as read, temporary.open("wb") as out:
            while chunk := read.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
        etag_path = self._etag_path(key)
        etag_path.parent.mkdir(parents=True, exist_ok=True)
        etag_path.write_text(digest.hexdigest())
        temporary.replace(target)
        return StoredObject(target.stat().st_size, digest.hexdigest())

    def local_path(self, key: str) -> Path | None:
        path = self._object(key)
        return path if path.is_file() else None

    def fetch_file(self, key: str, destination: Path) -> None:
        temporary = destination.with_name(f".{destination.name}.{secrets.token_hex(4)}.tmp")
        shutil.copyfile(self.object_path(key), temporary)
        temporary.replace(destination)

    # --- what the blueprint serves ------------------------------------------------------------

    def receive_part(
        self, upload_id: str, number: int, body: BinaryIO, length: int | None, content_md5: str | None
    ) -> str:
        """Store one part as S3 does: the whole body or nothing, checked against Content-MD5
        when sent (400 BadDigest), a repeated part replacing the earlier one; its ETag."""
        folder = self._upload_dir(upload_id)
        if not (folder / "key").exists():
            raise ApiError(404, "not_found", "no such upload: completed or aborted")
        if not 1 <= number <= 10_000:
            raise ApiError(
                400, "bad_request", "part numbers are 1 to 10000", fields={"partNumber": [str(number)]}
            )
        if length is None:
            raise ApiError(411, "length_required", "a part needs a Content-Length")
        if length > MAX_PART_BYTES:
            raise ApiError(413, "too_large", f"a part is at most {MAX_PART_BYTES} bytes")
        digest = hashlib.md5(usedforsecurity=False)
        temporary = folder / f".{number:05d}.{secrets.token_hex(4)}.tmp"
        received = 0
        with temporary.open("wb") as out:
            for chunk in _chunks(body, length):
                digest.update(chunk)
                out.write(chunk)
                received += len(chunk)
        if received != length:
            temporary.unlink()
            raise ApiError(400, "incomplete_body", f"got {received} of {length} bytes")
        if content_md5 is not None and base64.b64encode(digest.digest()).decode() != content_md5.strip():
            temporary.unlink()
            raise ApiError(
                400,
                "bad_digest",
                "the part's MD5 is not its Content-MD5: corrupted on the way",
                fields={"Content-MD5": [content_md5]},
            )
        etag = digest.hexdigest()
        (folder / f"{number:05d}.md5").unlink(missing_ok=True)
        temporary.replace(folder / f"{number:05d}.part")
        (folder / f"{number:05d}.md5").write_text(etag)
        return etag

    def object_path(self, key: str) -> Path:
        path = self._object(key)
        if not path.is_file():
            raise ApiError(404, "not_found", "no such object: deleted, or never stored")
        return path


def _chunks(body: BinaryIO, length: int) -> Iterator[bytes]:
    left = length
    while left > 0:
        chunk = body.read(min(CHUNK, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk
