"""What this worker's reads last found, for a report's write to be planned on without a read.

In a storm every report of one bug reads the same things before it writes: the caller's token,
the signature its fingerprint routes to and that signature's capture slots. A worker keeps what
its last read of each found, and the next report of the bug plans its answer on that and goes
straight to its one write (registry.ingest.sql.report_at_once), which checks in its own snapshot
that all of it still holds: the token live with its scope, the signature's and its slots' row
versions unchanged, the report_id not stored, no pstore record of the panic first. A stale
entry costs that report its read after all (then the entry is what the read found), never a
wrong answer. PostgreSQL only: row versions are its xmin.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from registry.capture.policy import Slot
from registry.ingest.sql import IngestContext, RowVersions
from registry.signatures.service import SignatureSnapshot

# Entries a worker keeps of each kind before it starts afresh (a fleet's live bugs and
# reporter tokens are far fewer).
LIMIT = 4096


@dataclass(frozen=True)
class WriteBasis:
    """What a report's one write is planned on, each checked by the write itself: the routed
    signature (None: the report has no crash signature), its slots and their versions, and the
    caller's admitted token row (None: no caller)."""

    signature: SignatureSnapshot | None
    slots: list[Slot]
    versions: RowVersions | None
    token: dict[str, Any] | None

    @staticmethod
    def of(context: IngestContext) -> WriteBasis:
        return WriteBasis(context.signature, context.slots, context.versions, context.token)


@dataclass(frozen=True)
class RoutedSignature:
    signature: SignatureSnapshot
    slots: list[Slot]
    versions: RowVersions


class LastRead:
    """One database's entries in this worker: signatures by fingerprint, token rows by caller
    (registry.ingest.service.Caller: the token's hash and the check that admitted it, a frozen
    dataclass, so equal callers are one key)."""

    def __init__(self) -> None:
        self.signatures: dict[str, RoutedSignature] = {}
        self.tokens: dict[Hashable, dict[str, Any]] = {}

    def basis(
        self, fingerprint: str | None, caller: Hashable | None, fresh_after: datetime
    ) -> WriteBasis | None:
        """What the last reads found for this report, or None when they did not find it all.
        `fresh_after`: a token last used before it is left to the read (which stamps its use)."""
        token = None
        if caller is not None:
            token = self.tokens.get(caller)
            if token is None or token["last_used_at"] is None or token["last_used_at"] < fresh_after:
                return None
        if fingerprint is None:
            return WriteBasis(None, [], None, token)
        routed = self.signatures.get(fingerprint)
        if routed is None:
            return None
        return WriteBasis(routed.signature, routed.slots, routed.versions, token)

    def remember(self, fingerprint: str | None, caller: Hashable | None, context: IngestContext) -> None:
        """What a read found, once its caller was admitted."""
        if caller is not None and context.token is not None:
            keep(self.tokens, caller, context.token)
        if fingerprint is None:
            return
        if context.signature is None or context.versions is None:
            self.signatures.pop(fingerprint, None)
        else:
            routed = RoutedSignature(context.signature, context.slots, context.versions)
            keep(self.signatures, fingerprint, routed)

    def forget(self, fingerprint: str | None = None, caller: Hashable | None = None) -> None:
        """A signature whose report took store's steps (a claim, a merge: its rows changed),
        or a token the read refused."""
        if fingerprint is not None:
            self.signatures.pop(fingerprint, None)
        if caller is not None:
            self.tokens.pop(caller, None)


def keep(entries: dict[Any, Any], key: Any, value: Any) -> None:
    if len(entries) >= LIMIT and key not in entries:
        entries.clear()
    entries[key] = value


_LAST_READS: WeakKeyDictionary[Any, LastRead] = WeakKeyDictionary()


def last_read_of(database: Any) -> LastRead:
    """The entries of one database (tests and tools open several in one process)."""
    found = _LAST_READS.get(database)
    if found is None:
        found = _LAST_READS[database] = LastRead()
    return found
