"""The session's S3 server (moto) for the gc tests."""

from tests.support.s3 import s3_server  # noqa: F401
