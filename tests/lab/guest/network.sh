# Sourced by a guest's /init: the virtio drivers in dependency order (the cloud kernel has
# them as modules without modules.dep), then 10.0.2.15/24 via 10.0.2.2, QEMU user
# networking's alias of the host's 127.0.0.1.
for module in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
        failover net_failover virtio_net virtio_blk; do
    insmod "/lib/modules/$module.ko" || echo "LAB: insmod $module failed"
done
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
ip route add default via 10.0.2.2
