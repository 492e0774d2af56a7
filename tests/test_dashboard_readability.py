"""Can a person read the dashboard's difficulty charts at a glance? A headless Chromium at
1400x900 looks at a first-week run (16 skills, 320 environments) and checks what a reader
needs, in the page and in screenshots of each chart:

* each of the six charts shows the run's mean as one dark line with its band, not a line per skill:
  few legend entries, the legend in one or two rows that never scroll and never take the plot's
  width (it once took a third, scrolled, and listed 16 skills whose colours repeated);
* the mean line is drawn across the plot and, in the screenshot, no other saturated line colour
  competes with it; the frontier band is shaded where the run's band is;
* every tick label is at least 10 px;
* per-skill views: one small chart per skill, in colours no two skills share, with its whole
  caption visible; choosing a skill shows that skill's mean and band over the run's mean.

The screenshots go to test-artifacts/readability/ (looked at by people, never committed).
"""

from __future__ import annotations

import io
import shutil
import tempfile

import numpy as np
import pytest
from conftest import ARTIFACTS
from dashboard_support import RUN_ID, SIXTEEN_SKILLS, Served, many_skills_run, write_run

from spade_engine.dashboard.app import create_app

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
METRICS = ["win_rate_plain", "win_rate_hinted", "regret", "designer_reward", "validation_pass_rate", "novelty"]
MEAN_RGB = (17, 24, 39)  # #111827


@pytest.fixture()
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("chromium and chromium-driver are required (scripts/setup.sh --system installs them)")
    profile = tempfile.mkdtemp(prefix="spade-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--force-device-scale-factor=1", "--window-size=1400,900", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        # the page's viewport is exactly 1400x900 CSS pixels at scale 1 (a window of that size has less)
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


_GEOMETRY = """
const d = document.getElementById(arguments[0]);
const box = d.getBoundingClientRect();
const plot = d.querySelector('.nsewdrag').getBoundingClientRect();
const legend = d.querySelector('.legend');
const lb = legend ? legend.getBoundingClientRect() : null;
const ya = d._fullLayout.yaxis, size = d._fullLayout._size;
const ticks = [...d.querySelectorAll('.xtick text, .ytick text')].map(t => parseFloat(getComputedStyle(t).fontSize));
return {
  box: [box.left, box.top, box.width, box.height],
  plot: [plot.left - box.left, plot.top - box.top, plot.width, plot.height],
  legend: lb ? [lb.left - box.left, lb.top - box.top, lb.width, lb.height] : null,
  legendScrolls: !!(legend && [...legend.querySelectorAll('.scrollbar')].some(s => s.getBoundingClientRect().height > 0)),
  legendItems: d.querySelectorAll('.legend .traces').length,
  traces: d.data.length,
  lineColors: d.data.filter(t => t.mode === 'lines' && t.line && t.line.width > 0).map(t => t.line.color),
  tickSizes: ticks,
  y04: size.t + ya.l2p(0.4), y05: size.t + ya.l2p(0.5), y06: size.t + ya.l2p(0.6),
};
"""


def _geometry(browser, div_id):
    return browser.execute_script(_GEOMETRY, div_id)


def _shot(browser, css: str, name: str):
    from PIL import Image
    from selenium.webdriver.common.by import By

    element = browser.find_element(By.CSS_SELECTOR, css)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    png = element.screenshot_as_png
    out = ARTIFACTS / "readability"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.png").write_bytes(png)
    return Image.open(io.BytesIO(png)).convert("RGB")


def _near(pixels: np.ndarray, target, tol: float = 40) -> np.ndarray:
    """Which pixels (an H x W x 3 array) are within ``tol`` of the colour ``target``."""
    return ((pixels - np.array(target)) ** 2).sum(axis=-1) <= tol * tol


def _hex(color: str) -> tuple[int, int, int]:
    n = int(color.lstrip("#"), 16)
    return (n >> 16) & 255, (n >> 8) & 255, n & 255


def _wait_loaded(browser, url):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    wait = WebDriverWait(browser, 60, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException])
    wait.until(lambda d: d.execute_script("return document.body.dataset.loaded") is not None)
    wait.until(lambda d: all(d.execute_script("const e = document.getElementById(arguments[0]); return !!(e && e.data && e.data.length)",
                                              f"chart-{m}") for m in METRICS))
    return wait


