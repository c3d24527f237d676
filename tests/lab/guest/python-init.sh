#!/bin/sh
# A guest that stays up (tests/lab/python_guest.py): no crash kernel and panic_on_oops left
# at 0; the network and the disk (as /var, when lab.disk=1) up, then the script /lab/run,
# then power off. Lines starting with "LAB:" are the host's progress markers.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /run /var
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^lab\.$1=//p" | head -n 1; }
echo "LAB: guest up $(cut -d ' ' -f 1 /proc/uptime)"
hostname "$(arg hostname)"
. /lib/lab/network.sh
if [ "$(arg disk)" = 1 ]; then
    tries=0
    while [ ! -b /dev/vda ] && [ "$tries" -lt 50 ]; do sleep 0.1; tries=$((tries + 1)); done
    mount -t ext4 /dev/vda /var || echo "LAB: mount /dev/vda failed"
fi
echo "LAB: boot_id $(cat /proc/sys/kernel/random/boot_id)"
echo "LAB: run $(cut -d ' ' -f 1 /proc/uptime)"
sh /lab/run
echo "LAB: script rc=$? $(cut -d ' ' -f 1 /proc/uptime)"
sync
[ "$(arg disk)" != 1 ] || umount /var
echo "LAB: done"
reboot -f
