"""The DPU agent: a host's panic read over the DPU with drgn, reported before its crash kernel
is up (`crashreg-report.pyz dpu report`, agents/README.md)."""
