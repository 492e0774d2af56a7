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
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    data_dir = tmp_path / "data"
    write_run(data_dir, audit_run())
    token = "browser-token"
    with Served(create_app(data_dir, RUN_ID, token=token, window=2)) as srv:
        browser.get(f"{srv.url}?token={token}")
        # a page redraw can replace an element between finding it and reading it: look again
        wait = WebDriverWait(browser, 30, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException])
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
        WebDriverWait(browser, 10, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda d: any("version=v-live-42" in e.text for e in d.find_elements(By.CSS_SELECTOR, '#feed .ev[data-type="PolicyUpdated"]')))
        assert browser.execute_script("return window.__marker;") == marker  # same page: no reload
        WebDriverWait(browser, 15, poll_frequency=0.2).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '#policies tr[data-version="v-live-42"]'))

        # the environment browser shows a known environment's code, checks, hint and lineage
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, '#env-table tr[data-env-id="env-f"] td:nth-child(2)').click() or True)
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


def _plotted(browser, div_id):
    """What plotly drew in one chart: its traces, shapes and legend entries, read from the page."""
    return browser.execute_script("""
        const d = document.getElementById(arguments[0]);
        if (!d || !d.data || !d._fullLayout) return null;
        return {
          traces: d.data.map(t => ({name: t.name, mode: t.mode, x: Array.from(t.x || []), y: Array.from(t.y || []),
                                    ids: t.customdata ? Array.from(t.customdata) : null})),
          shapes: (d.layout.shapes || []).map(s => ({type: s.type, y0: s.y0, y1: s.y1, xref: s.xref, showlegend: !!s.showlegend})),
          shownLegend: d._fullLayout.showlegend,
          legendItems: d.querySelectorAll('.legend .traces').length,
          yRange: d._fullLayout.yaxis.range,
          xTitle: d._fullLayout.xaxis.title.text,
        };""", div_id)


def _nums(values):
    return [None if v is None else float(v) for v in values]


