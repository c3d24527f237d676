#!/usr/bin/env python3
"""Build the reporter as one file, dist/crashreg-report.pyz, from the registry's own engine.

The reporter runs on crashing machines with nothing but python3, yet must compute exactly
the registry's fingerprints (offline decisions match the policy bundle by fingerprint). So
it imports the engine package itself, and this build zips the agents' tree as it is in the
repository (agents/crashreg_report.py, the commands, and the packages AGENT_PACKAGES names,
under the same `agents.` names the tests import) with `registry/__init__.py` and
`registry/fingerprint/` (all standard library only; tests/foundation/test_architecture.py
holds them to that) into a zipapp. The archive is reproducible: same sources, same bytes, so
a fleet's copies can be compared by checksum.

    python3 -m agents.build_reporter [--output dist/crashreg-report.pyz]   # or: make reporter
"""

from __future__ import annotations

import argparse
import io
import marshal
import subprocess
import sys
import zipfile
from pathlib import Path

from agents.reporter.files import write_atomically

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "dist" / "crashreg-report.pyz"
SHEBANG = b"#!/usr/bin/env python3\n"
MAIN = b"import sys\n\nfrom agents.crashreg_report import main\n\nsys.exit(main())\n"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip epoch: no build time in the archive
# stdlib-only packages under agents/ the reporter imports (the toolkit, and what uses it)
AGENT_PACKAGES = ("reporter", "kernellog", "coredump", "dpu")


def members() -> dict[str, bytes]:
    """Archive name -> content: the reporter, the package marker, the engine and the agent
    packages, no caches."""
    files = {"agents/crashreg_report.py": REPO / "agents" / "crashreg_report.py",
             "registry/__init__.py": REPO / "registry" / "__init__.py"}
    packages = {"registry/fingerprint": REPO / "registry" / "fingerprint"}
    packages |= {f"agents/{name}": REPO / "agents" / name for name in AGENT_PACKAGES}
    for name, directory in packages.items():
        files |= {f"{name}/{path.relative_to(directory).as_posix()}": path
                  for path in sorted(directory.rglob("*"))
                  if path.is_file() and "__pycache__" not in path.parts}
    return {"__main__.py": MAIN} | {name: path.read_bytes() for name, path in files.items()}


BYTECODE = """\
import importlib.util, marshal, sys
sources = marshal.load(sys.stdin.buffer)
header = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little")  # hash-based, unchecked
marshal.dump({name + "c": header + importlib.util.source_hash(source)
              + marshal.dumps(compile(source, name, "exec", dont_inherit=True))
              for name, source in sources.items()}, sys.stdout.buffer)
"""


def bytecode(files: dict[str, bytes]) -> dict[str, bytes]:
    """A `.pyc` beside every module: zipimport compiles a module's source at every start (twice:
    for its spec, then its code), which was most of a core handler's time to its answer. They
    are compiled by a child of this Python with PYTHONHASHSEED=0, so set constants keep one
    order and the same sources give the same bytes; unchecked-hash, so no timestamp is read. A
    host whose Python has another bytecode magic number imports the `.py` beside them."""
    sources = {name: content for name, content in files.items()
               if name.endswith(".py") and name != "__main__.py"}
    done = subprocess.run([sys.executable, "-c", BYTECODE], input=marshal.dumps(sources), capture_output=True,
                          env={"PYTHONHASHSEED": "0"}, check=True, timeout=300)  # fmt: skip
    return marshal.loads(done.stdout)


def build(output: Path = OUTPUT) -> Path:
    """Write the zipapp atomically (a running reporter never sees half an archive)."""
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        files = members()
        # Directory entries: zipimport finds a namespace package (agents/ has no __init__.py)
        # only by its directory's own entry.
        for directory in sorted({f"{parent.as_posix()}/" for name in files for parent in Path(name).parents
                                 if parent != Path(".")}):
            info = zipfile.ZipInfo(directory, FIXED_TIME)
            info.external_attr = (0o40755 << 16) | 0x10
            archive.writestr(info, b"")
        for name, content in (files | bytecode(files)).items():
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, content)
    return write_atomically(output, buffer.getvalue(), mode=0o755)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default: {OUTPUT.relative_to(REPO)}")
    args = parser.parse_args(argv)
    print(build(args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