def test_each_difficulty_chart_reads_at_a_glance_at_1400x900(tmp_path, browser):
    write_run(tmp_path / "data", many_skills_run())
    with Served(create_app(tmp_path / "data", RUN_ID, window=10)) as srv:
        _wait_loaded(browser, srv.url)
        assert browser.execute_script("return [window.innerWidth, window.innerHeight]") == [1400, 900]
        for m in METRICS:
            g = _geometry(browser, f"chart-{m}")
            left, top, width, height = g["box"]
            px, py, pw, ph = g["plot"]
            assert left >= 0 and left + width <= 1400 and width >= 380 and height >= 250, (m, g["box"])
            # one mean, its band and the environments: no line per skill
            assert g["traces"] <= 4 and g["legendItems"] <= 5, (m, g["traces"], g["legendItems"])
            assert g["lineColors"] == ["#111827"], (m, g["lineColors"])
            # the legend never scrolls, stays inside the chart, above the plot, and leaves it the width
            lx, ly, lw, lh = g["legend"]
            assert not g["legendScrolls"], m
            assert lx >= 0 and lx + lw <= width + 1 and ly + lh <= py + 2, (m, g["legend"], g["plot"])
            assert pw >= 0.8 * width and ph >= 0.45 * height, (m, g["plot"], g["box"])
            assert min(g["tickSizes"]) >= 10, (m, g["tickSizes"])
            # in the screenshot: the dark mean line runs across the plot, no other line colour competes
            img = _shot(browser, f"#chart-{m}", m)
            crop = img.crop((int(px), int(py), int(px + pw), int(py + ph)))
            a = np.asarray(crop, dtype=np.int32)
            cols = np.flatnonzero(_near(a, MEAN_RGB, 60).any(axis=0))
            assert len(cols) >= 0.8 * crop.width, (m, len(cols), crop.width)
            hsv = np.asarray(crop.convert("HSV"), dtype=np.int32)  # PIL: hue, saturation, value in 0-255
            saturated = (hsv[..., 1] > 115) & (hsv[..., 2] > 64)
            hues = np.bincount(hsv[..., 0][saturated] * 12 // 256, minlength=12)
            strong = np.flatnonzero(hues > 0.002 * a.shape[0] * a.shape[1])
            assert not len(strong), (m, hues.tolist())  # saturated colour: skill lines once covered the mean
            if m == "win_rate_plain":  # the frontier band is shaded at the run's band
                def green(row):  # the band's light green: green above red and blue
                    return (row[:, 1] > row[:, 0] + 8) & (row[:, 1] > row[:, 2] + 4)

                inside = a[int(g["y05"]) - int(py), ::5]
                outside = a[int(g["y06"]) - int(py) - 6, ::5]
                assert green(inside).mean() >= 0.5, green(inside).mean()
                assert green(outside).mean() < 0.2, green(outside).mean()


def test_per_skill_views_read_at_a_glance_at_1400x900(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    write_run(tmp_path / "data", many_skills_run())
    with Served(create_app(tmp_path / "data", RUN_ID, window=10)) as srv:
        wait = _wait_loaded(browser, srv.url)
        figs = browser.find_elements(By.CSS_SELECTOR, "#skill-multiples figure")
        assert [f.get_attribute("data-skill") for f in figs] == sorted(SIXTEEN_SKILLS)
        colors = []
        for i, fig in enumerate(figs):
            g = _geometry(browser, f"multiple-chart-{i}")
            assert g["box"][2] >= 250 and g["box"][3] >= 140 and g["box"][0] + g["box"][2] <= 1400, g["box"]
            assert g["traces"] == 3 and len(g["lineColors"]) == 1 and min(g["tickSizes"]) >= 10
            colors.append(_hex(g["lineColors"][0]))
            name = fig.find_element(By.CSS_SELECTOR, ".name")
            assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth + 1", name), name.text
            assert name.text.startswith(fig.get_attribute("data-skill") + " · ")
        # no two skills share a colour, nor look alike (arithmetic and ordering once shared a blue)
        for i in range(len(colors)):
            for j in range(i + 1, len(colors)):
                d = sum((a - b) ** 2 for a, b in zip(colors[i], colors[j])) ** 0.5
                assert d >= 60, (sorted(SIXTEEN_SKILLS)[i], sorted(SIXTEEN_SKILLS)[j], colors[i], colors[j])
        img = _shot(browser, "#by-skill", "small-multiples")
        assert img.width >= 1300
        # one skill chosen: its mean (its colour) over the run's mean (dotted grey), still one legend row or two
        Select(browser.find_element(By.ID, "skill-filter")).select_by_value("ordering")
        wait.until(lambda d: d.execute_script("return document.getElementById('chart-regret').data.length") == 4)
        color = colors[sorted(SIXTEEN_SKILLS).index("ordering")]
        for m in METRICS:
            g = _geometry(browser, f"chart-{m}")
            assert not g["legendScrolls"] and g["legend"][1] + g["legend"][3] <= g["plot"][1] + 2, m
            assert g["plot"][2] >= 0.8 * g["box"][2] and g["plot"][3] >= 0.45 * g["box"][3], m
            assert _hex(g["lineColors"][0]) == color and g["lineColors"][1] == "#6b7280", (m, g["lineColors"])
            img = _shot(browser, f"#chart-{m}", f"ordering-{m}")
            px, py, pw, ph = g["plot"]
            crop = np.asarray(img.crop((int(px), int(py), int(px + pw), int(py + ph))), dtype=np.int32)
            cols = np.flatnonzero(_near(crop, color, 50).any(axis=0))
            assert len(cols) >= 0.6 * crop.shape[1], (m, len(cols), crop.shape[1])
        severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
        assert not severe, severe
