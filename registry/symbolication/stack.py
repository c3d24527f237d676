"""A userspace stack named from debug info: the step before fingerprinting.

A frame that carries its module's build-id and its link-time offset (what a core reader and
the contract's `stack.frames` give, docs/api.md) gets, from the build-id's symcache, its
function (the engine's one demangler reads the raw symbol), its file and line, and the
functions inlined at that address as frames of their own before it. A frame without a
symcache keeps what the reporter sent (its name is a hint: the nearest exported symbol of a
stripped binary, or nothing), and its build-id is listed as missing, so that the event can
be symbolicated again when the symbols arrive. Frames of the runtime's modules (the C library,
the C++ runtime, the loader) are left as they are: the engine skips them by module, whatever
their names.

Plain functions over plain data and a lookup callable: ingest gives it the registry's
symcaches with a time budget, tests and the bench whatever they measure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from registry.build_ids import BUILD_ID
from registry.fingerprint.demangle import demangle
from registry.fingerprint.userspace import as_int, runtime_module

from .symcache import SourceFrame

MAX_FRAMES = 256  # as the engine reads (registry/fingerprint/userspace.py)
Lookup = Callable[[str, int], Sequence[SourceFrame] | None]


@dataclass
class Symbolicated:
    """The stack with its frames named from debug info, and the build-ids that had none."""

    stack: dict[str, Any]
    missing: list[str] = field(default_factory=list)
    named: int = 0  # frames named from debug info


def lookup_address(frames: list[Any], at: int) -> int | None:
    """The address to look a frame up at: its offset, less one for a return address (the
    call is the instruction before it). Frame 0 and the frame a signal interrupted hold the
    faulting pc itself."""
    frame = frames[at]
    offset = as_int(frame.get("offset"))
    if offset is None or not 0 <= offset < 1 << 64:
        return None
    interrupted = at == 0 or (isinstance(frames[at - 1], dict) and frames[at - 1].get("signal_frame") is True)
    return offset if interrupted else max(offset - 1, 0)


def frame_build_id(stack: dict[str, Any], frame: Any) -> str | None:
    """The frame's build-id: its own, else the executable's for a frame in the executable."""
    if not isinstance(frame, dict):
        return None
    own = frame.get("build_id")
    if isinstance(own, str):
        return own.lower()
    module, executable = frame.get("module"), stack.get("executable")
    if (isinstance(module, str) and isinstance(executable, str) and module
            and module.rsplit("/", 1)[-1] == executable.rsplit("/", 1)[-1]):
        program = stack.get("build_id")
        return program.lower() if isinstance(program, str) else None
    return None


def named_frames(frame: dict[str, Any], found: Sequence[SourceFrame]) -> list[dict[str, Any]]:
    """The frame as the debug info names it: its inlined calls first, each a frame of its own."""
    out = []
    for source in found:
        named = dict(frame) if not source.inlined else {
            key: frame[key] for key in ("module", "build_id", "offset", "address") if key in frame}
        if source.inlined:
            named["inlined"] = True
        if frame.get("function") and not source.inlined:
            named["reported_function"] = frame["function"]
        named["function"] = demangle(source.symbol)
        named["symbol"] = source.symbol
        if source.file:
            named["file"] = source.file
        if source.line:
            named["line"] = source.line
        out.append(named)
    return out


def _looked_up_at(stack: dict[str, Any], frames: list[Any], at: int) -> tuple[str, int] | None:
    """The build-id and address frame `at` is looked up at; None for a frame that is not (no
    build-id or offset, or a runtime module's)."""
    frame = frames[at]
    build_id = frame_build_id(stack, frame)
    address = lookup_address(frames, at) if isinstance(build_id, str) else None
    if address is None or not BUILD_ID.fullmatch(build_id or "") or runtime_module(frame.get("module")):
        return None
    return build_id or "", address


def symbolicate(stack: Any, lookup: Lookup, deadline: float | None = None) -> Symbolicated:
    """A copy of `stack` with every frame the lookup knows named from debug info. Past the
    `deadline` (time.monotonic()), frames are left as reported and their build-ids listed as
    missing: a report is answered within its budget, and symbolicated again later."""
    if not isinstance(stack, dict) or not isinstance(stack.get("frames"), list):
        return Symbolicated(stack)
    frames = stack["frames"][:MAX_FRAMES]
    result, missing, named = [], [], 0
    for at, frame in enumerate(frames):
        place = _looked_up_at(stack, frames, at)
        if place is None:
            result.append(frame)
            continue
        build_id, address = place
        found = None if deadline is not None and time.monotonic() > deadline else lookup(build_id, address)
        if found:
            result += named_frames(frame, found)
            named += 1
        else:
            if found is None and build_id not in missing:
                missing.append(build_id)
            result.append(frame)
    return Symbolicated(stack | {"frames": result}, missing, named)


def names_by_frame(stack: Any, lookup: Lookup) -> list[list[dict[str, Any]]]:
    """For each frame sent (up to MAX_FRAMES), what the debug info names there, as
    `symbolicate` would (its inlined calls, then itself), or [] where the lookup knows nothing:
    for reading an event's frames the engine's window left out (nothing is fetched)."""
    if not isinstance(stack, dict) or not isinstance(stack.get("frames"), list):
        return []
    frames = stack["frames"][:MAX_FRAMES]
    names = []
    for at, frame in enumerate(frames):
        place = _looked_up_at(stack, frames, at)
        found = lookup(*place) if place is not None else None
        names.append(named_frames(frame, found) if found else [])
    return names
