"""One table of defaults: `Config`'s fields (agents/reporter/config.py). The sh reporter's
`load_config` and the tables of agents/README.md are checked against it, key by key."""

from __future__ import annotations

import re
from dataclasses import fields

from agents.reporter.config import Config
from tests.support.agents import KDUMP_SH, REPO

README = REPO / "agents" / "README.md"
# Keys only the sh reporter reads (the Python reporter fingerprints with the engine itself).
SH_ONLY = {"CRASHREG_FINGERPRINTER"}
# What the README writes for an empty default.
EMPTY = re.compile(r"^(none\b.*|system CAs|see below)$")


def defaults() -> dict[str, object]:
    return {f"CRASHREG_{spec.name.upper()}": getattr(Config(), spec.name) for spec in fields(Config)}


def same(written: str, default: object) -> bool:
    """A default as sh or the README writes it, read as Config's field would read it."""
    try:
        return type(default)(written) == default
    except ValueError:
        return False


def sh_defaults() -> dict[str, str]:
    script = KDUMP_SH.read_text()
    body = script[script.index("load_config() {"):script.index("    conf=${CRASHREG_CONF")]
    return dict(re.findall(r"^    (CRASHREG_\w+)=(\S*)$", body, re.MULTILINE))


def readme_defaults() -> dict[str, str]:
    """Every key row of the README's tables: `| keys | meaning | defaults |`, one default per
    key (comma-separated when a row holds several keys)."""
    found: dict[str, str] = {}
    for line in README.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        keys = re.findall(r"`(CRASHREG_\w+)`", cells[0]) if line.startswith("| `CRASHREG_") else []
        if not keys:
            continue
        values = cells[-1].split(", ") if len(keys) > 1 else [cells[-1]]
        assert len(values) == len(keys), line
        for key, value in zip(keys, values, strict=True):
            value = value.strip("`")
            found[key] = "" if EMPTY.match(value) else value
    return found


def test_the_sh_reporters_defaults_are_configs() -> None:
    sh = sh_defaults()
    assert sh, "no defaults found in load_config"
    wrong = {key: value for key, value in sh.items()
             if key not in SH_ONLY and not same(value, defaults().get(key))}
    assert wrong == {}
    assert set(sh) - SH_ONLY <= set(defaults())


def test_the_readme_documents_every_key_with_configs_default() -> None:
    readme = readme_defaults()
    missing = set(defaults()) - set(readme)
    assert missing == set(), f"keys with no row in agents/README.md: {sorted(missing)}"
    wrong = {key: (value, defaults()[key]) for key, value in readme.items()
             if key not in SH_ONLY and not same(value, defaults().get(key))}
    assert wrong == {}
    assert set(readme) - SH_ONLY <= set(defaults())
