"""A real Debian 12 install with kdump-tools, set up as agents/README.md tells an operator.

debootstrap (from Debian's package repository, cached) makes the root filesystem; the
reporter, its config, the crash kernel's parameters and the kdump-tools hook are installed
exactly as the README's "Debian / Ubuntu: kdump-tools" section says; `mkfs.ext4 -d` turns it
into a disk image (no loop mounts). The guest boots systemd, kdump-tools loads its crash
kernel, a lab unit crashes the kernel (sysrq c), and the crash kernel boots the same disk into
kdump-tools-dump.service, whose `kdump-config savecore` sources /etc/default/kdump-tools: the
hook reports to the registry and makedumpfile runs with the registry's MAKEDUMP_ARGS.

Too slow for `make test` (debootstrap alone took 4 min here, then a systemd boot twice under
TCG): `make lab-debian` runs it (tests/lab/debian_install.py). What the image needs beyond
the README is the lab's machine: a hostname, an fstab, DHCP on the virtio NIC, initramfs
modules for virtio (MODULES=list: mkinitramfs cannot probe a chroot), the unit that crashes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from agents import build_reporter
from tests.lab.lab import REPO, qemu_command
from tests.lab.packages import LabError, cache_dir, run

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "udev",
    "kmod",
    "kdump-tools",
    "kexec-tools",
    "makedumpfile",
    "curl",
    "ca-certificates",
    "python3",
    "iproute2",
    "initramfs-tools",
    "linux-image-cloud-amd64",
)
INITRAMFS_MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "ext4", "crc32c_generic")
HOSTNAME = "lab-debian"


def base_rootfs() -> Path:
    """debootstrap's Debian 12 with kdump-tools and the cloud kernel, made once and cached."""
    root = cache_dir() / "debian" / "rootfs"
    if not (root / "etc" / "debian_version").exists():
        if shutil.which("debootstrap") is None:
            raise LabError("make lab-debian needs debootstrap: apt-get install debootstrap")
        partial = root.with_name("rootfs.tmp")
        shutil.rmtree(partial, ignore_errors=True)
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(partial),
                MIRROR,
            ]
        )
        partial.rename(root)
    return root


def kernel_version(root: Path) -> str:
    [vmlinuz] = sorted((root / "boot").glob("vmlinuz-*"))
    return vmlinuz.name.removeprefix("vmlinuz-")


def chroot(root: Path, *cmd: str) -> str:
    return run(
        ["chroot", str(root), *cmd],
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive"},
    ).stdout


