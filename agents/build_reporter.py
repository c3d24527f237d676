#!/usr/bin/env python3
"""Build the reporter as one file, dist/crashreg-report.pyz, from the registry's own engine.

The reporter runs on crashing machines with nothing but python3, yet must compute exactly
the registry's fingerprints (offline decisions match the policy bundle by fingerprint). So
it imports the engine package itself, and this build zips the reporter's main module with
`registry/__init__.py` and `registry/fingerprint/` (both standard library only; tests/
foundation/test_architecture.py holds them to that) into a zipapp. The archive is
reproducible: same sources, same bytes, so a fleet's copies can be compared by checksum.

    python3 agents/build_reporter.py [--output dist/crashreg-report.pyz]   # or: make reporter
"""

from __future__ import annotations

import argparse
import io
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "dist" / "crashreg-report.pyz"
SHEBANG = b"#!/usr/bin/env python3\n"
MAIN = b"import sys\n\nfrom crashreg_report import main\n\nsys.exit(main())\n"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip epoch: no build time in the archive
# stdlib-only packages under agents/ the reporter imports
AGENT_PACKAGES = ("kernellog", "dumpupload", "coredump")


def members() -> dict[str, bytes]:
    """Archive name -> content: the reporter, the package marker, the engine and the agent
    packages, no caches."""
    files = {"crashreg_report.py": REPO / "agents" / "crashreg_report.py",
             "registry/__init__.py": REPO / "registry" / "__init__.py"}
    packages = {"registry/fingerprint": REPO / "registry" / "fingerprint"}
    packages |= {name: REPO / "agents" / name for name in AGENT_PACKAGES}
    for name, directory in packages.items():
        files |= {f"{name}/{path.relative_to(directory).as_posix()}": path
                  for path in sorted(directory.rglob("*"))
                  if path.is_file() and "__pycache__" not in path.parts}
    return {"__main__.py": MAIN} | {name: path.read_bytes() for name, path in files.items()}


def build(output: Path = OUTPUT) -> Path:
    """Write the zipapp atomically (a running reporter never sees half an archive)."""
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members().items():
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, content)
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(f".{output.name}.tmp")
    temporary.write_bytes(buffer.getvalue())
    temporary.chmod(0o755)
    temporary.replace(output)
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default: {OUTPUT.relative_to(REPO)}")
    args = parser.parse_args(argv)
    print(build(args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
