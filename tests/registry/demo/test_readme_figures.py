"""The README's figures of the demo are the simulator's: the line it quotes is the one
`crashreg demo` prints with its defaults (a change to the simulated fleet fails here until the
README says it again)."""

from __future__ import annotations

import re
from pathlib import Path

from registry.demo.command import demo
from registry.demo.simulator import confounded, simulate, today_start

README = Path(__file__).parents[3] / "README.md"
QUOTED = re.compile(r"Simulated fleet: (\d+) hosts on (\d+) physical hosts, (\d+) days up to <today> UTC, "
                    r"(\d+) crashes \(seed (\d+)\)\.")


def test_the_readme_quotes_what_the_demo_prints_with_its_defaults() -> None:
    found = QUOTED.search(README.read_text())
    assert found is not None, "README.md no longer quotes the demo's 'Simulated fleet:' line"
    hosts, physical, days, crashes, seed = map(int, found.groups())
    defaults = {param.name: param.default for param in demo.params}
    assert seed == defaults["seed"]
    config = confounded(seed, physical_per_cluster=defaults["physical_per_cluster"], start=today_start())
    sim = simulate(config)
    physical_hosts = {host["physical_host"] for host in sim.hosts.values()}
    simulated = (len(sim.hosts), len(physical_hosts), config.days, len(sim.reports))
    assert (hosts, physical, days, crashes) == simulated