def configure(base: Path, work: Path, registry_url: str, token: str) -> Path:
    """A copy of the base install, configured as agents/README.md says, pointed at the registry."""
    root = work / "rootfs"
    if root.exists():
        shutil.rmtree(root)
    run(["cp", "-a", str(base), str(root)])
    version = kernel_version(root)
    # The machine: name, root filesystem, DHCP on the virtio NIC (QEMU user networking), and
    # the virtio drivers in both initramfs images.
    (root / "etc" / "hostname").write_text(HOSTNAME + "\n")
    (root / "etc" / "fstab").write_text("/dev/vda / ext4 defaults 0 1\n")
    (root / "etc" / "systemd" / "network" / "10-lab.network").write_text(
        "[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n"
    )
    (root / "etc" / "initramfs-tools" / "conf.d" / "lab").write_text("MODULES=list\n")
    with (root / "etc" / "initramfs-tools" / "modules").open("a") as modules:
        modules.write("".join(f"{m}\n" for m in INITRAMFS_MODULES))
    chroot(root, "systemctl", "enable", "systemd-networkd.service", "systemd-networkd-wait-online.service")

    # agents/README.md, "Debian / Ubuntu: kdump-tools", step by step.
    run(
        [
            "install",
            "-m",
            "0755",
            str(REPO / "agents" / "kdump" / "crashreg-kdump.sh"),
            str(root / "usr" / "sbin" / "crashreg-kdump"),
        ]
    )
    run(["install", "-m", "0644", str(REPO / "agents" / "kdump" / "crashreg-kdump-upload.sh"),
         str(root / "usr" / "sbin" / "crashreg-kdump-upload.sh")])  # fmt: skip
    # make reporter && install -D -m 0755 dist/crashreg-report.pyz /usr/lib/crashreg/crashreg-report.pyz
    build_reporter.build(work / "crashreg-report.pyz")
    run(["install", "-D", "-m", "0755", str(work / "crashreg-report.pyz"),
         str(root / "usr" / "lib" / "crashreg" / "crashreg-report.pyz")])  # fmt: skip
    run(
        [
            "install",
            "-d",
            "-m",
            "0700",
            str(root / "etc" / "crashreg"),
            str(root / "var" / "spool" / "crashreg"),
        ]
    )
    (root / "etc" / "crashreg" / "token").write_text(token + "\n")
    (root / "etc" / "crashreg" / "token").chmod(0o600)
    (root / "etc" / "crashreg" / "reporter.conf").write_text(
        f'CRASHREG_URL="{registry_url}"\n'
        'CRASHREG_FINGERPRINTER="python3 /usr/lib/crashreg/crashreg-report.pyz fingerprint"\n'
        # The lab's one addition: lzo, so a full dump of the guest stays short under TCG.
        'CRASHREG_COMPRESSION="-l"\n'
    )
    kdump_config = (root / "usr" / "sbin" / "kdump-config").read_text()
    default_append = re.search(r'KDUMP_CMDLINE_APPEND=\$\{KDUMP_CMDLINE_APPEND:="([^"]*)"\}', kdump_config)
    if not default_append:
        raise LabError("kdump-config names no default KDUMP_CMDLINE_APPEND")
    with (root / "etc" / "default" / "kdump-tools").open("a") as defaults:
        defaults.write(
            f'\nKDUMP_CMDLINE_APPEND="{default_append.group(1)} '
            "crashreg.boot_id=$(cat /proc/sys/kernel/random/boot_id) "
            'crashreg.hostname=$(hostname) crashreg.kernel=$(uname -r)"\n'
        )
        defaults.write((REPO / "agents" / "kdump" / "kdump-tools-hook.sh").read_text())

    # The lab's crash: once kdump-tools has loaded the crash kernel.
    (root / "etc" / "systemd" / "system" / "lab-crash.service").write_text(
        "[Unit]\nDescription=crash lab: panic once the crash kernel is loaded\n"
        "After=kdump-tools.service network-online.target\nWants=network-online.target\n\n"
        "[Service]\nType=oneshot\n"
        "ExecStart=/bin/sh -c 'kdump-config status; echo LAB: crashing; echo c > /proc/sysrq-trigger'\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    chroot(root, "systemctl", "enable", "lab-crash.service")
    chroot(root, "update-initramfs", "-u", "-k", version)
    chroot(root, "/etc/kernel/postinst.d/kdump-tools", version)
    for link, target in (
        ("vmlinuz", f"/boot/vmlinuz-{version}"),
        ("initrd.img", f"/var/lib/kdump/initrd.img-{version}"),
    ):
        (root / "var" / "lib" / "kdump" / link).symlink_to(target)
    return root


def make_disk(root: Path, path: Path, size_mb: int = 4096) -> Path:
    run(["mkfs.ext4", "-q", "-F", "-d", str(root), str(path), f"{size_mb}M"])
    return path


def boot(root: Path, disk: Path, log: Path, memory_mb: int = 1024, timeout_s: float = 1500) -> str:
    """Boot, crash, dump, and the reboot QEMU refuses: the whole serial console."""
    version = kernel_version(root)
    cmdline = "root=/dev/vda rw console=ttyS0 crashkernel=256M panic=1 systemd.show_status=1"
    cmd = qemu_command(
        root / "boot" / f"vmlinuz-{version}",
        root / "boot" / f"initrd.img-{version}",
        cmdline,
        disk,
        memory_mb,
    )
    with log.open("wb") as out:
        done = subprocess.run(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
        )
    console = log.read_text(errors="replace")
    if done.returncode != 0:
        raise LabError(f"QEMU exited {done.returncode}:\n{console[-4000:]}")
    return console
