"""The one wiring point: every domain, listed once, registers itself on one Wiring.

The app (blueprints, /metrics collectors), the `crashreg` command (its subcommands), Alembic
(registry/models.py: every table) and the scheduler (its job modules) read the Wiring. The
integrations in sync/ depend on registry, never the reverse: they register through the
"crashreg.domains" entry points in pyproject.toml, after the registry's own domains.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points

from registry.auth import wiring as auth
from registry.capture import wiring as capture
from registry.core.wiring import Wiring
from registry.epidemiology import wiring as epidemiology
from registry.grafana import wiring as grafana
from registry.ingest import wiring as ingest
from registry.inventory import wiring as inventory
from registry.jira import wiring as jira
from registry.pages import wiring as pages
from registry.rca import wiring as rca
from registry.retention import wiring as retention
from registry.rollups import wiring as rollups
from registry.signatures import wiring as signatures
from registry.storage import wiring as storage
from registry.symbolication import wiring as symbolication
from registry.symbols import wiring as symbols

# In the order their blueprints mount (after operations'); jira before rca: a rebuild's summary
# names a carried Jira link before carried RCAs.
DOMAINS = (auth, ingest, inventory, signatures, epidemiology, capture, storage, symbols, symbolication, jira,
           rca, retention, rollups, pages, grafana)
# The shared records (registry/core) and the outbox are every domain's tables.
CORE_TABLES = (
    "registry.core.events",
    "registry.core.hosts",
    "registry.core.signatures",
    "registry.core.jira_links",
    "registry.core.secrets",
    "registry.outbox",
)
# The application's own, beside registry/cli.py's db and serve: `demo` runs the whole app.
APPLICATION_COMMANDS = {"demo": "registry.demo.command:demo"}
ENTRY_POINTS = "crashreg.domains"


@cache
def wiring() -> Wiring:
    """The application's wiring: the registry's domains, then the installed integrations."""
    wired = Wiring(commands=dict(APPLICATION_COMMANDS), table_modules=list(CORE_TABLES))
    for domain in DOMAINS:
        domain.register(wired)
    for entry in entry_points(group=ENTRY_POINTS):
        entry.load()(wired)
    return wired
