"""POST /api/v1/hosts: bulk upsert with attribute history."""

from __future__ import annotations

from sqlalchemy import func, select

from registry.core.hosts import Host, HostAttributeChange
from tests.support.http import auth


def fleet(count: int, kernel: str) -> list[dict]:
    return [
        {
            "hostname": f"node-{i:05d}",
            "region": f"r{i % 4}",
            "sku": "H100x8",
            "kernel_version": kernel,
            "memory_gb": 2048,
            "labels": {"rack": str(i % 40)},
        }
        for i in range(count)
    ]


def test_ten_thousand_hosts_in_one_call_then_a_rollout(client, make_token, database) -> None:
    token = make_token("report")
    first = client.post("/api/v1/hosts", json={"hosts": fleet(10_000, "6.8.0-52")}, headers=auth(token))
    assert first.status_code == 200
    assert first.json == {"created": 10_000, "updated": 0, "unchanged": 0, "attribute_changes": 0}

    rolled = fleet(10_000, "6.8.0-52")
    for host in rolled[:2_500]:
        host["kernel_version"] = "6.8.0-60"
    second = client.post(
        "/api/v1/hosts", json={"hosts": rolled, "observed_at": "2026-11-20T00:00:00Z"}, headers=auth(token)
    )
    assert second.json == {"created": 0, "updated": 2_500, "unchanged": 7_500, "attribute_changes": 2_500}
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(Host)) == 10_000
        change = session.scalars(select(HostAttributeChange).limit(1)).one()
        assert (change.attribute, change.old_value, change.new_value) == (
            "kernel_version",
            "6.8.0-52",
            "6.8.0-60",
        )
        assert change.changed_at.isoformat() == "2026-11-20T00:00:00+00:00"


def test_inventory_validation_and_scope(client, make_token) -> None:
    admin = make_token("admin")
    empty = client.post("/api/v1/hosts", json={"hosts": []}, headers=auth(admin))
    assert empty.status_code == 400 and "hosts" in empty.json["error"]["fields"]
    nameless = client.post("/api/v1/hosts", json={"hosts": [{"region": "x"}]}, headers=auth(admin))
    assert nameless.status_code == 400
    assert (
        client.post(
            "/api/v1/hosts", json={"hosts": fleet(1, "k")}, headers=auth(make_token("read"))
        ).status_code
        == 403
    )


def test_a_hosts_many_labels_change_is_recorded_by_its_head(client, make_token, database) -> None:
    """Labels each within bounds, written as one `k=v,...` text past the history's column: the
    change is recorded with its head (PostgreSQL refused the row, a 500), the host's labels
    whole."""
    token = make_token("report")
    host = {"hostname": "labelled", "labels": {"a": "1"}}
    assert client.post("/api/v1/hosts", json={"hosts": [host]}, headers=auth(token)).status_code == 200
    many = {"k1": "v" * 200, "k2": "w" * 200}
    changed = client.post("/api/v1/hosts", json={"hosts": [host | {"labels": many}]}, headers=auth(token))
    assert changed.status_code == 200, changed.json
    assert changed.json["attribute_changes"] == 1
    with database.session() as session:
        labels = select(HostAttributeChange).where(HostAttributeChange.attribute == "labels")
        change = session.scalars(labels).one()
        assert change.old_value == "a=1" and len(change.new_value) == 255
        assert change.new_value.startswith("k1=" + "v" * 200 + ",k2=w") and change.new_value.endswith("…")
        assert session.scalars(select(Host.labels).where(Host.hostname == "labelled")).one() == many
