"""GNU build-ids (the NT_GNU_BUILD_ID note's bytes in hex) as every domain checks and keys them:
1 to 64 bytes, written in either case, kept in lower case."""

from __future__ import annotations

import re

BUILD_ID = re.compile(r"(?:[0-9a-fA-F]{2}){1,64}")


def normal_build_id(text: str) -> str | None:
    """The build-id as the registry keys it (lower-case hex), None when `text` is not one."""
    build_id = text.strip().lower()
    return build_id if BUILD_ID.fullmatch(build_id) else None
