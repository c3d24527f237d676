"""The fleet's inventory, loaded once per engine for every window's host-time, is never served
stale: any change to an inventory host or its attribute history (an upsert, a retirement, a
host leaving the inventory) loads it again on the next read, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from registry.core.hosts import Host
from registry.epidemiology.fleet_sql import current_inventory
from tests.support.http import auth

START = datetime.now(UTC) - timedelta(days=10)  # the upserts below are observed now
END = START + timedelta(days=20)


def _host(hostname: str, bios: str) -> dict:
    return {"hostname": hostname, "physical_host": f"hv-{hostname}", "sku": "h100", "bios_version": bios}


def _bios_share(database, bios: str) -> float:  # type: ignore[no-untyped-def]
    with database.session() as session:
        fleet = current_inventory(session).baseline(START, END)
        assert fleet is not None
        return fleet.counts.get(("bios_version", bios), 0.0) / fleet.total


def test_the_loaded_inventory_follows_every_change(client, make_token, database) -> None:  # type: ignore[no-untyped-def]
    token = make_token("admin")

    def upsert(*hosts: dict) -> None:
        response = client.post("/api/v1/hosts", json={"hosts": list(hosts)}, headers=auth(token))
        assert response.status_code == 200, response.get_json()

    upsert(*(_host(f"vm-{i}", "1.0") for i in range(4)))
    assert _bios_share(database, "1.0") == 1.0
    assert _bios_share(database, "1.0") == 1.0  # unchanged: the same inventory answers

    # a firmware update of one host, recorded in the attribute history: 2.0 for half the window
    upsert(_host("vm-0", "2.0"))
    assert 0.0 < _bios_share(database, "2.0") < 0.25  # a quarter of the hosts, half the time
    # a new host in the inventory
    upsert(_host("vm-9", "3.0"))
    assert _bios_share(database, "3.0") > 0.0
    # a host leaving the inventory, written around the API (as an operator's SQL would)
    with database.session() as session:
        session.execute(update(Host).where(Host.hostname == "vm-9").values(in_inventory=False))
    assert _bios_share(database, "3.0") == 0.0
    # a host retired before the window: it carries nothing in it
    with database.session() as session:
        retired = START - timedelta(days=1)
        session.execute(update(Host).where(Host.hostname == "vm-1").values(retired_at=retired))
    with database.session() as session:
        fleet = current_inventory(session).baseline(START, END)
        assert fleet is not None and ("hostname", "vm-1") not in fleet.counts
