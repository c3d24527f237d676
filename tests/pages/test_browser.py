"""The pages in headless Chromium over real HTTP: log in, search, open a signature, phone size.

Needs Debian's `chromium` and `chromium-driver` (CI installs both); skipped only when absent.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rca.support import ai_rca, post_rca, seed

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
