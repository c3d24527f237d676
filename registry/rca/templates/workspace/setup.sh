#!/bin/sh
# Triage workspace setup: put each dump of this bundle beside its kernel's debug info, so
# `drgn -q -c <dump> -s <vmlinux> inspect-dump.py` (the commands AGENTS.md lists) can run.
# Runs on a Debian/Ubuntu machine as is (no container engine needed), or inside the
# Containerfile next to it. Run it in the bundle directory (bundle.json beside it):
#
#   sh setup.sh
#
# For every kernel in bundle.json's `dumps`: its vmlinux at debug/<kernel_version>/vmlinux,
# fetched from the registry's debuginfod (bundle.json's `debuginfod`) by the crashed kernel's
# build-id (`kernel_build_id`, from its reports' VMCOREINFO) with curl and the headers file
# below; when no build-id is known or the registry has no such file, `apt-get download` its
# debug package (the first of `debuginfo[].debug_packages` that apt knows) and unpack only the
# vmlinux. Each loaded module a DPU report named (`modules`, with its build-id) is fetched the
# same way to debug/<kernel_version>/modules/<name>.ko (inspect-dump.py loads them). And the
# kernel's exact source is unpacked to src/<kernel_version>/
# (Debian and Ubuntu ship it as linux-source-<major.minor> of the very version of the kernel's
# image package). For every dump: a capture target readable under
# $CRASHREG_DUMP_ROOT (default /: the crashed host's filesystem, or a copy of it) is linked as
# dumps/<event>-<capture>.vmcore; else the dump store's short-lived download link the bundle
# carries (download_url; a compressed one is unpacked) or an http(s) capture uri is
# downloaded there with curl. An expired link: fetch the bundle again.
#
# Environment: CRASHREG_WORKSPACE_DEBS (where .deb files are kept; default debug/debs),
# CRASHREG_DUMP_ROOT, CRASHREG_WORKSPACE_SOURCE=0 to skip the source (140 MB download,
# 1.3 GB unpacked), CRASHREG_TOKEN (a read token: written to debuginfod-headers for the
# registry's debuginfod). Exit status 1 when a dump, its debug info or its source is still missing.
set -u
cd "$(dirname "$0")" || exit 1
debs=${CRASHREG_WORKSPACE_DEBS:-debug/debs}
dump_root=${CRASHREG_DUMP_ROOT:-/}
mkdir -p "$debs" dumps debug
missing=0

# The registry's debuginfod (AGENTS.md): elfutils' clients send the header this file holds.
if [ -n "${CRASHREG_TOKEN:-}" ]; then
    (umask 077 && printf 'Authorization: Bearer %s\n' "$CRASHREG_TOKEN" > debuginfod-headers)
fi

