"""The host attributes epidemiology correlates crashes with, and what each one means.

An attribute value is a pair `(attribute, value)`; labels become `("labels", "key=value")`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from registry.core.attributes import HOST_ATTRIBUTES as INVENTORY_ATTRIBUTES

AttributeValue = tuple[str, str]

# Every inventory attribute that names a thing a bug can concentrate on (memory size does not),
# plus the hostname: a VM's own name, beside the physical host that carries it.
HOST_ATTRIBUTES: tuple[str, ...] = (
    "physical_host",
    "hostname",
    *(name for name in INVENTORY_ATTRIBUTES if name not in ("physical_host", "memory_gb")),
)

# What an over-represented value of each attribute points at (drives the verdict table).
FAMILY: dict[str, str] = {
    "physical_host": "host",
    "hostname": "host",
    "region": "place",
    "cluster": "place",
    "sku": "hardware",
    "cpu_model": "hardware",
    "microcode": "hardware",
    "bios_version": "hardware",
    "bmc_version": "hardware",
    "kernel_version": "software",
    "os_image": "software",
    "hypervisor": "software",
    "gpu_driver": "software",
    "labels": "software",
}

# Attributes a host's value of changes over time (rollouts, firmware updates): a snapshot of
# the inventory says what hosts run now, not what they ran when they crashed, so these are
# compared with the other crashes of the same window (which carry the values at crash time)
# when the inventory's history does not cover the window. Labels have no history at all.
CHANGING: frozenset[str] = frozenset(
    {
        "kernel_version",
        "os_image",
        "bios_version",
        "microcode",
        "bmc_version",
        "gpu_driver",
        "hypervisor",
        "labels",
    }
)
# The changing attributes an inventory records one value of (labels are a map).
CHANGING_SCALARS: tuple[str, ...] = tuple(sorted(CHANGING - {"labels"}))

# When two values cover exactly the same hosts, the earlier attribute here is kept as the
# explanation (the physical host over its hostname, the BIOS over its SKU, the kernel over
# the image that ships it).
SPECIFICITY: tuple[str, ...] = (
    "physical_host",
    "bios_version",
    "microcode",
    "bmc_version",
    "gpu_driver",
    "kernel_version",
    "os_image",
    "hypervisor",
    "cpu_model",
    "sku",
    "hostname",
    "cluster",
    "region",
    "labels",
)
SPECIFICITY_RANK: dict[str, int] = {name: rank for rank, name in enumerate(SPECIFICITY)}


def host_values(host: Mapping[str, Any]) -> frozenset[AttributeValue]:
    """The attribute values of a contract host object (missing or empty values left out).

    A host without `physical_host` is its own physical host (bare metal).
    """
    values: set[AttributeValue] = set()
    for name in HOST_ATTRIBUTES:
        value = host.get(name)
        if name == "physical_host" and not value:
            value = host.get("hostname")
        if value not in (None, ""):
            values.add((name, str(value)))
    labels = host.get("labels") or {}
    values.update(("labels", f"{key}={value}") for key, value in labels.items())
    return frozenset(values)


def physical_host_of(values: Iterable[AttributeValue]) -> str | None:
    for name, value in values:
        if name == "physical_host":
            return value
    return None
