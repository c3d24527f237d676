"""Row ids as they arrive in paths, query strings and cursors.

Every table's id is a 32-bit INTEGER on PostgreSQL: an id past it can name no row, and sending
it to the database is an error there (out of range for type integer), so it never gets that far.
"""

from __future__ import annotations

ID_MAX = 2**31 - 1


def parse_id(text: str) -> int | None:
    """The id written in `text` (ASCII digits only: "²".isdigit() is true), or None if it is
    not one or is past every id's range."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(ID_MAX)):
        return None
    value = int(text)
    return value if 0 < value <= ID_MAX else None
