"""The comparison report as a reader meets it: the committed real archive compared by the Spark job, the
report opened in Debian's headless Chromium (`make browser-tools`) at 1400 x 900. It must load without a
console error, say on its first screen what it found and what ran, and fit the page."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.paths import REPO_ROOT

GOLDEN = REPO_ROOT / "tests" / "resources" / "archives" / "burst"
WIDTH, HEIGHT = 1400, 900


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:  # make test installs both; a missing one is a broken set-up, not a test to skip
        pytest.fail(f"{name} is not installed: run `make browser-tools`")
    return found


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from spark.jobs.compare import parser, run
    from spark.session import local_session

    out = tmp_path_factory.mktemp("browser") / "report"
    [archive] = [p for p in GOLDEN.iterdir() if (p / "manifest.json").exists()]
    spark = local_session("local[1]")
    try:
        run(parser().parse_args([str(archive), "--baseline", "unpatched", "--candidate", "patched",
                                 "--out", str(out)]), spark=spark)
    finally:
        spark.stop()
    return out / "report.html"


@pytest.fixture(scope="module")
def page(report: Path) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _tool("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(_tool("chromedriver")), options=options)
    try:
        driver.get(report.as_uri())
        yield driver
    finally:
        driver.quit()


def test_the_report_loads_without_a_console_error_and_draws_its_plots(page: object) -> None:
    errors = [e["message"] for e in page.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    drawn = page.execute_script("return document.querySelectorAll('.plotly-graph-div .main-svg').length")
    assert drawn >= 2  # the cycle levels and the wakeup CDF, drawn by plotly.js from the report's own folder
    assert page.execute_script("return document.documentElement.scrollWidth") <= WIDTH  # no table off the page


def test_the_first_screen_says_what_was_found_and_what_ran(page: object) -> None:
    def on_first_screen(css: str) -> str:
        element = page.find_element("css selector", css)
        rect = element.rect
        assert rect["y"] + rect["height"] <= page.execute_script("return innerHeight"), f"{css} is below the fold"
        return element.text

    assert on_first_screen("#verdict") == "Verdict: improvement"
    finding = on_first_screen("#finding")
    assert "patched wakes a poll already waiting for a retry in" in finding and "against 16.92 s" in finding
    assert "nothing lost or duplicated" in finding
    builds = on_first_screen("table.ran")
    assert "unpatched" in builds and "5.3.3" in builds and "pop-retry-wakeup.jar" in builds
    assert "installed on org.apache.rocketmq.broker.longpolling.PopLongPollingService" in builds
    ran = on_first_screen("p.ran")
    assert "harness 0.1.0 (git 38e8cee631)" in ran and "host vm: 2 CPUs" in ran
