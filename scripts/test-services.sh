#!/usr/bin/env bash
# Start what the test suite talks to: PostgreSQL (and the system packages some tests drive).
set -euo pipefail

if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 >&2

missing=()
# name-on-PATH:debian-package; chromium drives the web pages test, dash/busybox the kdump hook;
# the crash lab (tests/lab) boots QEMU (TCG), packs initramfs images with cpio, makes and reads
# the guest disk with mkfs.ext4/debugfs, builds its module with gcc/make, reads dumps with drgn;
# the core handler's bounded cores are opened with gdb and eu-stack; the symbol tests serve debug
# files split with objcopy (binutils) from a real debuginfod and ask it with debuginfod-find, and
# share their DWARF with dwz as distributions do (the symbol store keeps the shared file); the
# backup test runs the sqlite3 shell (its online backup) as docs/operations.md does.
# (The kernel, its headers, kexec-tools and makedumpfile the lab fetches itself, cached.)
for pair in dash:dash busybox:busybox curl:curl chromium:chromium chromedriver:chromium-driver \
    qemu-system-x86_64:qemu-system-x86 cpio:cpio debugfs:e2fsprogs gcc:gcc make:make drgn:python3-drgn \
    gdb:gdb eu-stack:elfutils objcopy:binutils debuginfod:debuginfod debuginfod-find:debuginfod dwz:dwz \
    sqlite3:sqlite3; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >&2 && apt-get install -y -qq "${missing[@]}" >&2
  else
    echo "missing packages: ${missing[*]} (install them as root)" >&2
  fi
fi
