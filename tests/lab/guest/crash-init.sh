#!/bin/sh
# The crash kernel's /init, standing in for a kdump initramfs's dump step (RHEL's order:
# kdump_pre, then the core collector): network and the dump disk up, then the reporter,
# unmodified, configured by /etc/crashreg/reporter.conf. The disk (ext4, /dev/vda) is the
# crashed host's /var: the spool and the dumps survive for the host to read after QEMU exits.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /run /var
echo "LAB: crash kernel up $(cut -d ' ' -f 1 /proc/uptime)"
. /lib/lab/network.sh
tries=0
while [ ! -b /dev/vda ] && [ "$tries" -lt 50 ]; do sleep 0.1; tries=$((tries + 1)); done
mount -t ext4 /dev/vda /var || echo "LAB: mount /dev/vda failed"
boot_id=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^crashreg\.boot_id=//p')
echo "LAB: report $(cut -d ' ' -f 1 /proc/uptime)"
crashreg-kdump report > /tmp/args
rc=$?
echo "LAB: decided rc=$rc args=$(cat /tmp/args) $(cut -d ' ' -f 1 /proc/uptime)"
if [ "$rc" = 0 ]; then
    mkdir -p "/var/crash/$boot_id"
    crashreg-kdump collect /proc/vmcore "/var/crash/$boot_id/vmcore"
    echo "LAB: collected rc=$? $(cut -d ' ' -f 1 /proc/uptime)"
fi
umount /var
echo "LAB: done"
reboot -f
