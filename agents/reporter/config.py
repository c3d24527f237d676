"""The reporters' one configuration: /etc/crashreg/reporter.conf (or $CRASHREG_CONF), KEY=VALUE
lines shared with the sh reporter. `Config`'s fields and their defaults are the one table of
defaults: the sh reporter's and agents/README.md's are checked against it
(tests/agents/test_defaults.py)."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, fields
from pathlib import Path

from agents.reporter.log import log
from agents.reporter.report import BOOT_ID_FILE


@dataclass
class Config:
    """The reporter's settings; attribute `x` is the config key CRASHREG_X."""

    url: str = ""
    token_file: str = "/etc/crashreg/token"
    ca_file: str = ""
    connect_timeout: float = 5.0
    max_time: float = 20.0
    retries: int = 3
    retry_delay: float = 1.0
    deadline: float = 60.0  # seconds for one delivery: every attempt and wait; then the fallback
    core_deadline: float = 10.0  # the same for the core handler, which holds the dying process
    spool_dir: str = "/var/spool/crashreg"
    bundle: str = "/etc/crashreg/policy-bundle.txt"
    bundle_json: str = "/etc/crashreg/policy-bundle.json"
    vmcore: str = "/proc/vmcore"
    dmesg_file: str = ""
    makedumpfile: str = "makedumpfile"
    vmcore_dmesg: str = "vmcore-dmesg"
    compression: str = "-c"
    filtered_level: int = 31
    fallback_action: str = "filtered"
    max_log_bytes: int = 524288
    cmdline: str = "/proc/cmdline"
    decision_file: str = "/run/crashreg/decision.env"
    hostname: str = ""
    kdump_coredir: str = ""
    core_dir: str = "/var/lib/crashreg/cores"
    core_max_bytes: int = 2 << 30
    core_keep_free: int = 1 << 30
    core_dir_max_bytes: int = 8 << 30  # all cores in core_dir (0: no cap); the oldest go first
    core_compression: str = "gzip"
    core_range_bytes: int = 1 << 20
    core_chain: str = ""
    core_log: str = "/dev/kmsg"
    boot_id_file: str = BOOT_ID_FILE
    kmsg: str = "/dev/kmsg"
    watch_state: str = "/var/lib/crashreg/watch-state.json"
    watch_quiet: float = 10.0
    watch_repeat_interval: float = 60.0
    pstore_dir: str = "/sys/fs/pstore"
    pstore_clear: int = 1
    boot_log: str = "/var/lib/crashreg/boots"
    upload_dumps: int = 1  # send kept dumps to the dump store (through the registry's URLs)
    kdump_upload: str = "spool"  # collect: "spool" for the post-boot agent (no downtime), or "now"
    upload_threads: int = 4  # parts in flight at once
    dpu_debug_dir: str = ""  # the DPU agent: DIR/<release>/ holds each kernel release's debug info
    # The DPU agent's debuginfod client (agents/reporter/debuginfod.py): servers (space-separated;
    # none: the registry's <url>/debuginfod/), a read credential of its own, timeouts, cache.
    debuginfod_urls: str = ""
    debuginfod_token_file: str = ""  # a `read` token for the registry's /debuginfod/, never the report token
    debuginfod_headers_file: str = ""  # elfutils' DEBUGINFOD_HEADERS_FILE: `Name: value` lines, every server
    debuginfod_timeout: float = 30.0  # seconds to connect, and for each read of a file
    debuginfod_cache: str = "/var/cache/crashreg/debuginfod"  # <cache>/<build-id>/debuginfo, as elfutils'

    @classmethod
    def load(cls, path: str | None = None) -> Config:
        path = path or os.environ.get("CRASHREG_CONF") or "/etc/crashreg/reporter.conf"
        try:
            text = Path(path).read_text()
        except OSError:
            log(f"no readable config at {path}: defaults only")
            text = ""
        return cls.from_values(parse_conf(text))

    @classmethod
    def from_values(cls, values: dict[str, str]) -> Config:
        config = cls()
        for spec in fields(cls):
            key = "CRASHREG_" + spec.name.upper()
            raw = values.get(key)
            if raw is None:
                continue
            kind = type(getattr(config, spec.name))
            try:
                setattr(config, spec.name, kind(raw))
            except ValueError:
                log(f"{key}={raw!r} is not a valid {kind.__name__}: keeping {getattr(config, spec.name)!r}")
        return config

    def token(self) -> str | None:
        """The token file's token (read_token); None when unreadable or holding what no token
        has (the registry's 401 then spools the report)."""
        return read_token(self.token_file, "token file")


def read_token(path: str, what: str) -> str | None:
    """A token file's token, one rule for every reader (the sh reporter's token_of too): a
    UTF-8 byte-order mark and blanks (spaces, tabs, CR, LF) around it are left out. None when
    unreadable or holding what no token has."""
    try:
        token = Path(path).read_text(errors="replace").strip().removeprefix("\ufeff").strip()
    except OSError:
        log(f"{what} {path} unreadable")
        return None
    if not TOKEN_TEXT.fullmatch(token):
        if token:
            log(f"{what} {path} holds characters no token has (only printable ASCII without spaces): "
                "sent without a token")
        return None
    return token


# What a bearer token may hold (RFC 6750's b64token, and more): printable ASCII, no spaces.
TOKEN_TEXT = re.compile(r"[!-~]+")


def parse_conf(text: str) -> dict[str, str]:
    """KEY=VALUE lines as a POSIX shell would assign them (quotes, comments); no expansion."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"\s*(?:export\s+)?([A-Za-z_]\w*)=(.*)$", line)
        if not match:
            continue
        try:
            words = shlex.split(match.group(2), comments=True)
        except ValueError as error:  # unbalanced quotes: the line is ignored, not the file
            log(f"config line {line!r} ignored: {error}")
            continue
        values[match.group(1)] = words[0] if words else ""
    return values
