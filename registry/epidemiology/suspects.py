"""Fleet-wide suspects: physical hosts whose crashes are improbable across signatures.

A CPU that silently computes wrong sprays many *different* signatures, each too small to
stand out on its own. For every physical host we ask how many distinct signatures a host of
its size (how many hosts/VMs it carries) would collect if it crashed like the rest of the
fleet: each signature s reaches a fraction f_s of the other hosts, so a physical host
carrying e hosts expects sum_s 1 - (1 - f_s)^e distinct signatures (Poisson), and the
fleet's crash rate gives its expected crash count (Poisson). The more improbable of the two
upper tails (Bonferroni over the two tests and over the physical hosts) ranks suspects; only
hosts with crashes of several signatures qualify, so one software bug on repeat is left to
the per-signature analysis.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .exact import poisson_upper_log10, to_p_value
from .findings import LOG10_ALPHA
from .shapes import SuspectHost

MIN_SIGNATURES = 3


@dataclass(frozen=True)
class HostSignatureCount:
    """How one physical host met one signature (an aggregate the database computes)."""

    physical_host: str
    signature: str
    events: int
    hostnames: int  # distinct hosts/VMs on it that crashed with this signature
    first_crash: datetime | None  # None: no plausible crash time among them (registry.bounds)
    last_crash: datetime | None


def _expected_signatures(reached: Mapping[str, int], own: Mapping[str, int], size: int, others: int) -> float:
    """Distinct signatures expected on a physical host carrying `size` hosts, from how far
    each signature spread among the `others` (the host's own crashes left out)."""
    if others <= 0:
        return 0.0
    total = 0.0
    for signature, hosts in reached.items():
        share = (hosts - own.get(signature, 0)) / others
        if share > 0:
            total += 1.0 - (1.0 - min(share, 1.0)) ** size
    return total


def suspect_hosts(
    rows: Sequence[HostSignatureCount], hosts_per_physical: Mapping[str, int], limit: int = 20
) -> list[SuspectHost]:
    """Ranked suspects with evidence. `hosts_per_physical`: the fleet (hosts or VMs carried
    by each physical host)."""
    by_physical: dict[str, list[HostSignatureCount]] = defaultdict(list)
    reached: Counter[str] = Counter()
    signature_total: Counter[str] = Counter()
    for row in rows:
        by_physical[row.physical_host].append(row)
        reached[row.signature] += row.hostnames
        signature_total[row.signature] += row.events
    fleet_hosts = sum(hosts_per_physical.values())
    physical_count = max(len(hosts_per_physical), len(by_physical))
    total_crashes = sum(signature_total.values())

    suspects: list[SuspectHost] = []
    for physical, own in by_physical.items():
        if len(own) < MIN_SIGNATURES:
            continue
        crashes = sum(r.events for r in own)
        size = max(hosts_per_physical.get(physical, 0), 1)
        others = fleet_hosts - size
        expected = _expected_signatures(reached, {r.signature: r.hostnames for r in own}, size, others)
        expected_crashes = (total_crashes - crashes) * size / others if others > 0 else 0.0
        diversity = poisson_upper_log10(len(own), expected)
        count = poisson_upper_log10(crashes, expected_crashes)
        adjusted = min(0.0, min(diversity, count) + math.log10(2 * max(physical_count, 1)))
        if adjusted >= LOG10_ALPHA:
            continue
        only_here = [r for r in own if signature_total[r.signature] == r.events]
        top = sorted(own, key=lambda r: (-r.events, r.signature))[:5]
        first = min((r.first_crash for r in own if r.first_crash), default=None)
        last = max((r.last_crash for r in own if r.last_crash), default=None)
        suspects.append(
            {
                "physical_host": physical,
                "crashes": crashes,
                "signatures": len(own),
                "expected_signatures": round(expected, 3),
                "expected_crashes": round(expected_crashes, 3),
                "p_value": to_p_value(adjusted),
                "log10_p": round(max(adjusted, -10_000.0), 3),
                "signatures_p_value": to_p_value(diversity),
                "crashes_p_value": to_p_value(count),
                "hosts": size,
                "hosts_crashed": max(r.hostnames for r in own),
                "signatures_only_here": len(only_here),
                "top_signatures": [{"signature": r.signature, "events": r.events} for r in top],
                "first_crash": first.isoformat() if first else None,
                "last_crash": last.isoformat() if last else None,
                "evidence": (
                    f"{crashes} crashes where a host of its size expects {expected_crashes:.1f}; "
                    f"{len(own)} distinct signatures where it expects {expected:.2f}; "
                    f"{len(only_here)} of them seen nowhere else"
                ),
            }
        )
    suspects.sort(key=lambda s: (s["log10_p"], -s["signatures"]))
    return suspects[:limit]
