"""The crashreg command as a real process, on a given database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from registry.config import Settings

REPO = Path(__file__).resolve().parents[2]


def crashreg(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(os.environ | {"CRASHREG_DATABASE_URL": db_url}, args, timeout=120)


def crashreg_for(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """The crashreg command as a real process on a test's registry: its database, dump store,
    symbol cache and debuginfod servers, and no other CRASHREG_ setting of the environment."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("CRASHREG_")}
    env |= {"CRASHREG_DATABASE_URL": settings.database_url, "CRASHREG_DUMP_STORE": settings.dump_store.url,
            "CRASHREG_SYMBOL_CACHE_DIR": settings.symbols.cache_dir,
            "CRASHREG_DEBUGINFOD_URLS": " ".join(settings.symbols.debuginfod_urls)}
    return _run(env, args, timeout=300)


def _run(env: dict[str, str], args: tuple[str, ...], timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "registry", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
