"""The job settings app.js builds from GET /v1/job-fields, in a real headless Chromium: each served field is a
control of the page (the form's own or a built one stating its flag and default), a choice made there reaches
the solve, the job file and the flags command, and a bad value comes back as the API's error naming its field.

The server and browser are test_server_browser's fixtures (it skips, saying why, without selenium, Chromium or
chromedriver)."""

from __future__ import annotations

import json
import shlex
import urllib.request

import yaml

# test_page_browser imports test_server_browser, which skips this module too, saying why, where selenium or
# Chromium is missing
from test_page_browser import README_DOC, _headline, _no_severe, _open, _settled, record_bodies
from test_server_browser import (  # noqa: F401  (browser, served: the fixtures)
    WAIT_S,
    By,
    Select,
    WebDriverWait,
    _text,
    _type,
    browser,
    served,
)
from typer.testing import CliRunner

from optimizer.cli import app as cli_app

RECORD_SOLVES = record_bodies("/page/solve", "solvesSent")
# the settings chosen in the built controls, as the job document holds them
CHOSEN = {"context_parallel": "all_to_all", "optimizer_implementation": "foreach", "gradient_dtype": "fp32"}
# a measurement typed as --measured takes it, and the job.measured entry the page sends for it
MEASURED = (
    "16xB200@2:30k tok/s,150GiB",
    {"sku": "B200", "gpus": 16, "nodes": 2, "tokens_per_s": "30k tok/s", "peak_memory": "150GiB"},
)


def _fields(served) -> list[dict]:  # noqa: F811
    with urllib.request.urlopen(served + "/v1/job-fields", timeout=WAIT_S) as response:
        return json.loads(response.read())["fields"]


def test_every_served_field_is_a_control_and_a_choice_reaches_the_question(served, browser, tmp_path):  # noqa: F811
    _open(browser, served)
    browser.find_element(By.CSS_SELECTOR, "#more-job summary").click()
    for field in _fields(served):
        control = browser.find_element(By.ID, field["name"])  # the form's own, or the one app.js built
        if control.get_attribute("data-flag"):  # built: its label states the flag and the default
            label = control.find_element(By.XPATH, "./ancestor::label").text
            assert field["flag"] in label and field["default"] in label, (field["name"], label)
    browser.execute_script(RECORD_SOLVES)
    for name, value in CHOSEN.items():
        Select(browser.find_element(By.ID, name)).select_by_value(value)
    _type(browser, "measured", MEASURED[0])
    browser.find_element(By.ID, "plan").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "verdict") != "")
    _settled(browser)
    doc = {**README_DOC, "job": {**README_DOC["job"], **CHOSEN, "measured": [MEASURED[1]]}}
    assert browser.execute_script("return window.solvesSent;") == [doc]
    assert _text(browser, "verdict") == _headline(doc, tmp_path)
    job_yaml = yaml.safe_load(browser.find_element(By.ID, "job-yaml").get_attribute("textContent"))
    assert job_yaml["job"].items() >= CHOSEN.items()
    command = browser.find_element(By.ID, "flags-command").get_attribute("textContent")
    words = shlex.split(command)
    assert words[words.index("--context-parallel") + 1] == "all_to_all", command
    assert words[words.index("--measured") + 1] == MEASURED[0], command
    # the command the page prints, run, answers the page's headline
    printed = CliRunner().invoke(cli_app, [*words[1:], "--quiet"])
    assert printed.exit_code == 0 and printed.stdout.strip() == _text(browser, "verdict"), printed.output
    _no_severe(browser)


def test_a_bad_value_in_a_built_control_is_the_apis_error_naming_it(served, browser):  # noqa: F811
    _open(browser, served)
    browser.find_element(By.CSS_SELECTOR, "#more-job summary").click()
    _type(browser, "tokens", "")
    _type(browser, "dataset_tokens", "10B")
    _type(browser, "epochs", "two")
    browser.find_element(By.ID, "plan").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "error") != "")
    message = _text(browser, "error")
    assert message.startswith("request body, field 'job.epochs': "), message
    assert "\n" not in message and "Traceback" not in message
    _no_severe(browser, answered="422")
