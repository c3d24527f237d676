"""Symbols that arrived in another process, picked up by the scheduler."""
