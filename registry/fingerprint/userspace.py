"""Read a userspace core's stack (frames, registers, mappings) into failure-mode labels.

Two populations with the same frames but different failure modes are different bugs: a
return to address 0 (a smashed return address or a NULL function pointer), a return into
non-executable memory, a misaligned stack at an SSE spill. The registers tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .frames import ExplainedFrame, canonical_function, frame_decisions, frame_label, skip_matcher
from .patterns import IP_REGISTERS, SP_REGISTERS, STACK_ALIGNMENT, USERSPACE_SKIP

MAX_FRAMES = 256  # frames examined; a runaway recursion is still one bug
FRAMES_KEPT = 3
MAX_NAME = 200

_SKIP = skip_matcher(USERSPACE_SKIP)
_RULES = (("userspace-runtime", _SKIP),)  # signal delivery, abort, unwinding, thread start

# The failure mode a signal means when the registers show nothing more specific.
SIGNAL_LABELS = {
    "SIGSEGV": "segfault", "SIGBUS": "bus-error", "SIGABRT": "abort", "SIGFPE": "fpe",
    "SIGILL": "illegal-instruction", "SIGTRAP": "trap", "SIGSYS": "bad-syscall",
}


@dataclass
class UserCrash:
    """What the stack tells: the ingredients of a userspace signature."""

    executable: str
    signal: str
    labels: list[str] = field(default_factory=list)
    function: str | None = None
    module: str | None = None
    frames: list[str] = field(default_factory=list)
    named: list[tuple[str, str | None]] = field(default_factory=list)  # every frame read
    guilty: int | None = None  # position of the guilty frame in `named`


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip()[:40], 0)
        except ValueError:
            return None
    return None


def _text(value: Any) -> str:
    return value[:MAX_NAME] if isinstance(value, str) else ""


def _register(registers: dict, names: tuple[str, ...]) -> tuple[str, int] | None:
    for name in names:
        value = _as_int(registers.get(name))
        if value is not None:
            return name, value
    return None


def _executable_ranges(mappings: Any) -> list[tuple[int, int]]:
    ranges = []
    for mapping in mappings[:4096] if isinstance(mappings, list) else ():
        if not isinstance(mapping, dict) or "x" not in _text(mapping.get("perms")):
            continue
        start, end = _as_int(mapping.get("start")), _as_int(mapping.get("end"))
        if start is not None and end is not None:
            ranges.append((start, end))
    return ranges


def failure_labels(registers: Any, mappings: Any) -> list[str]:
    """return-to-null / bad-return / misaligned-stack, from the registers at the fault."""
    if not isinstance(registers, dict):
        return []
    labels = []
    ip = _register(registers, IP_REGISTERS)
    if ip is not None:
        executable = _executable_ranges(mappings)
        if ip[1] == 0:
            labels.append("return-to-null")
        elif executable and not any(start <= ip[1] < end for start, end in executable):
            labels.append("bad-return")
    sp = _register(registers, SP_REGISTERS)
    if sp is not None:
        alignment = dict(STACK_ALIGNMENT).get(sp[0])
        if alignment and sp[1] % alignment:
            labels.append("misaligned-stack")
    return labels


def _frame_name(frame: Any) -> tuple[str, str | None] | None:
    """(function, module) of a frame; module+offset when it has no symbol; None if unusable."""
    if not isinstance(frame, dict):
        return None
    module = _text(frame.get("module")).rsplit("/", 1)[-1] or None
    function = _text(frame.get("function")).strip()
    if function and function != "??":
        return canonical_function(function, kernel=False), module
    offset = _text(frame.get("offset"))
    if module and offset:
        return f"{module}+{offset.lower()}", None
    return None


def explain_user_frames(crash: UserCrash) -> tuple[list[ExplainedFrame], int | None]:
    """The frames read, each guilty, used (real code) or skipped as runtime machinery."""
    return frame_decisions(crash.named, crash.guilty, _RULES, None)


def parse_stack(stack: Any) -> UserCrash | None:
    """The userspace crash described by a contract `stack` object, or None if it holds none."""
    if not isinstance(stack, dict):
        return None
    frames = stack.get("frames")
    frames = frames[:MAX_FRAMES] if isinstance(frames, list) else []
    signal = _text(stack.get("signal")).upper()
    crash = UserCrash(executable=_text(stack.get("executable")).rsplit("/", 1)[-1], signal=signal)
    crash.labels = failure_labels(stack.get("registers"), stack.get("mappings"))
    if signal in SIGNAL_LABELS:
        crash.labels.append(SIGNAL_LABELS[signal])
    named = [name for name in map(_frame_name, frames) if name is not None]
    kept = [name for name in named if not _SKIP.match(name[0])]
    crash.named = named
    crash.guilty = next((i for i, name in enumerate(named) if not _SKIP.match(name[0])), None)
    if kept:
        crash.function, crash.module = kept[0]
        crash.frames = [frame_label(name, module) for name, module in kept[:FRAMES_KEPT]]
    if not kept and not crash.labels:
        return None
    return crash
