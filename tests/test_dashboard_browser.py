"""The dashboard in a real headless Chromium (Selenium + /usr/bin/chromedriver): charts render,
an event appended to the log shows up in the live feed without reload, the environment browser
shows a known environment's code. Runs with a token, so the page's token plumbing (API calls,
static files, the EventSource) is exercised too. Writes test-artifacts/dashboard.png."""

from __future__ import annotations

import shutil
import tempfile

import pytest
from conftest import ARTIFACTS
from dashboard_support import RUN_ID, Served, audit_run, write_run

from spade_engine.dashboard.app import create_app
from spade_engine.events import PolicyUpdated, SqliteEventLog, make_envelope
from spade_engine.events.store import DataDir

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
METRICS = ["win_rate_plain", "win_rate_hinted", "regret", "designer_reward", "validation_pass_rate", "novelty"]


@pytest.fixture()
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("chromium and chromium-driver are required (scripts/setup.sh --system installs them)")
    profile = tempfile.mkdtemp(prefix="spade-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1400,1900", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_dashboard_live_in_chromium(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    data_dir = tmp_path / "data"
    write_run(data_dir, audit_run())
    token = "browser-token"
    with Served(create_app(data_dir, RUN_ID, token=token, window=2)) as srv:
        browser.get(f"{srv.url}?token={token}")
        wait = WebDriverWait(browser, 30, poll_frequency=0.1)
        # every chart is drawn by plotly (an svg inside its div) with data from the run
        wait.until(lambda d: all(d.find_elements(By.CSS_SELECTOR, f"#chart-{m} svg.main-svg") for m in METRICS))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-regret .scatterlayer .trace"))
        wait.until(lambda d: "live" in d.find_element(By.ID, "status").text or "stopped" in d.find_element(By.ID, "status").text)
        assert browser.find_element(By.CSS_SELECTOR, "#counter-EnvironmentProposed .v").text == "6"
        assert browser.find_elements(By.CSS_SELECTOR, '#feed .ev[data-type="RunStopped"]')
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#policies tr[data-version="v1"]'))

        # an event appended to the log appears in the live feed within seconds, without reload
        marker = browser.execute_script("window.__marker = 1; return window.__marker;")
        log = SqliteEventLog(DataDir(data_dir).log_path(RUN_ID), RUN_ID)
        try:
            log.append([make_envelope(PolicyUpdated(version="v-live-42", parent_version="v1", checkpoint=None, step=2,
                                                    metrics={"loss": 0.125}), run_id=RUN_ID, producer="trainer")])
        finally:
            log.close()
        WebDriverWait(browser, 10, poll_frequency=0.1).until(
            lambda d: any("version=v-live-42" in e.text for e in d.find_elements(By.CSS_SELECTOR, '#feed .ev[data-type="PolicyUpdated"]')))
        assert browser.execute_script("return window.__marker;") == marker  # same page: no reload
        WebDriverWait(browser, 15, poll_frequency=0.2).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '#policies tr[data-version="v-live-42"]'))

        # the environment browser shows a known environment's code, checks, hint and lineage
        row = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, '#env-table tr[data-env-id="env-f"]'))
        row.click()
        wait.until(lambda d: "class CountEnv" in d.find_element(By.ID, "env-code").text)
        assert browser.find_elements(By.CSS_SELECTOR, "#env-code .hl .k")  # highlighted keywords
        assert browser.find_element(By.ID, "env-title").text == "env-f"
        assert "solution_replay" in browser.find_element(By.ID, "env-checks").text
        assert "boxed" in browser.find_element(By.ID, "env-hint").text
        detail = browser.find_element(By.ID, "env-detail").text
        assert "env-c" in detail and "env-a" in detail  # repair of env-c, memory example env-a

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
        logs = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
        assert not logs, logs
