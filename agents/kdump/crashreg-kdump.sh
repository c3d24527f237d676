#!/bin/sh
# crashreg-kdump: the crash kernel's reporter (POSIX sh: dash, busybox ash).
#
# In the crash kernel, before the vmcore is saved: read the crashed kernel's log from
# /proc/vmcore, report it to the crash registry, and turn the answer (full / filtered / skip)
# into makedumpfile arguments. With no network the decision comes from the offline policy
# bundle baked into the initramfs, and the report is spooled for the post-boot resend
# (crashreg-report.pyz post-boot), which reuses the same report_id so the registry
# joins it instead of counting the crash twice. It never fails closed: whatever goes wrong,
# it still answers with a dump decision.
#
# Usage:
#   crashreg-kdump.sh [report]           decide; print the makedumpfile arguments on stdout
#                                        (empty line: skip), write CRASHREG_DECISION_FILE;
#                                        exit 0 to dump, 10 to skip (RHEL kdump_pre semantics)
#   crashreg-kdump.sh collect ARGS...    core_collector wrapper: makedumpfile <decided> ARGS...,
#                                        then the capture is recorded with the event and its
#                                        upload to the dump store spooled (or done now)
#   crashreg-kdump.sh fetch-bundle       refresh the offline policy bundle (booted host)
#   crashreg-kdump.sh guilty-function LOG...
#                                        the function the offline matcher reads from each
#                                        console log, one line each (empty: none)
#
# Configuration: $CRASHREG_CONF (default /etc/crashreg/reporter.conf), a sourced sh file of
# KEY=VALUE lines; see agents/README.md.

EXIT_DUMP=0
EXIT_SKIP=10

log() { printf 'crashreg-kdump: %s\n' "$*" >&2; }

# The one atomic write: stdin into $1 through a hidden file beside it, renamed over it, so a
# reader (a kdump hook, the post-boot agent) sees the old file or the new one, never half.
write_atomically() {
    case "$1" in */*) into=${1%/*} ;; *) into=. ;; esac
    mkdir -p "$into" 2>/dev/null
    if cat > "$into/.${1##*/}.tmp" && mv "$into/.${1##*/}.tmp" "$1"; then
        return 0
    fi
    rm -f "$into/.${1##*/}.tmp"  # a full disk: nothing half-written left to fill it further
    return 1
}

load_config() {
    CRASHREG_URL=
    CRASHREG_TOKEN_FILE=/etc/crashreg/token
    CRASHREG_CA_FILE=
    CRASHREG_CONNECT_TIMEOUT=5
    CRASHREG_MAX_TIME=20
    CRASHREG_RETRIES=3
    CRASHREG_RETRY_DELAY=1
    CRASHREG_DEADLINE=60
    CRASHREG_SPOOL_DIR=/var/spool/crashreg
    CRASHREG_BUNDLE=/etc/crashreg/policy-bundle.txt
    CRASHREG_FINGERPRINTER=
    CRASHREG_VMCORE=/proc/vmcore
    CRASHREG_DMESG_FILE=
    CRASHREG_MAKEDUMPFILE=makedumpfile
    CRASHREG_VMCORE_DMESG=vmcore-dmesg
    CRASHREG_COMPRESSION=-c
    CRASHREG_FILTERED_LEVEL=31
    CRASHREG_FALLBACK_ACTION=filtered
    CRASHREG_MAX_LOG_BYTES=524288
    CRASHREG_CMDLINE=/proc/cmdline
    CRASHREG_DECISION_FILE=/run/crashreg/decision.env
    CRASHREG_HOSTNAME=
    CRASHREG_UPLOAD_DUMPS=1
    CRASHREG_KDUMP_UPLOAD=spool
    for name in $SECONDS_SETTINGS $COUNT_SETTINGS; do eval "default_$name=\$$name"; done
    conf=${CRASHREG_CONF:-/etc/crashreg/reporter.conf}
    # A config with a syntax error would end the shell when sourced: try it in a subshell, and
    # if it fails, line by line, leaving out the lines that do not parse (as the Python
    # reporter reads it), so that one typo does not lose the registry's URL and the spool.
    # shellcheck disable=SC1090
    if [ ! -r "$conf" ]; then
        log "no readable config at $conf: offline decisions only"
    elif ( . "$conf" ) >/dev/null 2>&1; then
        . "$conf"
    else
        while IFS= read -r line || [ -n "$line" ]; do
            if ( eval "$line" ) >/dev/null 2>&1; then
                eval "$line"
            else
                log "config line '$line' ignored: it does not parse"
            fi
        done < "$conf"
    fi
    for name in $SECONDS_SETTINGS; do whole_number "$name" seconds; done
    for name in $COUNT_SETTINGS; do whole_number "$name" count; done
}

