"""The pages in headless Chromium over real HTTP: log in, search, open a signature, phone size.

Needs Debian's `chromium` and `chromium-driver` (CI installs both); skipped only when absent.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.rca import ai_rca, post_rca, seed

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
