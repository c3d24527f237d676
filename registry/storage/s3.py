"""The dump store on any S3-compatible service, through boto3.

boto3 finds credentials, region and endpoint itself (AWS_ACCESS_KEY_ID..., AWS_PROFILE,
AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, ~/.aws/config), so AWS, MinIO, Ceph RGW or a cloud's
gateway work unchanged. Pre-signed URLs are signed by a second client for `public_endpoint`
when the hosts reach the store at another address than the registry does (SigV4 signs the
host name the URL carries).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from registry.storage.parts import StoredObject, StoredPart, UploadGone

# Checksums only where S3 requires them: boto3 >= 1.36 adds CRC32 checksums to uploads by
# default, which several S3-compatible stores do not accept; parts are checked by Content-MD5
# and by the registry's MD5 check before completion.
SIGNING = Config(signature_version="s3v4", retries={"mode": "standard"},
                 request_checksum_calculation="when_required", response_checksum_validation="when_required")


def _error_code(error: ClientError) -> str | None:
    return error.response.get("Error", {}).get("Code")


@contextmanager
def _gone_if_no_such_upload() -> Iterator[None]:
    """S3's NoSuchUpload (404) as UploadGone: the upload was completed, aborted or expired."""
    try:
        yield
    except ClientError as error:
        if _error_code(error) == "NoSuchUpload":
            raise UploadGone(str(error)) from error
        raise


class S3Store:
    def __init__(self, url: str, public_endpoint: str | None = None) -> None:
        location = urlsplit(url)
        self.bucket = location.netloc
        self.prefix = location.path.strip("/")
        session = boto3.session.Session()
        self.client = session.client("s3", config=SIGNING)
        self.signer = (
            session.client("s3", endpoint_url=public_endpoint, config=SIGNING)
            if public_endpoint
            else self.client
        )

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def create_upload(self, key: str) -> str:
        answer = self.client.create_multipart_upload(Bucket=self.bucket, Key=self._key(key))
        return str(answer["UploadId"])

    def presign_part(self, key: str, upload_id: str, number: int, ttl_s: int) -> str:
        params = {"Bucket": self.bucket, "Key": self._key(key), "UploadId": upload_id, "PartNumber": number}
        return str(self.signer.generate_presigned_url("upload_part", Params=params, ExpiresIn=ttl_s))

    def upload_exists(self, key: str, upload_id: str) -> bool:
        try:
            self.client.list_parts(Bucket=self.bucket, Key=self._key(key), UploadId=upload_id, MaxParts=1)
        except ClientError as error:
            if _error_code(error) == "NoSuchUpload":
                return False
            raise
        return True

    def list_parts(self, key: str, upload_id: str) -> list[StoredPart]:
        pages = self.client.get_paginator("list_parts").paginate(
            Bucket=self.bucket, Key=self._key(key), UploadId=upload_id
        )
        with _gone_if_no_such_upload():
            return [
                StoredPart(part["PartNumber"], part["Size"], part["ETag"])
                for page in pages
                for part in page.get("Parts", [])
            ]

    def complete_upload(self, key: str, upload_id: str, parts: list[StoredPart]) -> StoredObject:
        with _gone_if_no_such_upload():
            answer = self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=self._key(key),
                UploadId=upload_id,
                MultipartUpload={"Parts": [{"PartNumber": p.number, "ETag": p.etag} for p in parts]},
            )
        stored = self.head(key)
        if stored is None:
            raise RuntimeError(f"{self.uri(key)} missing right after its upload completed ({answer})")
        return stored

    def abort_upload(self, key: str, upload_id: str) -> None:
        self.client.abort_multipart_upload(Bucket=self.bucket, Key=self._key(key), UploadId=upload_id)

    def head(self, key: str) -> StoredObject | None:
        try:
            answer = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as error:
            if _error_code(error) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return StoredObject(int(answer["ContentLength"]), answer.get("ETag"))

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def presign_get(self, key: str, ttl_s: int, filename: str) -> str:
        params = {
            "Bucket": self.bucket,
            "Key": self._key(key),
            "ResponseContentDisposition": f'attachment; filename="{filename}"',
        }
        return str(self.signer.generate_presigned_url("get_object", Params=params, ExpiresIn=ttl_s))

    def put_file(self, key: str, source: Path) -> StoredObject:
        self.client.upload_file(str(source), self.bucket, self._key(key))  # multipart past 8 MiB
        stored = self.head(key)
        if stored is None:
            raise RuntimeError(f"{self.uri(key)} missing right after it was stored")
        return stored

    def local_path(self, key: str) -> Path | None:
        return None

    def fetch_file(self, key: str, destination: Path) -> None:
        temporary = destination.with_name(f".{destination.name}.{secrets.token_hex(4)}.tmp")
        try:
            self.client.download_file(self.bucket, self._key(key), str(temporary))
            temporary.replace(destination)
        finally:
            temporary.unlink(missing_ok=True)
