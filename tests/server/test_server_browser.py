"""The page of gpuplan serve in a real browser (headless Chromium through selenium): the README's 70B question
asked on the form gets the CLI's verdict and the frontier chart with the chosen plan marked; moving the
what-if deadline solves again and changes the plan; the chosen plan's export comes back. Screenshots go
to the test's tmp dir.

It runs against ``gpuplan serve --port 0`` started here (a subprocess on 127.0.0.1), or against a server
already running at ``GPUPLAN_SERVE_URL`` (a loopback URL). It skips, saying why, without selenium, Chromium
or chromedriver (Debian: ``apt-get install chromium chromium-driver``; ``.ci/run`` installs them)."""

from __future__ import annotations

import ipaddress
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from paths import ROOT

try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service as DriverService
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    pytest.skip("selenium is not installed (pip install selenium; the test extra has it)", allow_module_level=True)

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "Chromium and chromedriver are not installed (Debian: apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )
for _needed in ("fastapi", "uvicorn"):
    pytest.importorskip(_needed, reason=f"{_needed} is not installed (pip install 'gpuplan[serve]')")

from serving import start_serve  # noqa: E402

from optimizer import api  # noqa: E402
from optimizer.inputs.files import expand_models, load_job  # noqa: E402
from optimizer.inputs.schema import Problem  # noqa: E402
from optimizer.present import render  # noqa: E402

JOB = ROOT / "problems" / "llama-70b-within-5-days.yaml"
WAIT_S = 120  # the longest any one step waits (a cold solve on a busy machine is a few seconds)


def _wait_for(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/v1/health", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"no gpuplan serve at {url} within {seconds:g} s")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The URL of a running gpuplan serve on a loopback address."""
    given = os.environ.get("GPUPLAN_SERVE_URL")
    if given:
        host = urllib.parse.urlsplit(given).hostname or ""
        assert ipaddress.ip_address(host).is_loopback, f"GPUPLAN_SERVE_URL must be a loopback address, not {host}"
        _wait_for(given.rstrip("/"), 30)
        yield given.rstrip("/")
        return
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    proc, url = start_serve(log, "--host", "127.0.0.1")
    try:
        assert url, f"gpuplan serve did not say where it listens:\n{log.read_text()}"
        _wait_for(url, 30)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    options = Options()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",  # as root (CI), Chromium's sandbox does not start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--window-size=1280,2400",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=DriverService(CHROMEDRIVER), options=options)
    except WebDriverException as exc:
        pytest.skip(f"Chromium does not start here: {exc.msg}")
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()


