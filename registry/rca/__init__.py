"""Root-cause analyses: records, evidence checks, review lifecycle, triage bundles."""