def test_charts_show_what_the_api_says_and_env_urls_open(tmp_path, browser):
    """A short run's dashboard in Chromium: every difficulty chart plots the API's per-environment
    values, rolling means and the means' 95% intervals at the API's environment indices, the
    win-rate charts shade the run's frontier band, every chart has a short legend, each skill has
    a small chart of its own (its colour, same axes), training charts plot the PolicyUpdated metrics by
    policy version; a changed window refetches; an environment URL opens that environment, also
    on reload, with links from a rejected environment to its repair and back."""
    import httpx
    from dashboard_support import chart_run
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    data_dir = tmp_path / "data"
    write_run(data_dir, chart_run())
    with Served(create_app(data_dir, RUN_ID, window=5)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        wait = WebDriverWait(browser, 30, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException])
        browser.get(srv.url)
        wait.until(lambda d: d.execute_script("return document.body.dataset.loaded") is not None
                   and "stopped" in d.find_element(By.ID, "status").text)
        wait.until(lambda d: all((_plotted(d, f"chart-{m}") or {}).get("traces") for m in METRICS))
        series = c.get("api/series", params={"window": 5}).json()
        training = c.get("api/training", params={"window": 5}).json()
        assert series["environments"] == 36 and series["band"] == [0.3, 0.7]
        skills = sorted(g for g in series["groups"] if g != "*")
        assert skills == ["logic", "math", "text"]

        for m in METRICS:
            p = _plotted(browser, f"chart-{m}")
            assert p["shownLegend"] and p["xTitle"] == "environment index", m
            names = [t["name"] for t in p["traces"]]
            assert names == ["95% interval", "each environment", "mean of last 5"], (m, names)  # no line per skill
            assert p["legendItems"] == len(names) + (1 if m == "win_rate_plain" else 0), m
            api = series["groups"]["*"][m]
            band, dots, mean = p["traces"]
            assert dots["x"] == api["x"] and _nums(dots["y"]) == pytest.approx(api["y"]) and dots["ids"] == api["ids"], m
            assert mean["x"] == api["x"] and _nums(mean["y"]) == pytest.approx(api["mean"]), m
            assert band["x"] == api["x"] + api["x"][::-1] and _nums(band["y"]) == pytest.approx(api["hi"] + api["lo"][::-1]), m
            assert all(lo <= mu <= hi for lo, mu, hi in zip(api["lo"], api["mean"], api["hi"])), m
            assert max(api["x"]) <= 35 and len(set(api["x"])) == len(api["x"]) > 10, m  # spread over the run
        # small multiples: each skill's plain win rate in its own chart, its own colour
        multiples = browser.find_elements(By.CSS_SELECTOR, "#skill-multiples figure")
        assert [f.get_attribute("data-skill") for f in multiples] == skills
        colors = []
        for i, skill in enumerate(skills):
            band_, dots_, mean_ = _plotted(browser, f"multiple-chart-{i}")["traces"]
            api = series["groups"][skill]["win_rate_plain"]
            assert dots_["x"] == api["x"] and _nums(mean_["y"]) == pytest.approx(api["mean"]), skill
            colors.append(browser.execute_script(
                "return document.getElementById(arguments[0]).data[2].line.color", f"multiple-chart-{i}"))
            assert skill in multiples[i].text
        assert len(set(colors)) == len(skills)
        band = _plotted(browser, "chart-win_rate_plain")["shapes"]
        assert band == [{"type": "rect", "y0": 0.3, "y1": 0.7, "xref": "paper", "showlegend": True}]
        assert _plotted(browser, "chart-win_rate_plain")["yRange"] == pytest.approx([-0.04, 1.04])
        assert browser.find_elements(By.CSS_SELECTOR, "#chart-win_rate_plain .shapelayer path, #chart-win_rate_plain .layer-below path")

        # training: one chart per headline metric, each update's value at its step
        figs = browser.find_elements(By.CSS_SELECTOR, "#training-charts figure")
        headline = [m for m in training["metrics"] if m["headline"]]
        assert [f.get_attribute("data-metric") for f in figs] == [m["name"] for m in headline]
        assert [m["name"] for m in headline][:3] == ["loss", "kl", "grad_norm"] and training["x"] == [1, 2, 3, 4, 5, 6]
        for i, m in enumerate(headline):
            p = _plotted(browser, f"train-{i}")
            assert p["shownLegend"] and p["legendItems"] == 2 and p["xTitle"] == "policy version (step)", m["name"]
            each, mean = p["traces"]
            assert each["x"] == training["x"] and _nums(each["y"]) == pytest.approx(m["y"]), m["name"]
            assert _nums(mean["y"]) == pytest.approx(m["mean"]), m["name"]
        browser.find_element(By.ID, "training-all").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#training-charts figure")) == len(training["metrics"]))

        # one skill: its own environments and mean line
        from selenium.webdriver.support.ui import Select

        Select(browser.find_element(By.ID, "skill-filter")).select_by_value("logic")
        wait.until(lambda d: [t["name"] for t in _plotted(d, "chart-regret")["traces"]] == ["95% interval", "each", "logic", "all skills"])
        for m in METRICS:
            band, dots, mean, overall = _plotted(browser, f"chart-{m}")["traces"]
            api = series["groups"]["logic"][m]
            assert dots["x"] == api["x"] and dots["ids"] == api["ids"] and _nums(mean["y"]) == pytest.approx(api["mean"]), m
            assert _nums(overall["y"]) == pytest.approx(series["groups"]["*"][m]["mean"]), m
        # a click on a skill's small chart shows that skill above
        Select(browser.find_element(By.ID, "skill-filter")).select_by_value("")
        browser.find_element(By.CSS_SELECTOR, '#skill-multiples figure[data-skill="text"]').click()
        wait.until(lambda d: [t["name"] for t in _plotted(d, "chart-regret")["traces"]][2] == "text")
        Select(browser.find_element(By.ID, "skill-filter")).select_by_value("")

        # another rolling window: the page refetches, puts it in its URL, and plots the new means
        box = browser.find_element(By.ID, "window")
        box.clear()
        box.send_keys("3\n")
        w3 = c.get("api/series", params={"window": 3}).json()["groups"]["*"]["regret"]["mean"]
        wait.until(lambda d: _nums(_plotted(d, "chart-regret")["traces"][2]["y"]) == pytest.approx(w3))
        assert "window=3" in browser.current_url

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1400, min(height + 40, 4000))
        browser.execute_script("window.scrollTo(0, 0)")
        browser.save_screenshot(str(ARTIFACTS / "dashboard-charts.png"))
        browser.set_window_size(1400, 1900)

        # an environment URL opens the environment browser on it: a rejected one links to its repair
        browser.get(srv.url + "#/env/env-007")
        wait.until(lambda d: d.find_element(By.ID, "env-title").text == "env-007")
        assert "Rejected: syntax" in browser.find_element(By.ID, "env-repair").text
        link = browser.find_element(By.CSS_SELECTOR, '#env-repaired-by a[data-rel="repaired-by"]')
        assert link.text == "env-008" and link.get_attribute("href").endswith("#/env/env-008")
        link.click()
        wait.until(lambda d: d.find_element(By.ID, "env-title").text == "env-008")
        assert browser.current_url.endswith("#/env/env-008")
        back = browser.find_element(By.CSS_SELECTOR, '#env-repair-of a[data-rel="repair-of"]')
        assert back.text == "env-007" and "rejected: syntax" in browser.find_element(By.ID, "env-repair-of").text
        browser.refresh()  # the address alone is enough
        wait.until(lambda d: d.find_element(By.ID, "env-title").text == "env-008")
        assert "class CountEnv" in browser.find_element(By.ID, "env-code").text
        browser.back()  # history: the rejected environment again
        wait.until(lambda d: d.find_element(By.ID, "env-title").text == "env-007")
        # the table links the pair too, and /env/<id> redirects to the same view
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#env-table tr[data-env-id="env-014"] a[data-rel="repaired-by"]'))
        browser.get(srv.url + "env/env-015")
        wait.until(lambda d: d.find_element(By.ID, "env-title").text == "env-015")
        assert browser.current_url.endswith("/#/env/env-015")
        browser.get(srv.url + "#/env/no-such-env")
        wait.until(lambda d: "no such environment" in d.find_element(By.ID, "env-detail").text)

        severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE" and "no-such-env" not in e.get("message", "")]
        assert not severe, severe  # nothing refused by the CSP, no script errors


