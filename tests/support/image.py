"""The image as the Dockerfile builds it, read from the Dockerfile itself: which files its COPY
lines copy (after .dockerignore), how its RUN line installs them, which user, directories,
environment and command it runs with. tests/foundation/test_image.py builds and runs that.

Only what this Dockerfile uses is read (FROM, ENV key=value, RUN, WORKDIR, COPY without flags,
USER, VOLUME, EXPOSE, HEALTHCHECK, CMD in exec form); anything else stops the reading, so a new
instruction is noticed, not skipped.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

ROOT = PurePosixPath("/")
KNOWN = {"FROM", "ENV", "RUN", "WORKDIR", "COPY", "USER", "VOLUME", "EXPOSE", "HEALTHCHECK", "CMD"}


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]  # relative to the build context
    destination: PurePosixPath  # absolute, in the image
    into: bool  # the destination is a directory the sources go into (`./`, several sources)


@dataclass
class Dockerfile:
    copies: list[Copy] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    user: str = "root"
    install_dir: PurePosixPath = field(default=ROOT)  # the WORKDIR of the RUN line that runs pip
    workdir: PurePosixPath = field(default=ROOT)  # the last WORKDIR: where commands run
    cmd: list[str] = field(default_factory=list)
    healthcheck: str = ""  # the HEALTHCHECK's command, run by a shell

    def pip_install(self) -> list[str]:
        """The arguments of the RUN line's `pip install` (e.g. ["install", "."])."""
        for run in self.runs:
            for command in run.split("&&"):
                words = shlex.split(command)
                if words[:2] == ["pip", "install"]:
                    return words[1:]
        raise AssertionError("no RUN line runs `pip install`")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments): continuation lines joined, comments and blank lines left out."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    found = []
    for line in lines:
        keyword, _, arguments = line.partition(" ")
        assert keyword.upper() in KNOWN, f"Dockerfile: {keyword} is not read by tests/support/image.py"
        found.append((keyword.upper(), arguments.strip()))
    return found


def read_dockerfile(path: Path) -> Dockerfile:
    image = Dockerfile()
    workdir = ROOT
    for keyword, arguments in instructions(path.read_text()):
        if keyword == "ENV":
            image.env |= dict(pair.split("=", 1) for pair in shlex.split(arguments))
        elif keyword == "WORKDIR":
            workdir = workdir / arguments
            image.workdir = workdir
        elif keyword == "COPY":
            *sources, destination = shlex.split(arguments)
            assert not any(s.startswith("--") for s in sources), f"COPY flags are not read: {arguments}"
            image.copies.append(Copy(tuple(sources), workdir / destination,
                                     destination.endswith("/") or len(sources) > 1))
        elif keyword == "RUN":
            image.runs.append(arguments)
            if re.search(r"(^|&&)\s*pip install", arguments):
                image.install_dir = workdir
        elif keyword == "USER":
            image.user = arguments
        elif keyword == "CMD":
            image.cmd = json.loads(arguments)
        elif keyword == "HEALTHCHECK":
            image.healthcheck = arguments.split(" CMD ", 1)[1]
    return image


def ignore_patterns(context: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (excludes, pattern) in order: the last pattern matching a path (or one of
    its parent directories) decides, `!` re-includes; `*` and `?` stay within a path segment,
    `**` spans any number of them (Docker's rules)."""
    ignore = context / ".dockerignore"
    rules = []
    for raw in ignore.read_text().splitlines() if ignore.exists() else []:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        excludes = not line.startswith("!")
        pattern = str(PurePosixPath(line.lstrip("!").strip("/")))
        rules.append((excludes, re.compile(glob_regex(pattern))))
    return rules


def glob_regex(pattern: str) -> str:
    segments = pattern.split("/")
    parts = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
            continue
        text = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in segment)
        parts.append(text + ("" if last else "/"))
    return "".join(parts) + r"\Z"


def ignored(relative: PurePosixPath, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    candidates = [str(relative), *(str(parent) for parent in relative.parents if str(parent) != ".")]
    decided = False
    for excludes, pattern in rules:
        if any(pattern.match(candidate) for candidate in candidates):
            decided = excludes
    return decided


def image_files(context: Path, image: Dockerfile) -> dict[PurePosixPath, Path]:
    """Every file the COPY lines put in the image (its path there) -> the file in `context`."""
    rules = ignore_patterns(context)
    files: dict[PurePosixPath, Path] = {}
    for copy in image.copies:
        for source in copy.sources:
            origin = context / source
            assert origin.exists(), f"COPY {source}: not in the build context"
            inside = sorted(p for p in origin.rglob("*") if p.is_file()) if origin.is_dir() else [origin]
            for path in inside:
                if ignored(PurePosixPath(path.relative_to(context).as_posix()), rules):
                    continue
                if origin.is_dir():  # a directory's contents go into the destination
                    files[copy.destination / path.relative_to(origin).as_posix()] = path
                else:
                    files[copy.destination / path.name if copy.into else copy.destination] = path
    return files
