"""The dump store: one small interface, two implementations (S3 API via boto3, a local directory).

The registry never carries a dump's bytes itself: it opens a multipart upload, hands the host
short-lived pre-signed URLs scoped to one part of one object, checks the parts and completes
the upload, and hands engineers short-lived download links. `open_store` picks the
implementation from CRASHREG_DUMP_STORE (docs/storage.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from registry.config import DumpStoreSettings
from registry.storage.local import LocalStore
from registry.storage.parts import StoredObject, StoredPart
from registry.storage.s3 import S3Store


class DumpStore(Protocol):
    """What the registry asks of a store; `key`s are relative to the configured location."""

    def create_upload(self, key: str) -> str:
        """Open a multipart upload of `key`; its upload id."""

    def presign_part(self, key: str, upload_id: str, number: int, ttl_s: int) -> str:
        """A URL that takes one HTTP PUT of part `number` until `ttl_s` seconds from now."""

    def upload_exists(self, key: str, upload_id: str) -> bool:
        """Whether the store still has the upload (one cheap request)."""

    def list_parts(self, key: str, upload_id: str) -> list[StoredPart]:
        """The parts the store holds; UploadGone when it no longer has the upload."""

    def complete_upload(self, key: str, upload_id: str, parts: list[StoredPart]) -> StoredObject:
        """Join the parts (in number order) into the object; UploadGone as list_parts."""

    def abort_upload(self, key: str, upload_id: str) -> None: ...

    def head(self, key: str) -> StoredObject | None:
        """The object's size and ETag; None when it does not exist."""

    def delete(self, key: str) -> None:
        """Remove the object (no error when it is already gone)."""

    def presign_get(self, key: str, ttl_s: int, filename: str) -> str:
        """A URL that downloads the object until `ttl_s` seconds from now."""

    def uri(self, key: str) -> str:
        """Where the object is, as a URI (s3://bucket/prefix/key, file:///dir/key)."""

    def put_file(self, key: str, source: Path) -> StoredObject:
        """Store a file the registry itself holds (a symbol file) as `key`, whole or not at all."""

    def local_path(self, key: str) -> Path | None:
        """The object as a file on this machine, when the store is a local directory (None: fetch it)."""

    def fetch_file(self, key: str, destination: Path) -> None:
        """Copy the object into `destination` (written whole, or not at all)."""


def store_location(store: DumpStore) -> str:
    """The store itself as a URI (s3://bucket/prefix, file:///dir): what a record of an object
    names the store it is in by."""
    return store.uri("").rstrip("/")


def local_root(url: str) -> Path | None:
    """The directory of a local store URL (`file:///path` or a plain path); None for s3://."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if not parts.scheme:
        return Path(url)
    return None


def open_store(settings: DumpStoreSettings, registry_url: str) -> DumpStore:
    """The store CRASHREG_DUMP_STORE names. A local store's pre-signed URLs point at the
    registry itself: the public endpoint when one is set, else `registry_url`."""
    if urlsplit(settings.url).scheme == "s3":
        return S3Store(settings.url, settings.public_endpoint)
    root = local_root(settings.url)
    if root is None:
        raise ValueError(
            f"CRASHREG_DUMP_STORE must be s3://bucket/prefix, file:///path or a path, got {settings.url!r}"
        )
    return LocalStore(root, (settings.public_endpoint or registry_url).rstrip("/"))