# The numeric settings, which shell arithmetic and test(1) take as whole numbers only (the
# Python reporter reads seconds as fractions): a fraction of seconds is rounded up, and
# anything else that is not a whole number is said once and the default taken.
SECONDS_SETTINGS="CRASHREG_CONNECT_TIMEOUT CRASHREG_MAX_TIME CRASHREG_RETRY_DELAY CRASHREG_DEADLINE"
COUNT_SETTINGS="CRASHREG_RETRIES CRASHREG_FILTERED_LEVEL CRASHREG_MAX_LOG_BYTES CRASHREG_UPLOAD_DUMPS"
whole_number() {
    eval "raw=\$$1"
    value=$(printf '%s' "$raw" | tr -d ' \t')
    round=0
    case "$2:$value" in
        *:|*:.|*:*[!0-9.]*|*:*.*.*|count:*.*) value=bad ;;
        *:*.*)
            case "${value#*.}" in *[1-9]*) round=1 ;; esac
            value=${value%%.*}
            value=${value:-0}
            ;;
    esac
    while case "$value" in 0?*) true ;; *) false ;; esac; do value=${value#0}; done
    case "$value" in
        *[!0-9]*|??????????*)
            eval "value=\$default_$1"
            if [ "$2" = seconds ]; then what="a number of seconds"; else what="a whole number"; fi
            log "$1='$raw' is not $what: $value taken"
            eval "$1=\$value"
            ;;
        *) eval "$1=$((value + round))" ;;
    esac
}

# --- JSON -----------------------------------------------------------------------------

