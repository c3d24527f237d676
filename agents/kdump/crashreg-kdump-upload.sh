# crashreg-kdump-upload.sh: the crash kernel's upload of a dump, from its spooled state
# (<report_id>.upload, the format of agents/reporter/upload.py), when
# CRASHREG_KDUMP_UPLOAD=now. Sourced by crashreg-kdump.sh (installed beside it), which keeps
# what every crash kernel needs; this adds the multipart upload through the registry's
# pre-signed URLs (curl, awk, dd, md5sum), resumable: wherever it stops, the post-boot agent
# finishes from the state file. Uses the reporter's log, post_json, write_atomically and $work.
# shellcheck shell=sh

# A hex MD5 as base64 (Content-MD5), in awk: no base64 or xxd needed, no NUL byte in a shell string.
md5_base64() {
    printf '%s\n' "$1" | awk '{
        h = "0123456789abcdef"; b = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        n = 0
        for (i = 1; i < length($0); i += 2) v[n++] = (index(h, substr($0, i, 1)) - 1) * 16 + index(h, substr($0, i + 1, 1)) - 1
        out = ""
        for (i = 0; i < n; i += 3) {
            x = v[i] * 65536 + (i + 1 < n ? v[i + 1] : 0) * 256 + (i + 2 < n ? v[i + 2] : 0)
            out = out substr(b, int(x / 262144) + 1, 1) substr(b, int(x / 4096) % 64 + 1, 1)
            out = out (i + 1 < n ? substr(b, int(x / 64) % 64 + 1, 1) : "=") (i + 2 < n ? substr(b, x % 64 + 1, 1) : "=")
        }
        print out }'
}

state_value() { sed -n "s/^$2=//p" "$1" | head -n 1; }

# PUT part $3 (of $4 bytes each) of file $2 to URL $5 with its Content-MD5, check the ETag,
# then append "part N md5" to the state file $1 and sync: a reboot loses at most the part in flight.
put_part() {
    dd if="$2" of="$work/part" bs="$4" skip=$(($3 - 1)) count=1 2>/dev/null || return 1
    part_md5=$(md5sum "$work/part" | cut -c 1-32)
    set -- "$1" "$3" --silent --show-error --upload-file "$work/part" --header "Content-MD5: $(md5_base64 "$part_md5")" \
        --header "Content-Type: application/octet-stream" --header "Expect:" \
        --connect-timeout "$CRASHREG_CONNECT_TIMEOUT" --speed-limit 1024 --speed-time 60 \
        --dump-header "$work/part.headers" --output "$work/part.answer" --write-out '%{http_code}' "$5"
    [ -z "$CRASHREG_CA_FILE" ] || set -- "$@" --cacert "$CRASHREG_CA_FILE"
    state_file=$1 number=$2
    shift 2
    code=$(curl "$@" < /dev/null 2>"$work/curl.err") || { log "part $number: curl: $(head -n 1 "$work/curl.err")"; return 1; }
    [ "$code" = 200 ] || { log "part $number: HTTP $code $(head -c 300 "$work/part.answer")"; return 1; }
    etag=$(sed -n 's/^[Ee][Tt][Aa][Gg]: *"\{0,1\}\([0-9a-fA-F]*\).*/\1/p' "$work/part.headers" | tr 'A-F' 'a-f')
    if [ "${#etag}" = 32 ] && [ "$etag" != "$part_md5" ]; then
        log "part $number: the store's MD5 $etag is not the part's $part_md5"
        return 1
    fi
    printf 'part %s %s\n' "$number" "$part_md5" >> "$state_file" && sync
}

# Ask the registry to complete; its check of every part's length and MD5 decides.
complete_upload() {
    awk '$1 == "part" && NF == 3 && length($3) == 32 { md5[$2] = $3 }
        END { sep = ""; printf "{\"parts\":["
              for (n in md5) { printf "%s{\"number\":%s,\"md5\":\"%s\"}", sep, n, md5[n]; sep = "," }
              printf "]}\n" }' "$1" > "$work/complete.json"
    post_json "/captures/$(state_value "$1" capture_id)/upload/complete" "$work/complete.json"
}

# The upload a state file describes, from where it stopped: ask for URLs for the missing parts,
# PUT them, complete. Returns 1 when it stopped; the state stays for the post-boot agent.
upload_dump() {
    capture_id=$(state_value "$1" capture_id)
    source=$(state_value "$1" path)
    bytes=$(state_value "$1" bytes)
    rounds=0
    stored=
    while [ "$rounds" -lt 5 ]; do
        rounds=$((rounds + 1))
        part_size=$(state_value "$1" part_size)
        missing=
        if [ "${part_size:-0}" -gt 0 ]; then
            count=$(((bytes + part_size - 1) / part_size))
            [ "$count" -ge 1 ] || count=1
            missing=$(awk -v count="$count" '$1 == "part" && NF == 3 && length($3) == 32 { done[$2] = 1 }
                END { sep = ""; for (n = 1; n <= count && k < 200; n++) if (!(n in done)) { printf "%s%d", sep, n; sep = ","; k++ } }' "$1")
            if [ -z "$missing" ]; then
                complete_upload "$1" && { stored=1; break; }
                return 1  # refused parts: the post-boot agent resends what the registry names
            fi
        fi
        printf '{"bytes":%s,"raw_bytes":%s,"encoding":"%s"%s}\n' "$bytes" "$(state_value "$1" raw_bytes)" \
            "$(state_value "$1" encoding)" "${missing:+,\"parts\":[$missing]}" > "$work/upload.json"
        post_json "/captures/$capture_id/upload" "$work/upload.json" || return 1
        answer=$(tr -d '\n' < "$work/answer.json")
        case "$answer" in *'"state":"stored"'*|*'"state": "stored"'*) stored=1; break ;; esac
        if [ "${part_size:-0}" -le 0 ]; then
            part_size=$(printf '%s' "$answer" | sed -n 's/.*"part_size": *\([0-9][0-9]*\).*/\1/p')
            [ -n "$part_size" ] || { log "unreadable upload answer"; return 1; }
            sed "s/^part_size=.*/part_size=$part_size/" "$1" | write_atomically "$1" && sync || return 1
        fi
        # one part per line (the last one ended too, or read would drop it)
        printf '%s\n' "$answer" | sed -n 's/.*"part_urls": *\[\(.*\)\].*/\1/p' | tr '{' '\n' > "$work/part_urls"
        while read -r entry; do
            number=$(printf '%s' "$entry" | sed -n 's/.*"number": *\([0-9][0-9]*\).*/\1/p')
            part_url=$(printf '%s' "$entry" | sed -n 's/.*"url": *"\([^"]*\)".*/\1/p')
            [ -n "$number" ] && [ -n "$part_url" ] || continue
            put_part "$1" "$source" "$number" "$part_size" "$part_url" || log "part $number not stored"
        done < "$work/part_urls"
    done
    [ -n "$stored" ] || { log "upload not finished after 5 rounds"; return 1; }
    case "$source" in *.crashreg.gz) rm -f "$source" ;; esac  # our gzipped copy, not the dump
    rm -f "$1"
}
