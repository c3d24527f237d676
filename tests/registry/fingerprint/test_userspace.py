"""Userspace cores: failure-mode labels from registers and mappings, runtime frames skipped."""

from __future__ import annotations

from registry.fingerprint import analyse_stack
from tests.support.userspace import FRAMES, stack


def test_ordinary_fault_skips_runtime_frames_and_clone_suffixes() -> None:
    signature = analyse_stack(stack())
    assert signature.kind == "userspace"
    assert signature.function == "nccl_proxy_progress"
    assert signature.module == "libnccl.so.2"
    assert signature.frames == ["nccl_proxy_progress [libnccl.so.2]", "proxy_service [libnccl.so.2]"]
    assert signature.labels == ["segfault"]
    assert "SIGSEGV" in signature.title and "trainer" in signature.title


def test_return_to_null() -> None:
    signature = analyse_stack(stack(registers={"rip": "0x0", "rsp": "0x7fffffffe3a0"}))
    assert signature.labels == ["return-to-null", "segfault"]


def test_bad_return_outside_every_executable_mapping() -> None:
    signature = analyse_stack(stack(registers={"rip": "0x7ffff7dc1000", "rsp": "0x7fffffffe3a0"}))
    assert signature.labels == ["bad-return", "segfault"]


def test_misaligned_stack() -> None:
    signature = analyse_stack(stack(registers={"rip": "0x555555560123", "rsp": "0x7fffffffe3a8"}))
    assert signature.labels == ["misaligned-stack", "segfault"]


def test_failure_modes_split_identical_frames_into_separate_signatures() -> None:
    prints = {
        analyse_stack(stack()).fingerprint,
        analyse_stack(stack(registers={"rip": "0x0", "rsp": "0x7fffffffe3a0"})).fingerprint,
        analyse_stack(stack(registers={"rip": "0x7ffff7dc1000", "rsp": "0x7fffffffe3a0"})).fingerprint,
        analyse_stack(stack(registers={"rip": "0x555555560123", "rsp": "0x7fffffffe3a8"})).fingerprint,
        analyse_stack(stack(signal="SIGBUS")).fingerprint,
    }
    assert len(prints) == 5


def test_addresses_do_not_reach_the_fingerprint() -> None:
    moved = stack(registers={"rip": "0x555555561000", "rsp": "0x7ffd00000010"})
    moved["frames"] = [dict(f, address="0x7f0000001234") for f in FRAMES]
    assert analyse_stack(moved).fingerprint == analyse_stack(stack()).fingerprint


def test_unsymbolised_frames_use_module_and_offset() -> None:
    frames = [{"module": "/opt/app/libfoo.so", "offset": "0x1A2B"}, {"function": "??"}]
    signature = analyse_stack(stack(frames=frames))
    assert signature.function == "libfoo.so+0x1a2b"


def test_garbage_stacks_are_refused_not_crashed_on() -> None:
    assert analyse_stack({}) is None
    assert analyse_stack("not a dict") is None  # type: ignore[arg-type]
    weird = {"frames": [None, 3, {"function": 7}], "registers": {"rip": [1]}, "mappings": "x",
             "signal": 11}
    assert analyse_stack(weird) is None
    only_registers = {"registers": {"rip": "0x0"}}
    assert analyse_stack(only_registers).labels == ["return-to-null"]