# Print stdin as one JSON string literal, ASCII only. Bytes are decoded as UTF-8: valid
# sequences become \uXXXX (surrogate pairs above the BMP), invalid bytes U+FFFD, control
# characters \u00XX, so any console log (serial noise, cut multibyte characters) yields
# valid JSON. $1 = "lines": every input line ends in \n; otherwise lines are joined by \n.
json_string() {
    tr -d '\000' | LC_ALL=C awk -v mode="$1" '
    BEGIN { for (i = 1; i < 256; i++) ord[sprintf("%c", i)] = i; printf "\"" }
    function escape(s,    out, n, i, c, b, need, cp, k, cb, ok) {
        if (s !~ /[^ -~]/ && s !~ /["\\]/) return s
        out = ""; n = length(s)
        for (i = 1; i <= n; i++) {
            c = substr(s, i, 1); b = ord[c]
            if (b >= 32 && b < 127) { out = out ((c == "\"" || c == "\\") ? "\\" c : c); continue }
            if (b < 128) { out = out sprintf("\\u%04x", b); continue }
            if (b >= 194 && b <= 223) { need = 1; cp = b - 192 }
            else if (b >= 224 && b <= 239) { need = 2; cp = b - 224 }
            else if (b >= 240 && b <= 244) { need = 3; cp = b - 240 }
            else { out = out "\\ufffd"; continue }
            ok = 1
            for (k = 1; k <= need; k++) {
                cb = ord[substr(s, i + k, 1)]
                if (cb < 128 || cb > 191) { ok = 0; break }
                cp = cp * 64 + cb - 128
            }
            if (ok && ((need == 2 && cp < 2048) || (need == 3 && (cp < 65536 || cp > 1114111)) \
                       || (cp >= 55296 && cp <= 57343))) ok = 0
            if (!ok) { out = out "\\ufffd"; continue }
            i += need
            if (cp < 65536) out = out sprintf("\\u%04x", cp)
            else { cp -= 65536; out = out sprintf("\\u%04x\\u%04x", 55296 + int(cp / 1024), 56320 + cp % 1024) }
        }
        return out
    }
    {
        if (mode == "lines") printf "%s\\n", escape($0)
        else { printf "%s%s", (NR > 1 ? "\\n" : ""), escape($0) }
    }
    END { printf "\"" }'
}

# A JSON value for a shell string: null when empty.
json_value() {
    if [ -z "$1" ]; then printf 'null'; else printf '%s' "$1" | json_string; fi
}

# Single-quote a value for a sourced sh file.
sh_quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# --- what crashed ---------------------------------------------------------------------

# crashreg.<name>=value from the crash kernel's command line (set at kexec load time from
# the crashed kernel's own values; see agents/README.md).
cmdline_value() {
    [ -r "$CRASHREG_CMDLINE" ] || return 0
    tr ' ' '\n' < "$CRASHREG_CMDLINE" | sed -n "s/^crashreg\\.$1=//p" | head -n 1
}

extract_log() {
    raw=$work/dmesg.raw
    if [ -n "$CRASHREG_DMESG_FILE" ]; then
        cat "$CRASHREG_DMESG_FILE" > "$raw" 2>/dev/null || : > "$raw"
    elif "$CRASHREG_MAKEDUMPFILE" --dump-dmesg "$CRASHREG_VMCORE" "$raw" >/dev/null 2>&1 && [ -s "$raw" ]; then
        :
    elif "$CRASHREG_VMCORE_DMESG" "$CRASHREG_VMCORE" > "$raw" 2>/dev/null && [ -s "$raw" ]; then
        :
    else
        log "could not read the kernel log from $CRASHREG_VMCORE"
        : > "$raw"
    fi
    size=$(wc -c < "$raw" | tr -d ' ')
    # Never past the contract's bound on console_log (1 MiB: a longer one is a 400).
    limit=$CRASHREG_MAX_LOG_BYTES
    [ "$limit" -le 1048576 ] 2>/dev/null || limit=1048576
    if [ "$size" -gt "$limit" ]; then
        # Keep the tail (the crash is at the end) and drop the partial first line.
        tail -c "$limit" "$raw" | sed 1d > "$work/console.log"
    else
        cp "$raw" "$work/console.log"
    fi
}

# Seconds since boot of the crashed kernel: the last "[ 1234.567890]" stamp in its log.
log_uptime() {
    sed -n 's/^\[ *\([0-9][0-9]*\)\.[0-9]*\].*/\1/p' "$work/console.log" | tail -n 1
}

log_kernel_version() {
    sed -n 's/.*Linux version \([^ ]*\).*/\1/p' "$work/console.log" | head -n 1
}

detect_hostname() {
    host=$CRASHREG_HOSTNAME
    [ -n "$host" ] || host=$(cmdline_value hostname)
    [ -n "$host" ] || host=$(hostname 2>/dev/null)
    [ -n "$host" ] || host=$(cat /proc/sys/kernel/hostname 2>/dev/null)
    [ -n "$host" ] || host=unknown
}

# VMCOREINFO's KEY=VALUE words, one a line, kept in the work dir: read once from the notes at
# the head of the vmcore (after its ELF and program headers), so only its first MiB is read,
# never the memory after it. Empty when there is no vmcore.
VMCOREINFO_HEAD_KIB=1024
read_vmcoreinfo() {
    dd if="$CRASHREG_VMCORE" bs=1024 count=$VMCOREINFO_HEAD_KIB 2>/dev/null \
        | tr -c '0-9A-Za-z=-' '\n' | grep '=' > "$work/vmcoreinfo"
}

# A VMCOREINFO line's value ($1: its key, $2: the value's characters); empty when none.
vmcore_value() {
    sed -n "s/^$1=\\($2$2*\\)\$/\\1/p" "$work/vmcoreinfo" 2>/dev/null | head -n 1
}

# When the host crashed: VMCOREINFO's CRASHTIME= (the crashed kernel's clock as it crashed),
# the same for every run on one vmcore, so that a rerun whose kept body is gone sends the body
# the first run sent (a different body under one report_id is a 409); within 30 days before
# and a day after the crash kernel's clock, as the Python reporter takes it (a crashed clock
# far off would make a report the registry refuses). Else now.
crash_time() {
    now=$(date -u +%s)
    crashed=$(vmcore_value CRASHTIME '[0-9]' | cut -c 1-12)
    if [ -n "$crashed" ] && [ "$crashed" -ge $((now - 2592000)) ] && [ "$crashed" -le $((now + 86400)) ] \
        && date -u -d "@$crashed" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null; then
        return
    fi
    date -u +%Y-%m-%dT%H:%M:%SZ
}

detect_host() {
    detect_hostname
    read_vmcoreinfo
    kernel_build_id=$(vmcore_value BUILD-ID '[0-9a-f]')
    boot_id=$(cmdline_value boot_id)
    kernel=$(cmdline_value kernel)
    [ -n "$kernel" ] || kernel=$(log_kernel_version)
    [ -n "$kernel" ] || kernel=$(uname -r)
}

local_fingerprint() {
    [ -n "$CRASHREG_FINGERPRINTER" ] || return 0
    # shellcheck disable=SC2086
    $CRASHREG_FINGERPRINTER "$work/console.log" 2>/dev/null | head -n 1
}

# The report's idempotency key: one per crashed boot, so a rerun or resend replays it.
make_report_id() {
    if [ -n "$boot_id" ]; then
        report_id="kdump-$boot_id"
    else
        report_id="kdump-$host-$(cat /proc/sys/kernel/random/uuid 2>/dev/null || date -u +%s)"
    fi
    report_id=$(printf '%s' "$report_id" | tr -c 'A-Za-z0-9._-' '_' | cut -c 1-128)
}

build_report() {
    uptime=$(log_uptime)
    {
        printf '{"report_id":%s,"source":"crash_kernel","crashed_at":"%s",' \
            "$(json_value "$report_id")" "$(crash_time)"
        printf '"host":{"hostname":%s,"kernel_version":%s},' "$(json_value "$host")" "$(json_value "$kernel")"
        printf '"boot_id":%s,"uptime_s":%s,"fingerprint":%s,' \
            "$(json_value "$boot_id")" "${uptime:-null}" "$(json_value "$fingerprint")"
        [ -z "$kernel_build_id" ] || printf '"kernel_build_id":"%s",' "$kernel_build_id"
        printf '"console_log":'
        json_string lines < "$work/console.log"
        printf '}\n'
    } > "$work/report.json"
}

# --- asking the registry --------------------------------------------------------------

# The token file's token, read as the Python reporter reads it (config.read_token): a UTF-8
# byte-order mark and blanks (spaces, tabs, CR, LF) around it left out.
token_of() {
    bom=$(printf '\357\273\277')
    tr '\t\r\n' '   ' < "$1" | LC_ALL=C sed "s/^ *//; s/^$bom//; s/^ *//; s/ *\$//"
}

# The Authorization header line for the token file's token; none (said) when the file is
# unreadable or holds what no token has (printable ASCII without spaces): the registry's 401
# then keeps the report in the spool.
auth_header() {
    if [ ! -r "$CRASHREG_TOKEN_FILE" ]; then
        log "token file $CRASHREG_TOKEN_FILE unreadable"
        return 0
    fi
    token=$(token_of "$CRASHREG_TOKEN_FILE")
    case "$token" in
        '') ;;
        *[!!-~]*) log "token file $CRASHREG_TOKEN_FILE holds characters no token has: sent without a token" ;;
        *) printf 'Authorization: Bearer %s\n' "$token" ;;
    esac
}

