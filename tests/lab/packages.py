"""The crash lab's prerequisites: Debian packages fetched and unpacked into a cache, never installed.

Everything the guests run comes from Debian's own packages, resolved at run time (the cloud
kernel's ABI changes with every security update): `apt-get download` into
`$CRASHREG_LAB_CACHE/debs` (default ~/.cache/crashreg-lab) and `dpkg-deb -x` into one unpacked
tree per package, so a second run on the same machine downloads nothing. The kernel headers
for the test module are the one thing installed on the host (kbuild wants its absolute paths).

A missing prerequisite raises LabError naming what is missing and how to get it: the lab
fails, it never skips.

    python -m tests.lab.packages        fetch everything the lab needs, print the cache layout
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

APT = ("apt-get", "-o", "DPkg::Lock::Timeout=600")
# Host tools the lab itself runs (QEMU TCG, cpio for the initramfs, mkfs.ext4/debugfs for the
# guest disk, gcc/make for the module) and where Debian ships them.
HOST_TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86",
    "cpio": "cpio",
    "mkfs.ext4": "e2fsprogs",
    "debugfs": "e2fsprogs",
    "curl": "curl",
    "gcc": "gcc",
    "make": "make",
    "dpkg-deb": "dpkg",
}
# Unpacked, not installed: what the guests' initramfs images are made of. kexec-tools links
# the Xen control libraries (copied by what ldd lists); makedumpfile wants liblzo2.
GUEST_PACKAGES = (
    "busybox-static",
    "kexec-tools",
    "makedumpfile",
    "liblzo2-2",
    "libxenmisc4.17",
    "libxencall1",
    "libxendevicemodel1",
    "libxenevtchn1",
    "libxenforeignmemory1",
    "libxengnttab1",
    "libxenhypfs1",
    "libxenstore4",
    "libxentoolcore1",
    "libxentoollog1",
    "libyajl2",
)
KERNEL_META = "linux-image-cloud-amd64"


class LabError(RuntimeError):
    """A prerequisite of the crash lab is missing: the message says which and how to get it."""


def cache_dir() -> Path:
    path = Path(os.environ.get("CRASHREG_LAB_CACHE") or Path.home() / ".cache" / "crashreg-lab")
    path.mkdir(parents=True, exist_ok=True)
    return path


def run(cmd: list[str] | tuple[str, ...], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command; a failure is a LabError carrying its output."""
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    except FileNotFoundError as error:
        raise LabError(f"{cmd[0]} not found: {error}") from error
    if done.returncode != 0:
        raise LabError(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done


def check_host_tools() -> None:
    missing = sorted({pkg for tool, pkg in HOST_TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise LabError(
            f"the crash lab needs {' '.join(missing)}: apt-get install {' '.join(missing)} "
            "(scripts/test-services.sh does it)"
        )


def kernel_abi() -> str:
    """The ABI the cloud kernel meta-package depends on today, e.g. 6.1.0-57."""
    depends = run(["apt-cache", "depends", KERNEL_META]).stdout
    found = re.search(r"Depends: linux-image-(\d+\.\d+\.\d+-\d+)-cloud-amd64\b", depends)
    if not found:
        raise LabError(f"apt-cache depends {KERNEL_META} names no kernel (apt-get update?):\n{depends}")
    return found.group(1)


def fetch(package: str) -> Path:
    """The package's .deb in the cache, downloaded once. Each download goes into a directory
    of its own and is renamed into the cache: the suite's workers fetch the same packages at
    once into an empty cache, and two `apt-get download`s of one file in one directory have
    left neither's file behind."""
    debs = cache_dir() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    name = package.split("=")[0]
    cached = sorted(debs.glob(f"{name}_*.deb"))
    if cached:
        return cached[-1]
    with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=debs) as staging:
        run([*APT, "download", package], cwd=staging)
        downloaded = sorted(Path(staging).glob(f"{name}_*.deb"))
        if not downloaded:
            raise LabError(f"apt-get download {package} left no .deb in {staging}")
        target = debs / downloaded[-1].name
        os.replace(downloaded[-1], target)  # atomic: another worker's rename is of the same file
    return target


def unpack(package: str) -> Path:
    """The package's files under their own root, unpacked once."""
    deb = fetch(package)
    root = cache_dir() / "unpacked" / deb.stem

    def extract(staging: Path) -> None:
        run(["dpkg-deb", "-x", str(deb), str(staging)])
        (staging / ".done").touch()

    built_aside(root, extract, ".done")
    return root


def built_aside(target: Path, build: Callable[[Path], None], finished: str) -> None:
    """`target` made once by `build` in a directory of its own beside it, then renamed into
    place: the suite's workers make the same thing at once, and one must never build into (or
    remove) a directory another is building in. `finished`: the file a whole build has."""
    if (target / finished).exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(building)
        if not (target / finished).exists():
            shutil.rmtree(target, ignore_errors=True)  # what an interrupted run left unfinished
            try:
                building.rename(target)
            except OSError:
                if not (target / finished).exists():  # not another worker's finished one
                    raise
    finally:
        shutil.rmtree(building, ignore_errors=True)


def install_host_package(package: str) -> None:
    """apt-get install on the host (root, or a clear error saying what to install)."""
    if os.geteuid() != 0:
        raise LabError(f"the crash lab needs {package} installed: apt-get install {package}")
    run(
        [*APT, "install", "-y", "--no-install-recommends", package],
        env=os.environ | {"DEBIAN_FRONTEND": "noninteractive"},
    )


@dataclass(frozen=True)
class Kit:
    """Everything unpacked: the kernel, its modules and the guest tools, one root per package."""

    abi: str
    kernel_root: Path
    tool_roots: tuple[Path, ...]

    @property
    def release(self) -> str:
        return f"{self.abi}-cloud-amd64"

    @property
    def vmlinuz(self) -> Path:
        return self.kernel_root / "boot" / f"vmlinuz-{self.release}"

    @property
    def modules(self) -> Path:
        return self.kernel_root / "lib" / "modules" / self.release / "kernel"

    @property
    def headers(self) -> Path:
        return Path("/usr/src") / f"linux-headers-{self.release}"

    def tool(self, relative: str) -> Path:
        """A file from the unpacked guest packages, e.g. usr/bin/makedumpfile."""
        for root in self.tool_roots:
            if (root / relative).exists():
                return root / relative
        raise LabError(f"{relative} is in none of the unpacked packages {GUEST_PACKAGES}")

    def library_path(self) -> str:
        return ":".join(
            str(root / sub)
            for root in self.tool_roots
            for sub in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
        )


def kit() -> Kit:
    """Fetch and unpack what the guests need; install the headers the module builds against."""
    check_host_tools()
    abi = kernel_abi()
    kernel_root = unpack(f"linux-image-{abi}-cloud-amd64")
    tool_roots = tuple(unpack(package) for package in GUEST_PACKAGES)
    result = Kit(abi, kernel_root, tool_roots)
    if not (result.headers / "Makefile").exists():
        install_host_package(f"linux-headers-{result.release}")
    return result


def debug_vmlinux(release: str) -> Path:
    """The vmlinux with debug info for a kernel release, from its -dbg package (283 MB, cached).

    Only the vmlinux is unpacked (590 MB of the package's 1.7 GB)."""
    deb = fetch(f"linux-image-{release}-dbg")
    member = f"./usr/lib/debug/boot/vmlinux-{release}"
    root = cache_dir() / "unpacked" / deb.stem
    path = root / member
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        tarball = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        extracted = subprocess.run(
            ["tar", "-x", "-C", str(root), member], stdin=tarball.stdout, capture_output=True, text=True
        )
        tarball.wait()
        if extracted.returncode != 0 or not path.exists():
            raise LabError(f"{deb.name} holds no {member}: {extracted.stderr}")
    return path


def drgn_python() -> str:
    """A Python that imports drgn: Debian's python3-drgn (0.0.22 on Debian 12), installed if missing."""
    python = "/usr/bin/python3"  # Debian's, where python3-drgn installs (not a pyenv or venv python)
    probe = [python, "-c", "import drgn"]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        install_host_package("python3-drgn")
        run(probe)
    return python


if __name__ == "__main__":
    lab_kit = kit()
    print(f"kernel {lab_kit.release}: {lab_kit.vmlinuz}")
    print(f"cache: {cache_dir()}")
    print(f"drgn: {drgn_python()}")
    if "--debug-info" in sys.argv:
        print(f"vmlinux: {debug_vmlinux(lab_kit.release)}")
