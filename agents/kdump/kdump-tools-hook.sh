# crashreg hook for Debian/Ubuntu kdump-tools: append to /etc/default/kdump-tools.
#
# kdump-config sources that file as sh; in the crash kernel it does so for `savecore` ($1)
# before running makedumpfile $MAKEDUMP_ARGS. Here the registry decides: MAKEDUMP_ARGS comes
# from the decision, and `skip` leaves savecore before any dump (the init script reboots).
# systemd also reads the file as an EnvironmentFile and ignores these lines.
if [ "${1:-}" = savecore ] && [ -s "${CRASHREG_VMCORE:-/proc/vmcore}" ]; then
    "${CRASHREG_HOOK:-/usr/sbin/crashreg-kdump}" report >/dev/null
    # shellcheck disable=SC1090
    [ -r "${CRASHREG_DECISION_FILE:-/run/crashreg/decision.env}" ] \
        && . "${CRASHREG_DECISION_FILE:-/run/crashreg/decision.env}"
    if [ "${CRASHREG_ACTION:-}" = skip ]; then
        exit 0
    fi
fi
