"""Kernel version strings -> the debug packages each needs and where its exact source is; a
crashed kernel's build-ids (its own and its modules') from its reports.

A table of build families (rules as data); ordering versions is regression.py's job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from registry.build_ids import normal_build_id

_UPSTREAM_DOT_ZERO = re.compile(r"^(\d+\.\d+)\.0(?=$|-rc)")


@dataclass(frozen=True)
class DebugInfoRule:
    """How one family of kernel builds names its debug symbols and its source."""

    family: str
    pattern: re.Pattern[str]
    packages: tuple[str, ...]  # str.format templates over the match's named groups and `version`
    source: str  # where the exact source lives: a tag or commit template
    repository: str


# First match wins; the last rule catches any plain upstream release.
DEBUGINFO_RULES: tuple[DebugInfoRule, ...] = (
    DebugInfoRule(
        "syzkaller/upstream build",
        re.compile(r"^(?P<base>\d+\.\d+(?:\.\d+)?(?:-rc\d+)?)-.*-g(?P<commit>[0-9a-f]{7,40})(?:-dirty)?$"),
        (),
        "commit {commit}",
        "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git",
    ),
    DebugInfoRule(
        "ubuntu",
        re.compile(
            r"^(?P<base>\d+\.\d+\.\d+)-(?P<abi>\d+)-(?P<flavour>generic|lowlatency|aws|azure|gcp|oracle|"
            r"kvm|nvidia|ibm|raspi|generic-64k|[a-z]+-\d+\.\d+)$"
        ),
        ("linux-image-unsigned-{version}-dbgsym", "linux-image-{version}-dbgsym"),
        "Ubuntu-{base}-{abi}.* (ubuntu kernel git; exact upload from `apt-cache policy`)",
        "https://git.launchpad.net/~ubuntu-kernel/ubuntu/+source/linux/+git/",
    ),
    DebugInfoRule(
        "debian",
        re.compile(r"^(?P<base>\d+\.\d+\.\d+)-(?P<abi>\d+)-(?P<flavour>(?:cloud-|rt-)?(?:amd64|arm64))$"),
        ("linux-image-{version}-dbg",),
        "debian/{base}-{abi} (salsa kernel-team/linux)",
        "https://salsa.debian.org/kernel-team/linux",
    ),
    DebugInfoRule(
        "rhel/centos/fedora",
        re.compile(
            r"^(?P<base>\d+\.\d+\.\d+)-(?P<release>[\d.]+\.(?:el|fc)\w+?)(?:\.(?P<arch>x86_64|aarch64))?$"
        ),
        ("kernel-debuginfo-{base}-{release}", "kernel-debuginfo-common-{base}-{release}"),
        "kernel-{base}-{release}",
        "https://gitlab.com/redhat/centos-stream/src/kernel",
    ),
    DebugInfoRule(
        "amazon linux",
        re.compile(r"^(?P<base>\d+\.\d+\.\d+)-(?P<release>[\d.]+\.amzn\w+?)(?:\.(?P<arch>x86_64|aarch64))?$"),
        ("kernel-debuginfo-{base}-{release}",),
        "kernel-{base}-{release} (Amazon Linux SRPM)",
        "https://github.com/amazonlinux/linux",
    ),
    DebugInfoRule(
        "upstream release",
        re.compile(r"^v?(?P<base>\d+\.\d+(?:\.\d+)?(?:-rc\d+)?)(?P<local>[-+].*)?$"),
        (),
        "v{base}",
        "https://git.kernel.org/pub/scm/linux/kernel/git/stable/linux.git",
    ),
)


class DebugInfo(TypedDict):
    kernel_version: str
    family: str
    debug_packages: list[str]
    vmlinux_hint: str
    source_ref: str | None
    source_repository: str | None


def debuginfo(version: str) -> DebugInfo:
    """The debug packages and source reference for a kernel version (rule table above)."""
    for rule in DEBUGINFO_RULES:
        match = rule.pattern.match(version.strip())
        if match is None:
            continue
        values = {k: v or "" for k, v in match.groupdict().items()} | {"version": version.strip()}
        if rule.family == "upstream release":  # upstream tags v6.8 and v6.8-rc3, not v6.8.0
            values["base"] = _UPSTREAM_DOT_ZERO.sub(r"\1", values["base"])
        return {
            "kernel_version": version,
            "family": rule.family,
            "debug_packages": [template.format(**values) for template in rule.packages],
            "vmlinux_hint": (
                "install the debug package; vmlinux is under /usr/lib/debug/"
                if rule.packages
                else "build this tree with CONFIG_DEBUG_INFO=y (no distribution debug package)"
            ),
            "source_ref": rule.source.format(**values),
            "source_repository": rule.repository,
        }
    return {
        "kernel_version": version,
        "family": "unknown",
        "debug_packages": [],
        "vmlinux_hint": "unknown kernel family: find the build's vmlinux with debug info",
        "source_ref": None,
        "source_repository": None,
    }


MODULE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # the kernel's MODULE_NAME_LEN is 56


class ModuleBuild(TypedDict):
    name: str
    build_id: str


class KernelBuild(TypedDict):
    """What a vmcore's debug info is fetched by: the crashed kernel's build-id and each loaded
    module's, from the event's reports (the crash kernel's or DPU's `kernel_build_id`, the DPU's
    `dpu.debug_info.modules`)."""

    build_id: str | None
    modules: list[ModuleBuild]


def _build_id(value: Any) -> str | None:
    return normal_build_id(value) if isinstance(value, str) else None


def kernel_build(payloads: Iterable[dict[str, Any]]) -> KernelBuild:
    """From an event's stored report payloads, oldest first. A stored payload is read as
    untrusted (a report from before the field existed kept whatever it sent): malformed values
    are skipped, never raised."""
    found: KernelBuild = {"build_id": None, "modules": []}
    for payload in payloads:
        found["build_id"] = found["build_id"] or _build_id(payload.get("kernel_build_id"))
        dpu = payload.get("dpu")
        debug = dpu.get("debug_info") if isinstance(dpu, dict) else None
        modules = debug.get("modules") if isinstance(debug, dict) else None
        if found["modules"] or not isinstance(modules, list):
            continue
        for module in modules:
            name = module.get("name") if isinstance(module, dict) else None
            build_id = _build_id(module.get("build_id")) if isinstance(module, dict) else None
            if isinstance(name, str) and MODULE_NAME.fullmatch(name) and build_id:
                found["modules"].append({"name": name, "build_id": build_id})
    return found
