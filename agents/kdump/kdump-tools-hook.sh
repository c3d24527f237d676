# crashreg hook for Debian/Ubuntu kdump-tools: append to /etc/default/kdump-tools.
#
# kdump-config sources that file as sh; in the crash kernel it does so for `savecore` ($1)
# before running makedumpfile $MAKEDUMP_ARGS. Here the registry decides: MAKEDUMP_ARGS comes
# from the decision (the reporter's output), and `skip` leaves savecore before any dump (the
# init script reboots). systemd also reads the file as an EnvironmentFile: no line here may
# read as an assignment of MAKEDUMP_ARGS to it (hence the case arm's `0)` before it).
if [ "${1:-}" = savecore ] && [ -s "${CRASHREG_VMCORE:-/proc/vmcore}" ]; then
    # The reporter prints makedumpfile's arguments and exits 10 for skip: nothing here depends
    # on where its config puts the decision file. Any other failure leaves kdump-tools' own
    # MAKEDUMP_ARGS: the dump is taken.
    crashreg_args=$("${CRASHREG_HOOK:-/usr/sbin/crashreg-kdump}" report)
    case $? in
        0) MAKEDUMP_ARGS=$crashreg_args ;;
        10) exit 0 ;;
    esac
fi
