"""No secret in the tree, ever: the repository tracks no file its .gitignore ignores, and no
file holding key material, as detect-secrets sees it (its findings not in the audited baseline
.secrets.baseline, which lists false positives only). After a finding: remove the secret (and
rotate it: it is in the history), or, for a false positive, `detect-secrets scan --baseline
.secrets.baseline` and `detect-secrets audit .secrets.baseline` (README.md, Development)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from registry.storage.local import KEY_FILE, SigningKey
from tests.support.secret_scan import (
    REPOSITORY,
    Finding,
    git,
    secret_findings,
    tracked_but_ignored,
    tracked_files,
)


def test_the_repository_tracks_nothing_its_gitignore_ignores() -> None:
    assert tracked_but_ignored(REPOSITORY) == []


@pytest.mark.slow
def test_no_tracked_file_holds_key_material_beyond_the_audited_baseline() -> None:
    findings = secret_findings(tracked_files(REPOSITORY), REPOSITORY, processes=None)
    assert findings == [], "key material in tracked files:\n" + "\n".join(map(str, findings))


def test_the_checks_find_a_store_key_committed_by_force_and_other_keys(tmp_path: Path) -> None:
    """What happened here once: the local store's key committed although .gitignore lists it."""
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("/crashreg-dumps/\n")
    SigningKey(tmp_path / "crashreg-dumps" / KEY_FILE).value()  # the key as the store makes it
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "token").write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    (tmp_path / "notes.md").write_text("entry_SYSCALL_64_after_hwframe+0x49/0xbe\n" + "0" * 64 + "\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "add", "--force", f"crashreg-dumps/{KEY_FILE}")

    assert tracked_but_ignored(tmp_path) == [f"crashreg-dumps/{KEY_FILE}"]
    assert secret_findings(tracked_files(tmp_path), tmp_path) == [
        Finding(f"crashreg-dumps/{KEY_FILE}", 1, "Whole-line hex key"),
        Finding("deploy/token", 1, "Whole-line base64 key"),
    ]