# POST $2 (a JSON file) to $1 under /api/v1; on a 2xx answer leave it in $work/answer.json
# and return 0. Retries on network errors, 408, 429 and 5xx, each after retry_wait's wait, all
# within one deadline: $delivery_ends (epoch seconds) when the caller set one for its whole
# delivery, else CRASHREG_DEADLINE seconds from now. Each attempt's curl timeouts are clipped
# to what is left, and a wait that would reach the deadline is not waited: the caller falls back.
post_json() {
    [ -n "$CRASHREG_URL" ] || return 1
    command -v curl >/dev/null 2>&1 || { log "curl not found"; return 1; }
    auth_header > "$work/headers"
    printf 'Content-Type: application/json\n' >> "$work/headers"
    url=${CRASHREG_URL%/}/api/v1$1
    set -- --silent --show-error --output "$work/answer.json" --write-out '%{http_code}' \
        --dump-header "$work/answer.headers" --header "@$work/headers" --data-binary "@$2"
    [ -z "$CRASHREG_CA_FILE" ] || set -- "$@" --cacert "$CRASHREG_CA_FILE"
    ends=${delivery_ends:-$(($(date +%s) + CRASHREG_DEADLINE))}
    attempt=0
    delay=$CRASHREG_RETRY_DELAY
    while :; do
        left=$((ends - $(date +%s)))
        [ "$left" -ge 1 ] || left=1
        connect=$CRASHREG_CONNECT_TIMEOUT max_time=$CRASHREG_MAX_TIME
        [ "$connect" -le "$left" ] || connect=$left
        [ "$max_time" -le "$left" ] || max_time=$left
        : > "$work/answer.headers"
        # --noproxy: the registry directly, as the Python reporters reach it (agents/README.md)
        status=$(curl "$@" --noproxy '*' --connect-timeout "$connect" --max-time "$max_time" "$url" \
            2>"$work/curl.err")
        rc=$?
        retry_after=
        case "$rc:$status" in
            0:2??) return 0 ;;
            0:408|0:429|0:5??)
                log "registry answered HTTP $status"
                retry_after=$(tr -d '\r' < "$work/answer.headers" | tr 'A-Z' 'a-z' \
                    | sed -n 's/^retry-after: *\([0-9]\{1,9\}\) *$/\1/p' | tail -n 1)
                ;;
            0:*) log "registry refused it: HTTP $status $(head -c 300 "$work/answer.json")"; return 1 ;;
            *) log "curl exit $rc: $(head -n 1 "$work/curl.err")" ;;
        esac
        attempt=$((attempt + 1))
        [ "$attempt" -le "$CRASHREG_RETRIES" ] || return 1
        wait=$(retry_wait "$delay" "$retry_after")
        if [ $(($(date +%s) + wait)) -ge "$ends" ]; then
            log "no attempt after a wait of $wait s: past the delivery's deadline (CRASHREG_DEADLINE, $CRASHREG_DEADLINE s)"
            return 1
        fi
        sleep "$wait"
        delay=$((delay * 2))
    done
}

# Seconds before the next attempt, as the Python reporter's client.retry_wait in whole
# seconds: the answer's Retry-After ($2) when it has one, else half the backoff delay ($1);
# plus 0 to $1 seconds of jitter (from the kernel's random uuid, else the pid), so that a
# fleet's hosts, failed or told alike, do not come back in lockstep.
retry_wait() {
    random=$(cut -c 1-4 /proc/sys/kernel/random/uuid 2>/dev/null)
    case "$random" in [0-9a-f][0-9a-f][0-9a-f][0-9a-f]) random=$((0x$random)) ;; *) random=$$ ;; esac
    printf '%s\n' $((${2:-$(($1 / 2))} + random % ($1 + 1)))
}

# POST the report. Refused as too large, it is sent again with its console log's newer half,
# down to the last MIN_LOG_BYTES (the crash is at the end): the crash reaches the registry
# rather than not at all. A 413: within the contract's 1 MiB, a log can pass the registry's
# body limit once written as JSON, six bytes a control character. A 400 naming console_log:
# each byte that is not UTF-8 is U+FFFD, three bytes, so a noisy tail can pass the 1 MiB.
MIN_LOG_BYTES=16384
post_report() {
    delivery_ends=$(($(date +%s) + CRASHREG_DEADLINE))  # one deadline, the slimmer bodies' too
    post_within_limit
    sent=$?
    delivery_ends=
    return $sent
}

