#!/bin/sh
# Triage workspace setup for a userspace signature: each sampled event's core that the dump
# store holds downloaded beside bundle.json (core.<event>-<capture>, as AGENTS.md's gdb
# commands name it, unpacked when stored compressed), and the header file the registry's
# debuginfod wants (debuginfod-headers, for DEBUGINFOD_HEADERS_FILE: AGENTS.md).
# Run it in the bundle directory with a read token:
#
#   CRASHREG_TOKEN=... sh setup.sh
#
# The download links are the registry's; a core's own is short-lived, asked for on each run.
# Exit status 1 when a core could not be fetched.
set -u
cd "$(dirname "$0")" || exit 1
if [ -z "${CRASHREG_TOKEN:-}" ]; then
    echo "setup.sh: set CRASHREG_TOKEN to a read token (the registry refuses downloads without one)" >&2
    exit 1
fi
TOKEN=$CRASHREG_TOKEN
export TOKEN
(umask 077 && printf 'Authorization: Bearer %s\n' "$TOKEN" > debuginfod-headers)

# One line per stored core: its file, then the shell lines that fetch it (bundle.json).
python3 -c '
import json
for event in json.load(open("bundle.json"))["events"]:
    for core in event["core_commands"]:
        if core["fetch"]:
            print(core["file"] + "\t" + core["fetch"])
' > cores.plan || { echo "setup.sh: cannot read bundle.json" >&2; exit 1; }
[ -s cores.plan ] || echo "setup.sh: no sampled event has a core in the dump store: work from bundle.json's frames" >&2

missing=0
tab=$(printf '\t')
while IFS="$tab" read -r file fetch; do
    if [ -s "$file" ]; then
        echo "setup.sh: $file is here" >&2
    elif sh -c "$fetch" && [ -s "$file" ]; then
        echo "setup.sh: $file downloaded" >&2
    else
        echo "setup.sh: $file could not be fetched (an expired link is asked for again on the next run)" >&2
        missing=1
    fi
done < cores.plan
rm -f cores.plan
exit $missing
