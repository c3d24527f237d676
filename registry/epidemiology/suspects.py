"""Fleet-wide suspects: physical hosts whose crashes are improbable across signatures.

A CPU that silently computes wrong sprays many *different* signatures, each too small to
stand out on its own. For every physical host we ask how many distinct signatures a host of
its size (how many hosts/VMs it carries) would collect if it crashed like the rest of the
fleet: each signature s reaches a fraction f_s of the other hosts, so a physical host
carrying e hosts expects sum_s 1 - (1 - f_s)^e distinct signatures (Poisson). The
observed count's upper tail, Bonferroni-corrected over the physical hosts, ranks suspects;
the crash count against the fleet's rate is reported as further evidence.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .exact import poisson_upper_log10, to_p_value
from .findings import LOG10_ALPHA

MIN_SIGNATURES = 3


@dataclass(frozen=True)
class HostCrash:
    physical_host: str
    hostname: str
    signature: str
    crashed_at: datetime


def _expected_signatures(
    hosts_reached: Mapping[str, int], own: Mapping[str, int], size: int, others: int
) -> float:
    """Distinct signatures expected on a physical host carrying `size` hosts, from how far
    each signature spread among the `others` (the host's own crashes left out)."""
    if others <= 0:
        return 0.0
    total = 0.0
    for signature, reached in hosts_reached.items():
        share = (reached - own.get(signature, 0)) / others
        if share > 0:
            total += 1.0 - (1.0 - min(share, 1.0)) ** size
    return total


def suspect_hosts(
    crashes: Sequence[HostCrash],
    hosts_per_physical: Mapping[str, int] | None = None,
    limit: int = 20,
) -> list[dict]:
    """Ranked suspects with evidence. `hosts_per_physical`: the inventory (hosts or VMs per
    physical host); without it the hosts that crashed stand in for the fleet."""
    by_physical: dict[str, list[HostCrash]] = defaultdict(list)
    hostnames_of_signature: dict[str, set[str]] = defaultdict(set)
    for crash in crashes:
        by_physical[crash.physical_host].append(crash)
        hostnames_of_signature[crash.signature].add(crash.hostname)
    if hosts_per_physical is None:
        seen: dict[str, set[str]] = defaultdict(set)
        for crash in crashes:
            seen[crash.physical_host].add(crash.hostname)
        hosts_per_physical = {p: len(names) for p, names in seen.items()}
    fleet_hosts = sum(hosts_per_physical.values())
    physical_count = max(len(hosts_per_physical), len(by_physical))
    reached = {s: len(names) for s, names in hostnames_of_signature.items()}
    signature_total = Counter(c.signature for c in crashes)
    total_crashes = len(crashes)

    suspects = []
    for physical, own_crashes in by_physical.items():
        distinct = Counter(c.signature for c in own_crashes)
        if len(distinct) < MIN_SIGNATURES:
            continue
        size = max(hosts_per_physical.get(physical, 0), 1)
        own_reach = {s: len({c.hostname for c in own_crashes if c.signature == s}) for s in distinct}
        others = fleet_hosts - size
        expected = _expected_signatures(reached, own_reach, size, others)
        expected_crashes = (total_crashes - len(own_crashes)) * size / others if others > 0 else 0.0
        log10_p = poisson_upper_log10(len(distinct), expected)
        adjusted = min(0.0, log10_p + math.log10(max(physical_count, 1)))
        if adjusted >= LOG10_ALPHA:
            continue
        only_here = sorted(s for s, n in distinct.items() if signature_total[s] == n)
        suspects.append(
            {
                "physical_host": physical,
                "crashes": len(own_crashes),
                "signatures": len(distinct),
                "expected_signatures": round(expected, 3),
                "expected_crashes": round(expected_crashes, 3),
                "p_value": to_p_value(adjusted),
                "log10_p": round(max(adjusted, -10_000.0), 3),
                "crash_count_p_value": to_p_value(poisson_upper_log10(len(own_crashes), expected_crashes)),
                "hosts": size,
                "hostnames": sorted({c.hostname for c in own_crashes}),
                "signatures_only_here": len(only_here),
                "top_signatures": [{"signature": s, "events": n} for s, n in distinct.most_common(5)],
                "first_crash": min(c.crashed_at for c in own_crashes).isoformat(),
                "last_crash": max(c.crashed_at for c in own_crashes).isoformat(),
                "evidence": (
                    f"{len(distinct)} distinct signatures in {len(own_crashes)} crashes where a "
                    f"host of its size expects {expected:.2f}; {len(only_here)} of them seen "
                    "nowhere else"
                ),
            }
        )
    suspects.sort(key=lambda s: (s["log10_p"], -s["signatures"]))
    return suspects[:limit]
