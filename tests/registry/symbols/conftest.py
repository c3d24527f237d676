"""Symbol tests: real programs compiled with gcc, a real debuginfod, both databases."""

from __future__ import annotations

from tests.support.symbols import (  # noqa: F401 (fixtures)
    counting_server,
    symbol_programs,
    upstream_debuginfod,
)
