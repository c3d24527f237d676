"""The signature list: sort controls that say how it is sorted, and a mixed verdict's badge."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import update

from registry.core.signatures import Signature
from registry.db import utcnow
from registry.epidemiology.models import EpidemiologyVerdict
from testkit.pages import login
from tests.support.rca import seed

# bug -> crashes (hostname, kernel, region): each its own count of events and of hosts
BUGS = {"ext4_evict_inode": 1, "tcp_sendmsg_locked": 3, "mlx5e_poll_rx_cq": 2}
# bug -> (verdict, physical hosts, concentrated parts) as the last refresh stored them
VERDICTS = {"tcp_sendmsg_locked": ("software", 3, 1), "mlx5e_poll_rx_cq": ("single-host", 1, 0)}
MIXED_PART = {"kind": "concentrated", "attribute": "physical_host", "value": "hv-0042"}


def listed(page: str) -> list[str]:
    return re.findall(r'<a class="sig" href="/signatures/\d+">[^<]*?in (\w+)', page)


def test_the_list_sorts_by_each_control_says_how_and_badges_a_mixed_signature(
    client, database, make_token
) -> None:  # type: ignore[no-untyped-def]
    reporter = make_token("report")
    ids = {}
    for bug, crashes in BUGS.items():
        ids[bug] = int(seed(client, database, reporter, bug,
                            [(f"{bug[:4]}-{n}", "6.8.0-52", "us-east") for n in range(crashes)]).signature_id)
    with database.session() as session:
        for bug, (verdict, hosts, concentrated) in VERDICTS.items():
            session.add(EpidemiologyVerdict(
                signature_id=ids[bug], verdict=verdict, reason="stored by the test", baseline="fleet",
                events=BUGS[bug], hosts=hosts, concentrated=concentrated, computed_at=utcnow(),
                analysis={"components": [MIXED_PART, {"kind": "spread"}] if concentrated else []}))
        # first seen in an order that is neither the ids' nor the events' (a sort that fell back
        # on ids would not pass): mlx5 the oldest, then ext4, then tcp
        for days, bug in ((30, "mlx5e_poll_rx_cq"), (20, "ext4_evict_inode"), (10, "tcp_sendmsg_locked")):
            session.execute(update(Signature).where(Signature.id == ids[bug])
                            .values(first_seen=utcnow() - timedelta(days=days)))
    login(client, make_token("read"))

    default = client.get("/signatures").get_data(as_text=True)
    assert '<p class="sub" id="sorted-by">Sorted by last seen, newest first.</p>' in default
    # the verdicts and physical hosts are a refresh's, beside live event counts: said, with when
    assert re.search(r'id="refreshed">Events are counted live; verdicts and their physical hosts are those '
                     r"of the epidemiology refresh of \d{4}-\d\d-\d\d \d\d:\d\d UTC", default)
    assert re.search(r'class="active" aria-current="true" title="click to reverse">Last seen ↓</a>', default)
    for label in ("Last seen", "Events", "Physical hosts", "First seen", "Verdict"):
        assert f">{label}" in default
    tcp, mlx5, ext4 = "tcp_sendmsg_locked", "mlx5e_poll_rx_cq", "ext4_evict_inode"
    cases = {
        "-events": ([tcp, mlx5, ext4], "events, most first"),
        "events": ([ext4, mlx5, tcp], "events, fewest first"),
        "-hosts": ([tcp, mlx5, ext4], "physical hosts, most first"),
        "-verdict": ([mlx5, tcp, ext4],
                     "verdict, single-host, hardware-config, software, inconclusive, then not yet analysed"),
        "first_seen": ([mlx5, ext4, tcp], "first seen, oldest first"),
        "-first_seen": ([tcp, ext4, mlx5], "first seen, newest first"),
    }
    for sort, (order, words) in cases.items():
        page = client.get(f"/signatures?sort={sort}").get_data(as_text=True)
        assert listed(page) == order, sort
        assert f"Sorted by {words}." in page
        # the active control turns the direction around; the search form keeps the sort
        reverse = sort.lstrip("-") if sort.startswith("-") else f"-{sort}"
        assert re.search(rf'href="/signatures\?sort={re.escape(reverse)}" data-sort="{sort.lstrip("-")}" '
                         r'class="active"', page)
        assert f'<input type="hidden" name="sort" value="{sort}">' in page
    # a page of one, sorted by hosts: the cursor carries the sort on
    first = client.get("/signatures?sort=-hosts&limit=1").get_data(as_text=True)
    more = re.search(r'<a href="([^"]+)" rel="next">', first).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    assert listed(client.get(more).get_data(as_text=True)) == ["mlx5e_poll_rx_cq"]
    assert client.get("/signatures?sort=-nonsense").status_code == 400

    mixed = re.search(r'<span class="verdict verdict-mixed" title="([^"]*)">([^<]*)</span>', default)
    assert mixed is not None and mixed.group(2) == "mixed: software + physical host hv-0042"
    assert "a part concentrated on physical host hv-0042, and a spread part" in mixed.group(1)
    single = '<span class="verdict verdict-single-host" title="stored by the test">single-host</span>'
    assert single in default