post_within_limit() {
    while ! post_json /reports "$work/report.json"; do
        size=$(wc -c < "$work/console.log" | tr -d ' ')
        case "$status" in
            413) ;;
            400) grep -q '"console_log"' "$work/answer.json" || return 1 ;;
            *) return 1 ;;
        esac
        [ "$size" -gt "$MIN_LOG_BYTES" ] || return 1
        tail -c $((size / 2)) "$work/console.log" | sed 1d > "$work/console.half"
        mv "$work/console.half" "$work/console.log"
        log "the registry refused the report as too large: sending it without the older half of its console log"
        build_report
    done
}

# Read the capture answer out of the registry's (flat, machine-written) JSON.
parse_answer() {
    answer=$(tr -d '\n' < "$work/answer.json")
    capture=${answer#*\"capture\":}
    action=$(printf '%s' "$capture" | sed -n 's/.*"action": *"\([a-z]*\)".*/\1/p')
    dump_level=$(printf '%s' "$capture" | sed -n 's/.*"dump_level": *\([0-9][0-9]*\).*/\1/p')
    reason=$(printf '%s' "$capture" | sed -n 's/.*"reason": *"\([^"]*\)".*/\1/p')
    event_id=$(printf '%s' "$answer" | sed -n 's/.*"event_id": *"\([^"]*\)".*/\1/p')
    decided_by=registry
    case "$action" in full|filtered|skip) return 0 ;; esac
    log "unreadable answer from the registry"
    return 1
}

# The literals the signature engine scans a console log for (registry/fingerprint/patterns.py
# TRIGGERS; tests/agents/test_kdump_sh.py holds the two equal): every crash header it knows
# holds one, so a log holding none has no crash the engine would recognise.
CRASH_TRIGGERS='BUG
WARNING:
INFO:
UBSAN:
general protection
Unhandled fault
nable to handle
divide
Internal error
stack segment
Alignment trap
invalid opcode
Oops
LOCKUP
panic
PANIC
Hardware Error
EDAC
AER:
NETDEV
Xid
VFS:
unregister_netdevice
SYZF'

holds_crash_trigger() {
    printf '%s\n' "$CRASH_TRIGGERS" > "$work/triggers" && grep -F -q -f "$work/triggers" "$1" 2>/dev/null
}

# The offline bundle in its text form (GET /api/v1/policy-bundle?format=text, baked into the
# initramfs): "fingerprint<TAB>action<TAB>dump_level|-<TAB>function|-<TAB>title" per known
# signature, after a "#no_signature<TAB>action<TAB>dump_level|-<TAB>-<TAB>reason" line: the
# answer for a log with no recognisable crash (the budget of reports without a signature).
# Matched by the local fingerprint when a fingerprinter is configured; a log with none of the
# engine's triggers takes the #no_signature line; otherwise the guilty function decides, when
# every bundle entry for that function agrees on the action.
bundle_decision() {
    decided_by=fallback
    action=$CRASHREG_FALLBACK_ACTION
    dump_level=
    reason="no answer from the registry and no policy bundle"
    [ -r "$CRASHREG_BUNDLE" ] || return 0
    decided_by=bundle
    row=
    if [ -n "$fingerprint" ]; then
        row=$(grep "^$fingerprint	" "$CRASHREG_BUNDLE" | head -n 1)
        reason="offline: policy bundle entry for fingerprint $fingerprint"
    elif ! holds_crash_trigger "$work/console.log"; then
        row=$(grep "^#no_signature	" "$CRASHREG_BUNDLE" | head -n 1)
        reason="offline: $(printf '%s\n' "$row" | cut -f 5)"
    else
        function=$(guilty_function "$work/console.log")
        if [ -n "$function" ]; then
            rows=$(grep -v '^#' "$CRASHREG_BUNDLE" | awk -F '	' -v f="$function" '$4 == f')
            if [ -n "$rows" ] && [ "$(printf '%s\n' "$rows" | cut -f 2,3 | sort -u | wc -l)" -eq 1 ]; then
                row=$(printf '%s\n' "$rows" | head -n 1)
                reason="offline: policy bundle entries for function $function"
            fi
        fi
    fi
    if [ -z "$row" ]; then
        action=full
        reason="offline: crash not in the policy bundle: a new bug"
        return 0
    fi
    action=$(printf '%s\n' "$row" | cut -f 2)
    dump_level=$(printf '%s\n' "$row" | cut -f 3)
    [ "$dump_level" != - ] || dump_level=
    case "$action" in full|filtered|skip) ;; *) action=full ;; esac
}

# The first guilty-looking function in a console log (RIP/PC line, or "... in func" of a
# sanitizer header), named as the engine names functions: the offline matcher when no
# fingerprinter runs.
guilty_function() {
    sed -n -e 's/.*BUG: [A-Za-z]*: [a-z-]* in \([A-Za-z_][A-Za-z0-9_.$]*\).*/\1/p' \
        -e 's/.*RIP: [0-9a-f]*:\([A-Za-z_][A-Za-z0-9_.$]*\)+0x.*/\1/p' \
        -e 's/.*pc : \([A-Za-z_][A-Za-z0-9_.$]*\)+0x.*/\1/p' "$1" \
        | head -n 1 | function_name
}

