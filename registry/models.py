"""Every table, imported in one place so Alembic and the tests see the whole schema: the
modules each domain declares on the wiring (registry/domains.py)."""

from importlib import import_module

from registry.db import Base
from registry.domains import wiring

for _module in wiring().table_modules:
    import_module(_module)

__all__ = ["Base"]