# One line per dump: event, capture, kernel, the kernel's folder (under debug/ and src/), dump
# file, vmlinux, target, uri, download link, encoding, kernel build-id, modules
# (name=build-id,...), debug packages. Dumps whose kernel build-id is known first: another dump
# of the same kernel then finds its vmlinux in place. A field's tabs and line breaks (a
# reporter's text) are spaces: one dump, one line.
plan=$(python3 -c '
import json, re
bundle = json.load(open("bundle.json"))
packages = {d["kernel_version"]: d["debug_packages"] for d in bundle["debuginfo"]}
for d in sorted(bundle["dumps"], key=lambda d: d.get("kernel_build_id") is None):
    modules = ",".join(m["name"] + "=" + m["build_id"] for m in d.get("modules") or [])
    fields = [d["event_id"], d["capture_id"], d["kernel_version"], d["kernel_dir"], d["dump"], d["vmlinux"],
              d["target"] or "-", d["uri"] or "-", d.get("download_url") or "-", d.get("encoding") or "-",
              d.get("kernel_build_id") or "-", modules or "-", " ".join(packages.get(d["kernel_version"], []))]
    print("\t".join(re.sub(r"[\t\n\r\v\f\x1c-\x1e\x85\u2028\u2029]", " ", field) for field in fields))
') || { echo "setup.sh: cannot read bundle.json" >&2; exit 1; }
debuginfod=$(python3 -c 'import json; print(json.load(open("bundle.json"))["debuginfod"]["urls"].split()[0])') || debuginfod=

from_debuginfod() {  # $1 build-id, $2 file: the registry's debuginfo for the build-id, or status 1
    [ -n "$debuginfod" ] && [ "$1" != - ] || return 1
    mkdir -p "$(dirname "$2")"
    set -- "$1" "$2" "${debuginfod%/}/buildid/$1/debuginfo"
    if [ -s debuginfod-headers ]; then
        curl -fsSL --connect-timeout 10 -H @debuginfod-headers -o "$2.tmp" "$3"
    else
        curl -fsSL --connect-timeout 10 -o "$2.tmp" "$3"
    fi || { rm -f "$2.tmp"; echo "setup.sh: $3 failed (a read token in \$CRASHREG_TOKEN?)" >&2; return 1; }
    mv "$2.tmp" "$2"
    echo "setup.sh: $2 from the registry's debuginfod (build-id $1)" >&2
}

module_debug_info() {  # $1 the kernel's folder, $2 name=build-id,...: each module's debug info, when held
    [ "$2" != - ] || return 0
    for module in $(printf '%s' "$2" | tr ',' ' '); do
        ko=debug/$1/modules/${module%%=*}.ko
        [ -s "$ko" ] || from_debuginfod "${module#*=}" "$ko" \
            || echo "setup.sh: no debug info for module ${module%%=*}: its frames stay addresses" >&2
    done
}
[ -n "$plan" ] || echo "setup.sh: this bundle names no completed capture: nothing to inspect" >&2

debug_info() {  # $1 kernel version, $2 vmlinux path, $3 build-id, $4... candidate packages
    version=$1 vmlinux=$2
    [ -s "$vmlinux" ] && return 0
    from_debuginfod "$3" "$vmlinux" && return 0
    shift 3
    for package in "$@"; do
        deb=$(ls "$debs/${package}"_*.deb 2>/dev/null | tail -n 1)
        if [ -z "$deb" ]; then
            (cd "$debs" && apt-get -o DPkg::Lock::Timeout=600 download "$package" >&2) || continue
            deb=$(ls "$debs/${package}"_*.deb 2>/dev/null | tail -n 1)
        fi
        [ -n "$deb" ] || continue
        mkdir -p "$(dirname "$vmlinux")"
        member=./usr/lib/debug/boot/vmlinux-$version
        if dpkg-deb --fsys-tarfile "$deb" | tar -xO "$member" > "$vmlinux.tmp" && [ -s "$vmlinux.tmp" ]; then
            mv "$vmlinux.tmp" "$vmlinux"
            echo "setup.sh: $vmlinux from $(basename "$deb")" >&2
            return 0
        fi
        rm -f "$vmlinux.tmp"
        echo "setup.sh: $(basename "$deb") holds no $member" >&2
    done
    echo "setup.sh: no debug info for $version (packages: ${*:-none known}); put its vmlinux at $vmlinux" >&2
    return 1
}

source_tree() {  # $1 kernel version, $2 its folder: its image package's source, unpacked to src/$2
    version=$1 tree=src/$2
    [ "${CRASHREG_WORKSPACE_SOURCE:-1}" = 0 ] && return 0
    [ -s "$tree/Makefile" ] && return 0
    build=$(apt-cache show "linux-image-$version" 2>/dev/null | sed -n 's/^Version: //p' | head -n 1)
    series=$(printf '%s' "$build" | cut -d. -f1,2)
    if [ -z "$build" ]; then
        echo "setup.sh: apt knows no linux-image-$version: fetch its source by the bundle's source reference" >&2
        return 1
    fi
    package=linux-source-$series
    deb=$(ls "$debs/${package}_$(printf '%s' "$build" | sed 's/:/%3a/')"_*.deb 2>/dev/null | tail -n 1)
    if [ -z "$deb" ]; then
        (cd "$debs" && apt-get -o DPkg::Lock::Timeout=600 download "$package=$build" >&2) || {
            echo "setup.sh: no $package=$build in apt's sources: fetch the bundle's source reference" >&2
            return 1
        }
        deb=$(ls "$debs/${package}"_*.deb 2>/dev/null | tail -n 1)
    fi
    mkdir -p "$tree.tmp"
    if dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/$package.tar.xz" | tar -xJ -C "$tree.tmp" --strip-components=1 \
            && [ -s "$tree.tmp/Makefile" ]; then
        rm -rf "$tree" && mv "$tree.tmp" "$tree"
        echo "setup.sh: $tree from $(basename "$deb") (the source of linux-image-$version $build)" >&2
        return 0
    fi
    rm -rf "$tree.tmp"
    echo "setup.sh: $(basename "$deb") holds no usable ./usr/src/$package.tar.xz" >&2
    return 1
}

tab=$(printf '\t')
printf '%s\n' "$plan" | while IFS=$tab read -r event capture version folder dump vmlinux target uri link encoding build_id modules packages; do
    [ -n "$event" ] || continue
    # shellcheck disable=SC2086
    debug_info "$version" "$vmlinux" "$build_id" $packages || missing=1
    module_debug_info "$folder" "$modules"
    source_tree "$version" "$folder" || missing=1
    if [ ! -e "$dump" ]; then
        if [ "$target" != - ] && [ -r "$dump_root/$target" ]; then
            ln -s "$(cd "$(dirname "$dump_root/$target")" && pwd)/$(basename "$target")" "$dump"
        elif [ "$link" != - ]; then
            if curl -fsSL -o "$dump.part" "$link"; then
                case "$encoding" in
                    -|identity) mv "$dump.part" "$dump" ;;
                    # gzip, zstd, xz, lz4, bzip2: each names the tool that unpacks it
                    *) "$encoding" -dc "$dump.part" > "$dump.tmp" && mv "$dump.tmp" "$dump" ;;
                esac
            else
                echo "setup.sh: event $event capture $capture: the download link failed (expired? fetch the bundle again)" >&2
            fi
            rm -f "$dump.part" "$dump.tmp"
        elif [ "$uri" != - ] && case "$uri" in http://*|https://*) true ;; *) false ;; esac; then
            curl -fsSL -o "$dump" "$uri" || rm -f "$dump"
        fi
    fi
    if [ -e "$dump" ]; then
        echo "setup.sh: event $event capture $capture: $dump" >&2
    else
        echo "setup.sh: event $event capture $capture: copy ${target#-} from the crashed host to $dump" >&2
        missing=1
    fi
    [ "$missing" = 0 ] || echo missing > debug/.missing
done
command -v drgn >/dev/null 2>&1 || { echo "setup.sh: drgn not found: apt-get install python3-drgn (or pip install drgn)" >&2; exit 1; }
if [ -e debug/.missing ]; then
    rm -f debug/.missing
    exit 1
fi
exit 0