def _text(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def _type(driver, element_id: str, text: str) -> None:
    box = driver.find_element(By.ID, element_id)
    box.clear()
    box.send_keys(text)


def _verdict_changes(driver, before: str) -> str:
    WebDriverWait(driver, WAIT_S).until(lambda d: _text(d, "verdict") not in ("", before))
    WebDriverWait(driver, WAIT_S).until(lambda d: d.find_element(By.ID, "plan").is_enabled())  # no solve left
    return _text(driver, "verdict")


def test_the_page_answers_the_readme_question_and_its_what_ifs(served, browser, tmp_path):
    problem = load_job(JOB)
    expected = api.plan(problem)
    # the page asks the question as typed (the model by its preset, not the file's shapes): the what-if's answer is
    # that question's (the file states the shapes rounded, and the two answers can differ by a few dollars)
    typed = {"name": "typed", "model": "llama-3.1-70b", "method": "full", "tokens": "20B", "seq_len": 4096}
    tighter = api.plan(
        Problem.model_validate(
            expand_models(
                {
                    "catalog": "default",
                    "objective": "cost",
                    "job": {**typed, "global_batch": 256},
                    "constraints": {"deadline": "2d"},
                }
            )
        )
    )
    assert expected.best is not None and tighter.best is not None
    assert tighter.best.label() != expected.best.label()  # a 2-day deadline takes other hardware

    browser.get(served + "/")
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))

    # the README's question, typed in: Llama 3.1 70B, full fine-tune, 20B tokens of 4,096, batch 256, within 5 days
    _type(browser, "model", "llama-3.1-70b")
    Select(browser.find_element(By.ID, "method")).select_by_visible_text("full")
    _type(browser, "tokens", "20B")
    _type(browser, "seq_len", "4096")
    _type(browser, "global_batch", "256")
    _type(browser, "deadline", "5d")
    _type(browser, "budget", "")
    Select(browser.find_element(By.ID, "catalog")).select_by_value("default")
    Select(browser.find_element(By.ID, "objective")).select_by_value("cost")
    browser.find_element(By.ID, "plan").click()
    verdict = _verdict_changes(browser, "")

    # the one-line verdict is the CLI's for the job file
    assert verdict == render.headline(expected), verdict
    assert verdict.startswith("Cheapest plan finishing within 5.0 days: 4 x 8 B200 (nodus-b200)")

    # the frontier as inline SVG: a point per frontier plan, the chosen one marked (bigger, green)
    chart = browser.find_element(By.CSS_SELECTOR, "#frontier svg")
    points = chart.find_elements(By.TAG_NAME, "circle")
    assert len(points) == len([p for p in expected.frontier if p.cost_usd])
    chosen = [c for c in points if c.get_attribute("fill") == "#2f8f46"]
    assert len(chosen) == 1 and chosen[0].get_attribute("r") == "7"
    title = chosen[0].find_element(By.TAG_NAME, "title").get_attribute("textContent")
    assert title.startswith(expected.best.label())
    assert browser.find_element(By.ID, "frontier").get_attribute("data-best") == expected.best.label()
    assert browser.find_elements(By.CSS_SELECTOR, "#frontier-table tr.chosen")
    # the memory bar and the runners-up with their break-even prices
    assert browser.find_element(By.CSS_SELECTOR, "#memory svg rect")
    runner_rows = browser.find_elements(By.CSS_SELECTOR, "#runners-up tbody tr")
    assert len(runner_rows) == len(expected.runners_up) > 0
    assert any("/GPU-h" in row.text for row in runner_rows)
    # the question again, as a command and a job file
    assert "gpuplan solve job.yaml" in _text(browser, "command")
    assert "deadline: 5d" in browser.find_element(By.ID, "job-yaml").get_attribute("textContent")
    browser.save_screenshot(str(tmp_path / "page-5-days.png"))

    # what if: the deadline slider to 2 days solves again, and the plan changes to the API's for --deadline 2d
    slider = browser.find_element(By.ID, "whatif-deadline")
    browser.execute_script("arguments[0].value = 2; arguments[0].dispatchEvent(new Event('change'));", slider)
    verdict_2d = _verdict_changes(browser, verdict)
    assert verdict_2d == render.headline(tighter), verdict_2d
    assert browser.find_element(By.ID, "deadline").get_attribute("value") == "2d"
    assert "deadline: 2d" in browser.find_element(By.ID, "job-yaml").get_attribute("textContent")
    assert _text(browser, "flags-command") == (
        "gpuplan solve --model llama-3.1-70b --method full --tokens 20B --seq-len 4096 --global-batch 256 "
        "--objective cost --deadline 2d"
    )
    browser.save_screenshot(str(tmp_path / "page-2-days.png"))

    # and typing a deadline into the form solves again too: back to 5 days, back to the README's plan
    _type(browser, "deadline", "5d")
    browser.find_element(By.ID, "deadline").send_keys(Keys.TAB)
    assert _verdict_changes(browser, verdict_2d) == verdict

    # the chosen plan's export: SkyPilot's task for 4 nodes of 8 B200
    Select(browser.find_element(By.ID, "export-kind")).select_by_value("skypilot")
    browser.find_element(By.ID, "export").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "export-text").is_displayed())
    WebDriverWait(browser, WAIT_S).until(lambda d: "num_nodes" in _text(d, "export-text"))
    exported = browser.find_element(By.ID, "export-text").get_attribute("textContent")
    assert "num_nodes: 4" in exported and "B200:8" in exported, exported[:500]
    assert browser.find_element(By.ID, "export-download").is_displayed()

    browser.save_screenshot(str(tmp_path / "page.png"))
    severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not severe, severe


def test_the_page_shows_bad_input_as_the_cli_words_it(served, browser):
    browser.get(served + "/")
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    _type(browser, "tokens", "20Q")
    browser.find_element(By.ID, "plan").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "error").is_displayed())
    message = _text(browser, "error")
    assert message.startswith("request body, field 'job.tokens': unknown suffix 'Q' in '20Q'"), message