# A kernel symbol (one a line) as registry/fingerprint/frames.py canonical_function names it:
# it ends at its first "."; an Itanium-mangled name (C++, legacy Rust) is demangled to its
# qualified name; a syscall loses its wrapper prefix (the shortest name one removal gives,
# SYSCALL_PREFIXES). tests/agents/test_kdump_sh.py holds the two to one answer.
function_name() {
    awk 'BEGIN { n = split("SYSC_ SyS_ sys_ __x64_ __ia32_ __arm64_ ____sys_ ___sys_ __sys_ __se_ __se_sys_ __do_sys_ compat_SYSC_ compat_SyS_ ksys_", prefix, " ") }
    function demangle(name,    nested, at, count, digits, size, part, i, out) {
        nested = substr(name, 1, 3) == "_ZN"
        at = nested ? 4 : 3
        count = 0
        while (at <= length(name)) {
            digits = ""
            while (substr(name, at, 1) ~ /[0-9]/) { digits = digits substr(name, at, 1); at++ }
            if (digits == "") break
            size = digits + 0
            part[++count] = substr(name, at, size)
            at += size
            if (!nested) break
        }
        if (count > 0 && length(part[count]) == 17 && part[count] ~ /^h[0-9a-f]+$/) count--
        if (count == 0) return name
        out = part[1]
        for (i = 1; i <= count; i++) {
            if (part[i] == "") return name
            if (i > 1) out = out "::" part[i]
        }
        return out
    }
    {
        name = $0
        sub(/\..*/, "", name)
        if (substr(name, 1, 2) == "_Z") name = demangle(name)
        best = name
        for (i = 1; i <= n; i++)
            if (substr(name, 1, length(prefix[i])) == prefix[i] && length(name) - length(prefix[i]) < length(best))
                best = substr(name, length(prefix[i]) + 1)
        print (best == "" ? name : best)
    }'
}

# Keep the exact body in $CRASHREG_SPOOL_DIR/$1 (atomically): "." waits for the post-boot
# resend, "sent" lets a rerun for the same crash replay what the registry already has.
keep_report() {
    write_atomically "$CRASHREG_SPOOL_DIR/$1/$report_id.json" < "$work/report.json" 2>/dev/null
}

# --- the answer as makedumpfile arguments ---------------------------------------------

makedumpfile_args() {
    case "$action" in
        full) printf '%s -d 0' "$CRASHREG_COMPRESSION" ;;
        filtered) printf '%s -d %s' "$CRASHREG_COMPRESSION" "${dump_level:-$CRASHREG_FILTERED_LEVEL}" ;;
        skip) ;;
    esac
}

write_decision() {
    args=$(makedumpfile_args)
    # The level makedumpfile is given: a filtered answer's, else the config's filtered level.
    level=$dump_level
    [ "$action" = filtered ] && level=${dump_level:-$CRASHREG_FILTERED_LEVEL}
    {
        printf 'CRASHREG_ACTION=%s\n' "$(sh_quote "$action")"
        printf 'CRASHREG_DUMP_LEVEL=%s\n' "$(sh_quote "$level")"
        printf 'CRASHREG_REASON=%s\n' "$(sh_quote "$reason")"
        printf 'CRASHREG_DECIDED_BY=%s\n' "$(sh_quote "$decided_by")"
        printf 'CRASHREG_EVENT_ID=%s\n' "$(sh_quote "$event_id")"
        printf 'CRASHREG_REPORT_ID=%s\n' "$(sh_quote "$report_id")"
        printf 'CRASHREG_MAKEDUMPFILE_ARGS=%s\n' "$(sh_quote "$args")"
        # kdump-tools (Debian/Ubuntu) reads MAKEDUMP_ARGS.
        printf 'MAKEDUMP_ARGS=%s\n' "$(sh_quote "$args")"
    } | write_atomically "$CRASHREG_DECISION_FILE" || log "could not write $CRASHREG_DECISION_FILE"
    log "decision: $action${dump_level:+ (dump level $dump_level)} by $decided_by: $reason"
    printf '%s\n' "$args"
}

report() {
    umask 077
    event_id=
    report_id=
    if ! work=$(mktemp -d "${TMPDIR:-/tmp}/crashreg.XXXXXX"); then
        log "no temp dir: no report, fallback decision"
        action=$CRASHREG_FALLBACK_ACTION dump_level='' decided_by=fallback reason="reporter could not run"
        write_decision
        return $EXIT_DUMP
    fi
    trap 'rm -rf "$work"' EXIT
    extract_log
    detect_host
    make_report_id
    fingerprint=$(local_fingerprint)
    # A rerun for the same crash replays the body it kept, byte for byte.
    if ! cp "$CRASHREG_SPOOL_DIR/$report_id.json" "$work/report.json" 2>/dev/null \
        && ! cp "$CRASHREG_SPOOL_DIR/sent/$report_id.json" "$work/report.json" 2>/dev/null; then
        build_report
    fi
    if post_report && parse_answer; then
        keep_report sent || log "could not keep the sent report"
        rm -f "$CRASHREG_SPOOL_DIR/$report_id.json"
    else
        bundle_decision
        if keep_report .; then
            log "spooled $report_id for the post-boot resend"
        else
            log "could not spool the report to $CRASHREG_SPOOL_DIR"
        fi
    fi
    write_decision
    [ "$action" = skip ] && return $EXIT_SKIP
    return $EXIT_DUMP
}

