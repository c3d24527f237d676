#!/usr/bin/env bash
# What `make test` needs and does, said before it starts (README.md, "What make test needs and does").
cat >&2 <<TEXT
make test: set up, start what the tests talk to, lint, run the whole suite on SQLite and PostgreSQL.
  - .venv with the project and its dev extras (pip; about 510 MB installed)
  - PostgreSQL at ${CRASHREG_TEST_POSTGRES:-postgresql://postgres@127.0.0.1:5432/postgres} (a superuser, no
    password; another: CRASHREG_TEST_POSTGRES=postgresql://USER@HOST:PORT/postgres), started here if the
    local cluster is down; a database is created and dropped per run (CRASHREG_TEST_BACKENDS=sqlite for one)
  - system packages installed when missing (as root; else named): chromium, chromium-driver, qemu-system-x86,
    cpio, e2fsprogs, gcc, make, python3-drgn, gdb, elfutils, dash, busybox, curl, binutils, debuginfod, dwz,
    sqlite3 (about 107 MB before dependencies)
  - the crash lab downloads Debian's cloud kernel and its guest packages (about 29 MB, cached in
    ${CRASHREG_LAB_CACHE:-~/.cache/crashreg-lab}; nothing the second time), installs that kernel's headers
    (about 14 MB to download, 62 MB installed) and fetches its -dbg package for drgn (283 MB; the cache
    grows to about 1.2 GB)
TEXT
