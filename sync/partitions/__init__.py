"""Partition maintenance as a scheduler job (registry/partitions.py)."""