# Refresh the text bundle (run periodically on the booted host, before rebuilding the kdump
# initramfs); an unchanged bundle is a 304 and leaves the file alone.
fetch_bundle() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/crashreg.XXXXXX") || return 1
    trap 'rm -rf "$work"' EXIT
    umask 077
    auth_header > "$work/headers" || return 1
    set -- --silent --show-error --fail --connect-timeout "$CRASHREG_CONNECT_TIMEOUT" \
        --max-time "$CRASHREG_MAX_TIME" --header "@$work/headers" --output "$work/bundle" \
        --write-out '%{http_code}' --retry "$CRASHREG_RETRIES"
    [ -z "$CRASHREG_CA_FILE" ] || set -- "$@" --cacert "$CRASHREG_CA_FILE"
    if [ -s "$CRASHREG_BUNDLE" ] && [ -r "$CRASHREG_BUNDLE.etag" ]; then
        set -- "$@" --header "If-None-Match: $(cat "$CRASHREG_BUNDLE.etag")"
    fi
    # Made for this host, the #no_signature line counts its own budget too (a hostname is a
    # DNS name: one with anything else is left out of the URL, and the fleet's budget decides).
    detect_hostname
    query="format=text"
    case "$host" in *[!A-Za-z0-9._-]*) ;; *) query="$query&host=$host" ;; esac
    status=$(curl "$@" --noproxy '*' --dump-header "$work/response" \
        "${CRASHREG_URL%/}/api/v1/policy-bundle?$query") || return 1
    case "$status" in
        304) log "policy bundle unchanged" ;;
        200)
            head -n 1 "$work/bundle" | grep -q '^#crashreg-policy-bundle	' || { log "not a policy bundle"; return 1; }
            write_atomically "$CRASHREG_BUNDLE" < "$work/bundle" || return 1
            sed -n 's/^[Ee][Tt][Aa][Gg]: *\([^\r]*\).*/\1/p' "$work/response" | tr -d '\r' > "$CRASHREG_BUNDLE.etag"
            log "policy bundle updated: $(grep -vc '^#' "$CRASHREG_BUNDLE") entries"
            ;;
        *) log "policy bundle: HTTP $status"; return 1 ;;
    esac
}

# --- dump uploads (the format of <report_id>.upload: agents/reporter/upload.py) ---------

# A path relative to the spool directory (both absolute, normalised): the post-boot agent
# finds the dump by it when the booted host mounts the disk elsewhere than the crash kernel.
relative_to_spool() {
    awk -v from="${CRASHREG_SPOOL_DIR%/}" -v to="$1" 'BEGIN {
        n = split(from, a, "/"); m = split(to, b, "/")
        for (i = 1; i <= n && i <= m && a[i] == b[i]; i++) ;
        out = ""
        for (j = i; j <= n; j++) out = out "../"
        for (j = i; j <= m; j++) out = out b[j] (j < m ? "/" : "")
        print out }'
}

# Spool the upload of a recorded capture's dump ($1 the capture id, $2 the dump): the state
# file's path on stdout. makedumpfile's kdump-compressed output and a gzipped dump go as they
# are; anything else (an ELF vmcore, -E) is gzipped into a copy beside it first.
prepare_upload() {
    source=$2
    encoding=identity
    magic=$(head -c 8 "$2" | od -An -tx1 | tr -d ' \n')
    case "$magic" in
        4b44554d50202020) ;;  # "KDUMP   "
        1f8b*) encoding=gzip ;;
        *)
            encoding=gzip
            source=$2.crashreg.gz
            gzip -1 -c "$2" > "$source.tmp" && mv "$source.tmp" "$source" || return 1
            ;;
    esac
    state=${CRASHREG_SPOOL_DIR%/}/$CRASHREG_REPORT_ID.upload
    printf 'capture_id=%s\npath=%s\nfrom_spool=%s\nencoding=%s\nbytes=%s\nraw_bytes=%s\npart_size=0\n' \
        "$1" "$source" "$(relative_to_spool "$source")" "$encoding" "$(wc -c < "$source" | tr -d ' ')" \
        "$(wc -c < "$2" | tr -d ' ')" | write_atomically "$state" && sync || return 1
    printf '%s\n' "$state"
}

