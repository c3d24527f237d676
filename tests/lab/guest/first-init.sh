#!/bin/sh
# The crashed kernel's /init: load the crash kernel the way a kdump service does at boot
# (kexec -p with the crashed boot's identity as crashreg.* parameters), then crash the kernel
# with the lab module. Lines starting with "LAB:" are the host's progress markers. Two
# departures from a kdump service, for speed under TCG, neither one the reporter sees: -i
# (--no-checks) skips kexec's SHA-256 of the loaded segments, computed at load and verified
# again at the panic (3 s of CPU per crash here), and the crash kernel skips the crypto
# self-tests (cryptomgr.notests, as lab.KERNEL_PARAMETERS does for the first kernel).
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^lab\.$1=//p" | head -n 1; }
echo "LAB: first kernel up $(cut -d ' ' -f 1 /proc/uptime)"
hostname "$(arg hostname)"
boot_id=$(cat /proc/sys/kernel/random/boot_id)
CRASHREG_PARAMS="crashreg.boot_id=$boot_id crashreg.hostname=$(hostname) crashreg.kernel=$(uname -r)"
if ! kexec -p -i /boot/vmlinuz --initrd=/boot/crash.img \
        --append="console=ttyS0 reset_devices irqpoll nr_cpus=1 panic=1 loglevel=4 cryptomgr.notests=1 no_timer_check $(arg crash_cmdline) $CRASHREG_PARAMS"; then
    echo "LAB: kexec -p failed"
    reboot -f
fi
echo "LAB: boot_id $boot_id"
# Every crash kind becomes a panic, so the crash kernel takes over. The short lockup and
# hung-task thresholds only for their own kinds: a TCG guest on a loaded host stalls for
# seconds at a time, and a spurious report must not become another kind's crash.
kind=$(arg kind)
echo 1 > /proc/sys/kernel/panic_on_oops
echo 1 > /proc/sys/kernel/panic_on_warn
echo 1 > /proc/sys/kernel/softlockup_panic
echo 1 > /proc/sys/kernel/hung_task_panic
[ "$kind" != soft-lockup ] || echo 1 > /proc/sys/kernel/watchdog_thresh
[ "$kind" != hung-task ] || echo 2 > /proc/sys/kernel/hung_task_timeout_secs
echo "LAB: crashing: $kind $(cut -d ' ' -f 1 /proc/uptime)"
if [ "$kind" = sysrq ]; then
    echo c > /proc/sysrq-trigger
else
    insmod /lib/crashlab.ko kind="$kind"
fi
while :; do sleep 60; done
