"""The crashreg command as a real process, on a given database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def crashreg(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"CRASHREG_DATABASE_URL": db_url}
    return subprocess.run(
        [sys.executable, "-m", "registry", *args], env=env, capture_output=True, text=True, timeout=120
    )
