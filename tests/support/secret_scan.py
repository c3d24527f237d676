"""Key material in a set of files, found by a maintained scanner (detect-secrets, the dev extra)
with the project's audited baseline (.secrets.baseline: false positives only, each reviewed).

Reusable over any file set: the repository's tracked files (tests/foundation/test_no_secrets.py)
or a built image's files. A finding names a file, a line and a kind, never the secret itself.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from detect_secrets import SecretsCollection
from detect_secrets.settings import transient_settings

REPOSITORY = Path(__file__).resolve().parents[2]
BASELINE = REPOSITORY / ".secrets.baseline"
PLUGINS = Path(__file__).with_name("secret_plugins.py")


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}"


def scanner_settings(baseline: dict) -> dict:
    """The baseline's plugins and filters, its own plugins found here whatever the working
    directory (the baseline names them relative to the repository, as the command line wants)."""
    plugins = [
        {**plugin, "path": f"file://{PLUGINS}"} if "path" in plugin else plugin
        for plugin in baseline["plugins_used"]
    ]
    return {"plugins_used": plugins, "filters_used": baseline["filters_used"]}


def excluded(baseline: dict, name: str) -> bool:
    """Whether the baseline's `--exclude-files` patterns leave `name` out (the command line
    applies them when it lists files; a scan of named files must apply them itself). The one
    excluded today: tests/support/data/symbols/, lists of real mangled symbols, reviewed whole."""
    patterns = [pattern for used in baseline["filters_used"]
                if used["path"] == "detect_secrets.filters.regex.should_exclude_file"
                for pattern in used.get("pattern", [])]
    return any(re.search(pattern, name) for pattern in patterns)


def secret_findings(
    paths: Iterable[Path], root: Path, baseline: Path = BASELINE, processes: int | None = 1
) -> list[Finding]:
    """What the scanner finds in `paths` (files under `root`, named relative to it as in the
    baseline) that the baseline does not list as an audited false positive."""
    recorded = json.loads(baseline.read_text())
    with transient_settings(scanner_settings(recorded)):
        known = {(name, secret.secret_hash, secret.type)
                 for name, secret in SecretsCollection.load_from_baseline(recorded)}
        found = SecretsCollection(root=str(root))
        names = [name for name in (str(path.relative_to(root)) for path in paths)
                 if not excluded(recorded, name)]
        found.scan_files(*names, num_processors=processes)
        return sorted(  # by the file's name as the baseline has it (detect-secrets keeps the path)
            Finding(name, secret.line_number or 0, secret.type)
            for name, secret in found
            if (name, secret.secret_hash, secret.type) not in known
        )


def tracked_files(repository: Path) -> list[Path]:
    """The files git tracks in `repository` (those present: a deletion not yet committed is gone)."""
    listed = git(repository, "ls-files", "-z").split("\0")
    return [repository / name for name in listed if name and (repository / name).is_file()]


def tracked_but_ignored(repository: Path) -> list[str]:
    """Files git tracks although .gitignore says they are the machine's own (a store's key, a
    database): added by force or before the rule, and in every clone since."""
    listed = git(repository, "ls-files", "--cached", "--ignored", "--exclude-standard", "-z")
    return [name for name in listed.split("\0") if name]


def git(repository: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repository), *arguments], capture_output=True, text=True, check=True
    ).stdout
