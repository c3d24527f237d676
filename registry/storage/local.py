"""The dump store as a local directory: the embedded default for one machine.

It speaks the same protocol to the hosts as S3 does: the registry hands out its own
pre-signed-style URLs (HMAC-signed, expiring, scoped to one part or one object) and the
storage blueprint serves them, so a reporter uploads the same way to either store. Layout:
`<root>/<key>` the objects, `<root>/.etags/<key>` their ETags, `<root>/.uploads/<id>/` the
parts of an open upload, `<root>/.signing-key` the URLs' key (made once, mode 0600).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import shutil
import time
from collections.abc import Iterator
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


class LocalStore:
    def __init__(self, root: Path, base_url: str, key: bytes | None = None) -> None:
        self.root = root.resolve()
        self.base_url = base_url
        if key is None:
            self.root.mkdir(parents=True, exist_ok=True)
        self.key = key or self._signing_key()

    def at(self, base_url: str) -> LocalStore:
        """The same store, its URLs naming `base_url`: the registry as the asking host reached it."""
        return LocalStore(self.root, base_url, self.key)

    def _signing_key(self) -> bytes:
        path = self.root / ".signing-key"
        if not path.exists():
            temporary = path.with_name(f".signing-key.{os.getpid()}.tmp")
            temporary.write_text(secrets.token_hex(32))
            temporary.chmod(0o600)
            with contextlib.suppress(FileExistsError):  # the first process wins; the others read it
                os.link(temporary, path)
            temporary.unlink()
        return path.read_text().strip().encode()

    # --- signed URLs ----------------------------------------------------------------------

    def _signature(self, method: str, resource: str, expires: int) -> str:
        message = f"{method}\n{resource}\n{expires}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def _signed(self, method: str, resource: str, ttl_s: int, **extra: str) -> str:
        expires = int(time.time()) + ttl_s
        query = {"expires": str(expires), **extra, "signature": self._signature(method, resource, expires)}
        return f"{self.base_url}{resource}?{urlencode(query)}"

    def check(self, method: str, resource: str, expires: str, signature: str) -> None:
        """Refuse a request whose URL this store did not sign for it, or whose time is up."""
        try:
            deadline = int(expires)
        except ValueError:
            raise ApiError(
                403, "forbidden", "the URL has no valid expiry: not one this registry signed"
            ) from None
        if not hmac.compare_digest(self._signature(method, resource, deadline), signature):
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
