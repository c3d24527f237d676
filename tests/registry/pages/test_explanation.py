"""The signature page shows how its fingerprint was made: the engine's explanation of the
latest event (kind and rule, section, every frame used or skipped and why, the guilty one),
and, for a merged signature whose events were explained differently, each explanation."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

from sqlalchemy import update

from registry.core.events import Event
from registry.fingerprint import analyse_console_log
from testkit.pages import login
from testkit.reports import crash_report
from tests.support import DATA
from tests.support.http import auth

FIXTURES = DATA / "agents"
MLX5 = (FIXTURES / "mlx5_null_deref.log").read_text()
EXT4 = (FIXTURES / "ext4_bug_on.log").read_text()


class FrameRows(HTMLParser):
    """(decision class, cell texts) of each frame row of one rendered explanation."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = dict(attrs).get("class") or ""
        if tag == "tr" and classes.startswith("frame-"):
            self.rows.append((classes.removeprefix("frame-"), []))
        elif tag == "td" and self.rows:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self.cell is not None:
            self.rows[-1][1].append(html.unescape("".join(self.cell)).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def block(page: str, label: str) -> str:
    """The HTML of explanation `label` on the page."""
    start = rf'<div class="variant" id="explanation-{label}">'
    match = re.search(start + r'(.*?)</div>\s*(?=<div class="variant"|</section>)', page, re.S)
    assert match, f"no explanation {label} on the page"
    return match.group(1)


def assert_shows(rendered: str, explanation: dict[str, Any]) -> None:
    parser = FrameRows()
    parser.feed(rendered)
    source = [f"{f['file']}:{f['line']}" if f.get("file") else "" for f in explanation["frames"]]
    expected = [(f["decision"], [str(i), f["function"], f["module"] or "", source[i], f["decision"],
                                 f["rule"] or ""]) for i, f in enumerate(explanation["frames"])]
    assert parser.rows == expected
    assert f"recognised by rule <code>{html.escape(explanation['kind_rule'])}</code>" in rendered
    assert f"<dd>{html.escape(explanation['section'])}</dd>" in rendered
    assert f"<code>{html.escape(explanation['headline'])}</code>" in rendered


def report(client: Any, token: str, console_log: str) -> dict[str, Any]:
    response = client.post("/api/v1/reports", json=crash_report(console_log=console_log), headers=auth(token))
    assert response.status_code == 201, response.json
    return response.json


def test_the_page_shows_the_latest_events_explanation_frame_by_frame(client, make_token) -> None:
    reporter = make_token("report")
    answer = report(client, reporter, EXT4)
    report(client, reporter, EXT4)
    explanation = analyse_console_log(EXT4).explanation
    decisions = [f["decision"] for f in explanation["frames"]]
    assert decisions.count("guilty") == 1 and "skipped" in decisions and "used" in decisions, decisions
    login(client, make_token("read"))
    page = client.get(f"/signatures/{answer['signature']['id']}").get_data(as_text=True)
    shown = block(page, "A")
    assert "of the latest event" in shown
    assert_shows(shown, explanation)
    assert 'id="explanation-B"' not in page  # both crashes explained alike: one explanation
    guilty = explanation["frames"][explanation["guilty"]]["function"]
    assert re.search(rf'<tr class="frame-guilty">.*?<code>{guilty}</code>', shown)


def test_a_merged_signature_shows_each_way_its_events_were_explained(client, database, make_token) -> None:
    reporter, triage = make_token("report"), make_token("triage")
    mlx5 = report(client, reporter, MLX5)
    ext4 = report(client, reporter, EXT4)
    merged = client.post(f"/api/v1/signatures/{mlx5['signature']['id']}/merge",
                         json={"other": ext4["signature"]["id"]}, headers=auth(triage))
    assert merged.status_code == 200, merged.json
    stored_before_explanations = report(client, reporter, MLX5)
    with database.session() as session:
        session.execute(update(Event).where(Event.id == int(stored_before_explanations["event_id"]))
                        .values(explanation=None))

    login(client, make_token("read"))
    page = client.get(f"/signatures/{mlx5['signature']['id']}").get_data(as_text=True)
    latest_explained = block(page, "A")  # the newest event has none stored: the newest that has
    assert "of the latest explained event" in latest_explained
    assert_shows(latest_explained, analyse_console_log(EXT4).explanation)
    other = block(page, "B")
    assert "explained differently" in other
    assert_shows(other, analyse_console_log(MLX5).explanation)
    events = re.search(r'<section class="card" id="events">(.*?)</section>', page, re.S).group(1)
    row = (
        r'<tr><td><a href="/events/\d+">(\d+)</a></td>'  # event ids link to the event page
        r'.*?<td>(?:<a href="#explanation-\w+">)?(\w+)(?:</a>)?(?: <span class="sub">.*?</span>)?</td></tr>'
    )
    cells = dict(re.findall(row, events, re.S))
    unexplained = stored_before_explanations["event_id"]
    assert cells == {ext4["event_id"]: "A", mlx5["event_id"]: "B", unexplained: "none"}
    # the letters are explained above the table, and each says in words what it stands for
    assert 'Explanation: how the event\'s fingerprint was made' in page
    for letter, signature in (("A", EXT4), ("B", MLX5)):
        explanation = analyse_console_log(signature).explanation
        guilty = explanation["frames"][explanation["guilty"]]["function"]
        assert f'{letter}</a> <span class="sub">guilty <code>{guilty}</code></span>' in events


def test_a_signature_without_stored_explanations_says_how_to_fill_them(client, database, make_token) -> None:
    answer = report(client, make_token("report"), EXT4)
    with database.session() as session:
        session.execute(update(Event).values(explanation=None))
    login(client, make_token("read"))
    page = client.get(f"/signatures/{answer['signature']['id']}").get_data(as_text=True)
    section = re.search(r'<section class="card" id="explanation">(.*?)</section>', page, re.S).group(1)
    assert "No explanation stored" in section and "crashreg signatures rebuild" in section