def test_run_text_stays_text_in_charts_legends_and_views(tmp_path, browser):
    """Skill names, env ids, hints and check details from the run are shown as text: in chart
    legends and hover labels (plotly's markup escaped), in the table and in the environment view."""
    from dashboard_support import proposed, scored, started, validated
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    evil = '<img src=x onerror="window.__pwned=1"><b>bold</b>'
    env_id = 'env-<i onmouseover="window.__pwned=2">x</i>'
    ev = [started(), proposed(env_id, skill=evil), validated(env_id), *scored(env_id, [1, 0], [1, 1], 0.5, skill=evil)]
    write_run(tmp_path / "data", ev)
    with Served(create_app(tmp_path / "data", RUN_ID)) as srv:
        wait = WebDriverWait(browser, 30, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException])
        from urllib.parse import quote

        browser.get(srv.url + "#/env/" + quote(env_id, safe=""))
        wait.until(lambda d: d.find_element(By.ID, "env-title").text == env_id)
        wait.until(lambda d: d.execute_script("return document.body.dataset.loaded") is not None)
        wait.until(lambda d: len(d.execute_script("return document.getElementById('chart-regret').data || []")) == 3)
        assert browser.find_element(By.CSS_SELECTOR, "#skill-multiples figure .name").text.startswith(evil)
        from selenium.webdriver.support.ui import Select

        Select(browser.find_element(By.ID, "skill-filter")).select_by_value(evil)
        wait.until(lambda d: evil in d.find_element(By.CSS_SELECTOR, "#chart-regret .legend").text)  # literal text
        assert browser.find_element(By.CSS_SELECTOR, f'#env-table tr td:nth-child(2)').text == evil
        assert evil in browser.find_element(By.ID, "env-detail").text
        assert not browser.find_elements(By.CSS_SELECTOR, 'img[src="x"], #charts b, #env-detail b:not(:empty) i, #env-table i')
        assert browser.execute_script("return window.__pwned === undefined")
