"""The pages in headless Chromium over real HTTP: log in, search, open a signature, phone size.

Needs Debian's `chromium` and `chromium-driver` (CI installs both); skipped only when absent.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from registry.capture.models import Capture
from registry.cli import main
from registry.core.events import Event
from registry.core.jira_links import JiraLink
from registry.core.signatures import Signature
from registry.storage.store import open_store
from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.rca import ai_rca, post_rca, seed
from tests.support.retention import store_dump

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is not installed (pip install selenium)"
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver: apt-get install chromium chromium-driver",
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.add_argument("--window-size=1280,900")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def wait_for(driver: webdriver.Chrome, css: str):  # type: ignore[no-untyped-def]
    return WebDriverWait(driver, 20).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def test_login_search_open_signature_and_read_it_on_a_phone(  # type: ignore[no-untyped-def]
    browser, live_server, client, database, make_token
) -> None:
    report = make_token("report")
    sig = seed(client, database, report, "ext4_evict_inode", [("gpu-d1", "6.8.0-52", "us-east")])
    seed(client, database, report, "tcp_sendmsg_locked", [("net-2", "6.8.0-52", "us-east")])
    post_rca(
        client, make_token("triage", kind="agent"), sig.signature_id, ai_rca(sig, summary="inode freed twice")
    )

    browser.get(f"{live_server}/signatures")
    wait_for(browser, "#login-form")
    assert browser.current_url.startswith(f"{live_server}/login?next=/signatures")
    browser.find_element(By.ID, "token").send_keys(make_token("read"))
    browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait_for(browser, "#signatures")
    cookie = browser.get_cookie("crashreg_session")
    assert cookie is not None and cookie["httpOnly"] is True and cookie["sameSite"] == "Lax"

    search = browser.find_element(By.ID, "q")
    search.send_keys("evict_inode")
    search.submit()
    wait_for(browser, "#signatures")
    links = browser.find_elements(By.CSS_SELECTOR, "#signatures a.sig")
    assert len(links) == 1 and "evict_inode" in links[0].text
    links[0].click()
    title = wait_for(browser, "#signature-title")
    assert "evict_inode" in title.text
    assert "inode freed twice" in browser.find_element(By.ID, "rcas").text
    assert "gpu-d1" in browser.find_element(By.ID, "hosts").text

    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
    browser.refresh()
    wait_for(browser, "#signature-title")
    viewport = browser.find_element(By.CSS_SELECTOR, 'meta[name="viewport"]').get_attribute("content")
    assert viewport == "width=device-width, initial-scale=1"
    assert browser.execute_script("return window.innerWidth") == PHONE["width"]
    # Nothing makes the page wider than the phone: wide tables scroll inside their own box.
    assert browser.execute_script("return document.documentElement.scrollWidth") <= PHONE["width"]
    columns = browser.execute_script(
        "return getComputedStyle(document.querySelector('dl.facts')).gridTemplateColumns.split(' ').length"
    )
    assert columns == 1

    browser.find_element(By.ID, "logout").click()
    wait_for(browser, "#login-form")
    browser.get(f"{live_server}/signatures/{sig.signature_id}")
    wait_for(browser, "#login-form")


DESKTOP = {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}


def screenshots_dir(tmp_path: Path) -> Path:
    """Where the triage pages' screenshots go: CRASHREG_SCREENSHOTS to keep and look at them."""
    folder = Path(os.environ.get("CRASHREG_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_triage_pages_in_chromium_at_desktop_and_phone_sizes(  # type: ignore[no-untyped-def]
    browser, live_server, client, make_token, tmp_path
) -> None:
    reporter = make_token("report")
    body = crash_report(crashed_at="2026-11-20T08:00:00Z")
    first = client.post("/api/v1/reports", json=body, headers=auth(reporter)).json
    for day in range(21, 30):
        again = crash_report(crashed_at=f"2026-11-{day}T08:00:00Z", host={"hostname": f"gpu-{day}"})
        client.post("/api/v1/reports", json=again, headers=auth(reporter))
    sid, event_id = first["signature"]["id"], first["event_id"]
    shots = screenshots_dir(tmp_path)

    browser.get(f"{live_server}/login")
    wait_for(browser, "#login-form")
    browser.find_element(By.ID, "token").send_keys(make_token("read"))
    browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait_for(browser, "#signatures")
    for name, metrics in (("desktop", DESKTOP), ("phone", PHONE)):
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        for page, path, ready in (
            ("list", "/signatures", "#signatures"),
            ("signature", f"/signatures/{sid}", "#events-chart"),
            ("event", f"/events/{event_id}", "pre.console"),
        ):
            browser.get(f"{live_server}{path}")
            wait_for(browser, ready)
            browser.save_screenshot(str(shots / f"{page}-{name}.png"))
            # Nothing makes the page wider than the screen: wide tables and logs scroll in their box.
            assert browser.execute_script("return document.documentElement.scrollWidth") <= metrics["width"]
        browser.get(f"{live_server}/signatures/{sid}")
        chart = wait_for(browser, "#events-chart svg")
        assert chart.size["width"] > metrics["width"] * 0.6 and chart.size["height"] >= 100
        bars = browser.find_elements(By.CSS_SELECTOR, "#events-chart rect.bar")
        assert len(bars) == 10 and all(bar.size["height"] > 0 for bar in bars)
        assert browser.find_element(By.ID, "statements").is_displayed()

    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", DESKTOP)
    browser.get(f"{live_server}/signatures/{sid}")
    wait_for(browser, "#events")
    browser.find_element(By.CSS_SELECTOR, f'#events a[href="/events/{event_id}"]').click()
    guilty = wait_for(browser, "pre.console .guilty")
    assert "mlx5e_poll_rx_cq" in guilty.text
    plain = browser.find_element(By.CSS_SELECTOR, "pre.console .ln:not(.guilty):not(.header)")
    assert guilty.value_of_css_property("background-color") != plain.value_of_css_property("background-color")
    assert "GUILTY" in browser.find_element(By.CSS_SELECTOR, "ol.stack li.guilty").text.upper()


def first_screen(browser: webdriver.Chrome, css: str) -> bool:
    """The element starts within the first screen (no scrolling needed to see it)."""
    top = browser.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return r.width > 0 && r.height > 0 ? r.top : null", css)
    return top is not None and top < browser.execute_script("return window.innerHeight")


def test_the_demos_userspace_crash_and_the_list_at_1400_px(  # type: ignore[no-untyped-def]
    browser, live_server, db_url, settings, database, make_token, monkeypatch, tmp_path
) -> None:
    """The demo's fleet (its program's crashes carry the stacks of real cores): the userspace
    event page's first screen, and the signature list's sorting, mixed badge and width."""
    monkeypatch.setenv("CRASHREG_DATABASE_URL", db_url)
    monkeypatch.delenv("CRASHREG_PUBLIC_URL", raising=False)
    demo = CliRunner().invoke(main, ["demo", "--no-serve", "--port", "0", "--physical-per-cluster", "8"])
    assert demo.exit_code == 0, demo.output
    with database.session() as session:
        ring = session.scalars(select(Signature).where(Signature.function.like("%ring_buffer_commit%"))).one()
        event_id, capture_id = session.execute(
            select(Event.id, Capture.id).join(Capture, Capture.event_id == Event.id)
            .where(Event.signature_id == ring.id, Capture.method == "core").limit(1)).one()
        session.add(JiraLink(signature_id=ring.id, issue_key="CRASH-4242",
                             url="https://jira.example/browse/CRASH-4242"))
    store_dump(database, open_store(settings.dump_store, settings.public_url), str(capture_id))
    shots = screenshots_dir(tmp_path)

    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", DESKTOP)
    browser.get(f"{live_server}/login")
    wait_for(browser, "#login-form")
    browser.find_element(By.ID, "token").send_keys(make_token("read"))
    browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait_for(browser, "#signatures")

    browser.get(f"{live_server}/events/{event_id}")
    wait_for(browser, "#frame-table")
    browser.save_screenshot(str(shots / "userspace-event-1400.png"))
    for part in ("#signal", "#labels", "#frame-table tr.frame-guilty", "#frame-table tr.frame-skipped",
                 "#registers dl", "#process", "#fault", "#capture-open pre.open", "#capture-open a.download"):
        assert first_screen(browser, part), part
    assert browser.find_element(By.CSS_SELECTOR, "#signal h2").text.startswith("SIGSEGV")
    labels = browser.find_element(By.ID, "labels").text
    assert "return-to-null pc 0; the slot `ret` popped (%rsp-8) held 0" in labels
    guilty = browser.find_element(By.CSS_SELECTOR, "#frame-table tr.frame-guilty").text
    assert "ingest::ring_buffer_commit" in guilty and "GUILTY" in guilty.upper()
    skipped = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "#frame-table tr.frame-skipped")]
    assert "std::thread::_State_impl" in skipped[0] and "userspace-runtime" in skipped[0]  # in the program
    assert any("libstdc++.so.6.0.30+0x" in row for row in skipped)
    command = browser.find_element(By.CSS_SELECTOR, "#capture-open pre.open").text
    assert f" && DEBUGINFOD_URLS={settings.public_url}/debuginfod/ DEBUGINFOD_HEADERS_FILE=" in command
    assert "ingest-worker" in browser.find_element(By.ID, "process").text
    assert browser.find_elements(By.ID, "console") == [] and browser.find_elements(By.ID, "stack") == []
    assert "no frames found" not in browser.page_source and "Console log" not in browser.page_source
    assert browser.execute_script("return document.documentElement.scrollWidth") <= DESKTOP["width"]
    assert "std::thread::join()" in browser.find_element(By.ID, "threads").text  # the main thread
    whole = browser.execute_script("return document.documentElement.scrollHeight")
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", DESKTOP | {"height": whole})
    browser.save_screenshot(str(shots / "userspace-event-1400-whole.png"))
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", DESKTOP)

    browser.get(f"{live_server}/signatures/{ring.id}")
    wait_for(browser, "#events-chart")
    assert "Fixed in kernel" not in browser.find_element(By.ID, "facts").text
    assert browser.find_elements(By.CSS_SELECTOR, "#events-chart .mark-kernel-rollout") == []

    browser.get(f"{live_server}/signatures")
    wait_for(browser, "#signatures")
    browser.save_screenshot(str(shots / "signatures-1400.png"))
    assert browser.find_element(By.ID, "sorted-by").text == "Sorted by last seen, newest first."
    mixed = browser.find_element(By.CSS_SELECTOR, ".verdict-mixed")
    assert mixed.is_displayed() and mixed.text.startswith("mixed: software + physical host ")
    # the whole table fits: the Jira column is inside the visible part of its box
    box = browser.find_element(By.CSS_SELECTOR, "div.scroll")
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", box)
    jira = browser.find_element(By.LINK_TEXT, "CRASH-4242")
    right = browser.execute_script("return arguments[0].getBoundingClientRect().right", jira)
    assert jira.is_displayed() and right <= browser.execute_script(
        "return arguments[0].getBoundingClientRect().right", box)
    for sort, said, descending in (("events", "Sorted by events, most first.", True),
                                   ("events", "Sorted by events, fewest first.", False),
                                   ("hosts", "Sorted by physical hosts, most first.", True)):
        browser.find_element(By.CSS_SELECTOR, f'#sort-controls a[data-sort="{sort}"]').click()
        assert WebDriverWait(browser, 20).until(
            lambda b, said=said: b.find_element(By.ID, "sorted-by").text == said)
        column = 3 if sort == "events" else 4
        values = [int(cell.text) for cell in
                  browser.find_elements(By.CSS_SELECTOR, f"#signatures tbody td:nth-child({column})")]
        assert values == sorted(values, reverse=descending) and len(set(values)) > 1
    browser.find_element(By.CSS_SELECTOR, '#sort-controls a[data-sort="verdict"]').click()
    WebDriverWait(browser, 20).until(
        lambda b: b.find_element(By.ID, "sorted-by").text.startswith("Sorted by verdict"))
    browser.save_screenshot(str(shots / "signatures-by-verdict-1400.png"))
    cells = browser.find_elements(By.CSS_SELECTOR, "#signatures tbody td:nth-child(2)")
    verdicts = [cell.text for cell in cells]
    ranks = ["single-host", "hardware-config", "software", "inconclusive", "not yet"]
    order = [next(i for i, v in enumerate(ranks) if v in text) for text in verdicts]
    assert order == sorted(order) and order[0] == 0
