"""The contract's host attributes, as plain data shared by the tables, ingest and epidemiology."""

from __future__ import annotations

# In the order the contract lists them. Events snapshot them at crash time.
HOST_ATTRIBUTES: tuple[str, ...] = (
    "physical_host",
    "region",
    "cluster",
    "sku",
    "cpu_model",
    "microcode",
    "bios_version",
    "bmc_version",
    "kernel_version",
    "os_image",
    "memory_gb",
    "hypervisor",
    "gpu_driver",
)