# After a capture is recorded: spool its dump's upload for the post-boot agent
# (CRASHREG_KDUMP_UPLOAD=spool) or upload it now, from the crash kernel, with the uploader
# installed beside this script (now: the host stays down meanwhile; a cut upload is finished
# by the post-boot agent all the same).
upload_capture() {
    [ "$CRASHREG_UPLOAD_DUMPS" = 1 ] || return 0
    upload_state=$(prepare_upload "$1" "$2") || { log "could not spool the upload of $2"; return 0; }
    uploader=${0%/*}/crashreg-kdump-upload.sh
    if [ "$CRASHREG_KDUMP_UPLOAD" != now ]; then
        log "upload of $2 spooled for the post-boot agent"
    elif [ ! -r "$uploader" ]; then
        log "no $uploader: upload of $2 spooled for the post-boot agent"
    # shellcheck source=crashreg-kdump-upload.sh
    elif . "$uploader" && upload_dump "$upload_state"; then
        log "dump stored: $(sed -n 's/.*"uri": *"\([^"]*\)".*/\1/p' "$work/answer.json")"
    else
        log "upload cut: $upload_state waits for the post-boot agent"
    fi
}

# The core collector: makedumpfile with the decided arguments, then the capture is recorded
# with the event (or spooled as <report_id>.capture for the post-boot agent when offline).
collect() {
    # shellcheck disable=SC1090
    [ -r "$CRASHREG_DECISION_FILE" ] && . "$CRASHREG_DECISION_FILE"
    if [ "${CRASHREG_ACTION:-}" = skip ]; then
        log "registry decision is skip: no dump"
        return 0
    fi
    started=$(date +%s)
    # shellcheck disable=SC2086
    "$CRASHREG_MAKEDUMPFILE" ${CRASHREG_MAKEDUMPFILE_ARGS:-$CRASHREG_COMPRESSION -d $CRASHREG_FILTERED_LEVEL} "$@"
    dump_rc=$?
    [ -n "${CRASHREG_REPORT_ID:-}" ] || return $dump_rc
    duration=$(($(date +%s) - started))
    for target; do :; done  # makedumpfile's last argument is the dump file...
    case "$target" in "$CRASHREG_VMCORE"|/proc/vmcore) target= ;; esac  # ...unless -F (stdout)
    bytes=
    [ -z "$target" ] || bytes=$(wc -c < "$target" 2>/dev/null | tr -d ' ')
    dump_status=completed
    [ "$dump_rc" -eq 0 ] || dump_status=failed
    level=$(printf '%s\n' "$CRASHREG_MAKEDUMPFILE_ARGS" | sed -n 's/.*-d \([0-9][0-9]*\).*/\1/p')
    uptime=$(cut -d ' ' -f 1 /proc/uptime 2>/dev/null)
    umask 077
    work=$(mktemp -d "${TMPDIR:-/tmp}/crashreg.XXXXXX") || return $dump_rc
    trap 'rm -rf "$work"' EXIT
    printf '{"method":"makedumpfile","status":"%s","dump_level":%s,"bytes":%s,"duration_s":%s,"downtime_s":%s,"target":%s,"capture_key":%s}\n' \
        "$dump_status" "${level:-null}" "${bytes:-null}" "$duration" "${uptime:-null}" \
        "$(json_value "$target")" "$(json_value "$CRASHREG_REPORT_ID-makedumpfile")" > "$work/capture.json"
    if [ -n "${CRASHREG_EVENT_ID:-}" ] && post_json "/events/$CRASHREG_EVENT_ID/captures" "$work/capture.json"; then
        log "capture recorded: $dump_status, ${bytes:-?} bytes in ${duration}s"
        capture_id=$(tr -d '\n' < "$work/answer.json" | sed -n 's/.*"id": *"\([0-9][0-9]*\)".*/\1/p')
        if [ "$dump_status" = completed ] && [ -n "$target" ] && [ -n "$capture_id" ]; then
            upload_capture "$capture_id" "$target"
        fi
    elif [ "$dump_status" != completed ] \
        && grep -q '"status": *"completed"' "$CRASHREG_SPOOL_DIR/$CRASHREG_REPORT_ID.capture" 2>/dev/null; then
        # A later run that failed does not undo a dump an earlier one took: its record stays.
        log "capture not spooled: a completed capture of this crash waits in the spool already"
    else
        { printf '{"event_id":%s,"capture":' "$(json_value "${CRASHREG_EVENT_ID:-}")"
          tr -d '\n' < "$work/capture.json"; printf '}\n'; } | write_atomically "$CRASHREG_SPOOL_DIR/$CRASHREG_REPORT_ID.capture" \
            && log "capture spooled for the post-boot agent"
    fi
    return $dump_rc
}

load_config
case "${1:-report}" in
    report) report ;;
    collect) shift; collect "$@" ;;
    fetch-bundle) fetch_bundle ;;
    guilty-function) shift; for file in "$@"; do printf '%s\n' "$(guilty_function "$file")"; done ;;
    -h|--help) printf 'usage: %s [report | collect MAKEDUMPFILE-ARGS... | fetch-bundle | guilty-function LOG...]\n' "$0"
               printf 'config: %s (CRASHREG_CONF); agents/README.md says what each command does\n' \
                   "${CRASHREG_CONF:-/etc/crashreg/reporter.conf}" ;;
    *) log "usage: $0 [report | collect MAKEDUMPFILE-ARGS... | fetch-bundle | guilty-function LOG...]"; exit 2 ;;
esac
