"""A crash's signature (fingerprint, title, explanation) from its console log or its stack."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TypedDict

from .console import KernelCrash, explain_frames, parse_console_log
from .frames import ExplainedFrame, make_fingerprint, normalise_text
from .patterns import ALGORITHM_VERSION, FREE_TEXT_FIELDS
from .userspace import UserCrash, explain_user_frames, parse_stack

# Key frames hashed into a fingerprint beside the guilty one. Measured on the kernel corpus
# (bench/signatures.py): callers below the guilty frame vary between hits of one bug far more
# often than they separate two bugs, so only the guilty frame (with kind and module) counts.
# A program's callers vary between its releases too, with no change to the bug: a call the
# compiler made a tail call leaves no frame (`return parse(h);` at -O2), another is inlined
# in one build and not the next. So a userspace fingerprint counts the guilty frame as well.
FINGERPRINT_FRAMES = 1


class ExplanationRecord(TypedDict, total=False):
    """How a fingerprint was made (docs/signatures.md), stored with each event. The engine
    writes every key; a record stored by an older engine may lack some."""

    v: int  # ALGORITHM_VERSION of the engine that explained it
    kind: str
    kind_rule: str | None  # the rule recognising the report
    headline: str
    section: str | None  # where in the report frames came from
    frames: list[ExplainedFrame]
    guilty: int | None  # index of the guilty frame in frames
    flags: list[str]
    identity: list[str | None]  # the parts hashed, in order
    unsymbolicated: list[str]  # build-ids the registry had no symbols for (registry/symbolication)


@dataclass(frozen=True)
class CrashSignature:
    """A crash's identity and how humans read it."""

    fingerprint: str
    title: str
    kind: str
    function: str | None
    module: str | None
    frames: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    algorithm_version: int = ALGORITHM_VERSION
    # How the fingerprint was made, compact and JSON-serialisable.
    explanation: ExplanationRecord = field(default_factory=ExplanationRecord, compare=False)

    def as_dict(self) -> dict:
        return asdict(self)


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""


def _headline(crash: KernelCrash) -> str:
    fields = _Blank({key: normalise_text(value) if key in FREE_TEXT_FIELDS else value
                     for key, value in crash.fields.items()})
    headline = " ".join(crash.oops.title.format_map(fields).split())
    return f"{headline}: {crash.detail}" if crash.detail else headline


def _kernel_signature(crash: KernelCrash) -> CrashSignature:
    oops = crash.oops
    headline = _headline(crash)
    by_function = oops.by_function
    function = crash.function if by_function else None
    module = crash.module if by_function or oops.classify else None
    # Without a guilty frame, the normalised header line is all that tells two crashes apart.
    fallback = "" if function or not by_function else normalise_text(crash.header)
    frames = crash.frames[:FINGERPRINT_FRAMES] if by_function else []
    # A garbled report never shares a fingerprint with a clean one when the damage could have
    # misled its identity: a lost header, another CPU's lines, or a missing stack that left no
    # guilty frame. A stack cut short after the faulting PC named the function is still that
    # bug (consoles drop lines), and splitting it would cost another dump.
    damage = [flag for flag in crash.flags if flag != "truncated" or not function]
    damage = ["damaged:" + ",".join(damage)] if damage else []
    identity = ["kernel", oops.kind, headline, function, module, fallback, *frames, *damage]
    fingerprint = make_fingerprint(ALGORITHM_VERSION, *identity)
    # No guilty frame: name the source file the header points at, so two BUG_ON sites read apart.
    where = f" in {function}" if function else (f" at {crash.fields['file']}" if crash.fields.get("file")
                                                else "")
    title = headline + where + (f" [{module}]" if module else "")
    explained, guilty = explain_frames(crash) if by_function else ([], None)
    explanation: ExplanationRecord = {
        "v": ALGORITHM_VERSION, "kind": oops.kind, "kind_rule": oops.name,
        "headline": headline, "section": crash.pick.section if by_function else None,
        "frames": explained, "guilty": guilty, "flags": list(crash.flags), "identity": identity}
    return CrashSignature(fingerprint=fingerprint, title=title, kind=oops.kind,
                          function=function, module=module,
                          frames=crash.frames if by_function else [],
                          labels=[*crash.labels, *crash.flags],
                          explanation=explanation)


def _user_signature(crash: UserCrash) -> CrashSignature:
    labels = crash.labels
    identity = ["userspace", crash.executable, crash.signal, *sorted(labels), *crash.keyed]
    fingerprint = make_fingerprint(ALGORITHM_VERSION, *identity)
    where = f" in {crash.function}" if crash.function else ""
    module = f" [{crash.module}]" if crash.module else ""
    modes = f" ({', '.join(labels)})" if labels else ""
    program = f" of {crash.executable}" if crash.executable else ""
    headline = f"{crash.signal or 'crash'}{modes}"
    title = f"{headline}{where}{module}{program}"
    explained, guilty = explain_user_frames(crash)
    explanation: ExplanationRecord = {
        "v": ALGORITHM_VERSION, "kind": "userspace",
        "kind_rule": f"signal:{crash.signal}" if crash.signal else "evidence",
        "headline": headline, "section": "stack" if explained else None,
        "frames": explained, "guilty": guilty, "flags": [], "identity": identity}
    return CrashSignature(fingerprint=fingerprint, title=title, kind="userspace",
                          function=crash.function, module=crash.module, frames=crash.frames,
                          labels=labels, explanation=explanation)


def analyse_console_log(text: str) -> CrashSignature | None:
    """Signature of the first crash in a kernel console log; None if the log holds no crash."""
    if not isinstance(text, str):
        return None
    crash = parse_console_log(text)
    return _kernel_signature(crash) if crash else None


def analyse_stack(stack: dict) -> CrashSignature | None:
    """Signature of a userspace crash from the contract's `stack` object."""
    crash = parse_stack(stack)
    return _user_signature(crash) if crash else None


def analyse_report(console_log: str | None, stack: dict | None) -> CrashSignature | None:
    """A report's signature: from its console log when that holds a crash, else its stack."""
    signature = analyse_console_log(console_log) if console_log else None
    if signature is None and stack:
        signature = analyse_stack(stack)
    return signature
