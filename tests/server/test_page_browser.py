"""The page of gpuplan serve in a real headless Chromium, past the README question (tests/server/test_server_browser.py):
the what-if slider keyed faster than the solves come back ends where the keys left it; an error takes the last
verdict away; the memory bar states its GiB; the spot, precision, LoRA rank, compile and GPU-limit fields reach
the solve; a frontier point shows its plan and exports it, and its whole layout goes to /v1/check; every option
(/v1/options), each checkable; a portfolio opened from a file, its schedule and pool use; the catalogs the server
offers (an imported SkyPilot one served beside the bundled ones) and their offers and prices. Each compares the
page with what the library or the API answers for the same question.

The server and browser are test_server_browser's fixtures (it skips, saying why, without selenium, Chromium or
chromedriver). The slider's test wraps the page's fetch to hold each answer back, so that answers come back
after the next key press, as on a busy server."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
import yaml
from paths import DATA
from serving import start_serve

# test_server_browser first: it skips this module too, saying why, where selenium or Chromium is missing
from test_server_browser import (  # noqa: F401  (browser, served: the fixtures)
    WAIT_S,
    By,
    Keys,
    Select,
    WebDriverWait,
    _text,
    _type,
    _wait_for,
    browser,
    served,
    webdriver,
)
from typer.testing import CliRunner

from optimizer import api, cli
from optimizer.inputs.files import load_job
from optimizer.present import render

# the README's question as the page's form sends it (no field left at its default)
README_DOC = {
    "catalog": "default",
    "objective": "cost",
    "job": {
        "name": "llama-3.1-70b",
        "model": "llama-3.1-70b",
        "method": "full",
        "tokens": "20B",
        "seq_len": 4096,
        "global_batch": 256,
    },
    "constraints": {"deadline": "5d"},
}

# each answer held back this long in the page, longer than the time between two key presses below
SLOW_FETCH = """
const fetchNow = window.fetch;
window.fetch = (url, options) => fetchNow(url, options).then(
  (response) => new Promise((done) => setTimeout(() => done(response), arguments[0])));
"""


def _headline(doc: dict, tmp_path) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return render.headline(api.plan(load_job(path)))


def _open(browser, served) -> None:  # noqa: F811
    browser.get(served + "/")
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))


def _settled(browser) -> None:  # noqa: F811
    """No solve in flight or waiting to start."""
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-solving") != "true"
    )
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "plan").is_enabled())


def _ask(browser, served) -> str:  # noqa: F811
    """The README question, as the form holds it when the page opens: its verdict."""
    _open(browser, served)
    browser.find_element(By.ID, "plan").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "verdict") != "")
    _settled(browser)
    return _text(browser, "verdict")


def _no_severe(browser, answered: str = "") -> None:  # noqa: F811
    """No errors in the browser's console but the network's for a status the test asked for (``answered``)."""
    severe = [
        entry
        for entry in browser.get_log("browser")
        if entry["level"] == "SEVERE"
        and not (answered and entry["source"] == "network" and answered in entry["message"])
    ]
    assert not severe, severe


def test_arrow_keys_on_the_deadline_slider_end_where_the_keys_left_it(served, browser, tmp_path):  # noqa: F811
    two_days = _headline({**README_DOC, "constraints": {"deadline": "2d"}}, tmp_path)
    assert _ask(browser, served) == _headline(README_DOC, tmp_path)
    browser.execute_script(SLOW_FETCH, 800)  # answers come back after the next key press
    slider = browser.find_element(By.ID, "whatif-deadline")
    for _ in range(6):  # 5 days, six steps of half a day: 2 days
        slider.send_keys(Keys.ARROW_LEFT)
        time.sleep(0.5)  # past the page's wait for the slider to rest: each press starts a solve
    _settled(browser)
    assert browser.find_element(By.ID, "deadline").get_attribute("value") == "2d"
    assert slider.get_attribute("value") == "2"
    assert _text(browser, "verdict") == two_days
    time.sleep(2)  # an answer to an earlier press, come back late, changes nothing
    assert slider.get_attribute("value") == "2"
    assert _text(browser, "verdict") == two_days
    assert _text(browser, "whatif-deadline-text") == "2 days"
    _no_severe(browser)


def record_bodies(path: str, kept: str) -> str:
    """A script keeping the JSON body of every request the page sends to ``path`` in ``window[kept]``."""
    return f"""
window.{kept} = [];
const fetchUnrecorded_{kept} = window.fetch;
window.fetch = (url, options) => {{
  if (String(url).endsWith("{path}")) window.{kept}.push(JSON.parse(options.body));
  return fetchUnrecorded_{kept}(url, options);
}};
"""


# the page's /page/solve requests, counted in window.solvesSent as the page sends them
COUNT_SOLVES = record_bodies("/page/solve", "solvesSent")


def test_keys_pressed_faster_than_the_slider_rests_send_one_solve(served, browser, tmp_path):  # noqa: F811
    assert _ask(browser, served)
    browser.execute_script(COUNT_SOLVES)
    slider = browser.find_element(By.ID, "whatif-deadline")
    slider.send_keys(Keys.ARROW_LEFT * 6)  # six presses at once, 5 days to 2: one solve, once the slider rests
    _settled(browser)
    sent = browser.execute_script("return window.solvesSent;")
    assert [doc["constraints"] for doc in sent] == [{"deadline": "2d"}]
    assert _text(browser, "verdict") == _headline({**README_DOC, "constraints": {"deadline": "2d"}}, tmp_path)
    assert slider.get_attribute("value") == "2" and _text(browser, "whatif-deadline-text") == "2 days"
    _no_severe(browser)


def test_an_error_takes_the_last_verdict_away(served, browser):  # noqa: F811
    assert _ask(browser, served)
    _type(browser, "tokens", "20Q")
    browser.find_element(By.ID, "plan").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "error").is_displayed())
    _settled(browser)
    assert _text(browser, "error").startswith("request body, field 'job.tokens': unknown suffix 'Q'")
    assert not browser.find_element(By.ID, "verdict").is_displayed()
    assert browser.find_element(By.ID, "verdict").get_attribute("textContent") == ""
    assert not browser.find_element(By.ID, "answer").is_displayed()
    # and a good answer again takes the error away
    _type(browser, "tokens", "20B")
    browser.find_element(By.ID, "plan").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "verdict") != "")
    assert not browser.find_element(By.ID, "error").is_displayed()


def test_the_memory_bar_states_each_part_in_gib(served, browser):  # noqa: F811
    assert _ask(browser, served)
    parts = browser.find_elements(By.CSS_SELECTOR, "#memory svg rect")
    assert [p.get_attribute("data-part") for p in parts] == [
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "reserve",
    ]
    legend = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#memory-legend li")]
    # the figures as the API states them for the same question
    answer = _post(served, "/v1/solve", README_DOC)
    figures = answer["best"]["memory_gib"]
    assert legend == [
        f"{name}: {figures[name]:.1f} GiB" for name in ("weights", "gradients", "optimizer", "activations", "reserve")
    ]
    for part in parts:  # each segment's tooltip has its figure; the wide ones say it on the bar
        name = part.get_attribute("data-part")
        title = part.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        assert title == f"{name}: {figures[name]:.1f} GiB"
    on_bar = [
        t.get_attribute("textContent") for t in browser.find_elements(By.CSS_SELECTOR, "#memory svg text[data-part]")
    ]
    assert f"activations {figures['activations']:.1f} GiB" in on_bar, on_bar
    assert all(any(ch.isdigit() for ch in text) for text in on_bar), on_bar
    caption = browser.find_element(By.CSS_SELECTOR, "#memory svg > text:last-of-type").get_attribute("textContent")
    assert caption.startswith(f"{figures['total']:.1f} GiB of {figures['capacity']:.1f} GiB")
    assert browser.find_elements(By.CSS_SELECTOR, "#memory svg line[data-line='capacity']")
    headroom = [note for note in answer["notes"] if note.startswith("memory headroom")]
    assert _text(browser, "memory-headroom") == (headroom[0] if headroom else "")
    if "headroom" in figures:  # the line where the API states the headroom in GiB
        assert browser.find_elements(By.CSS_SELECTOR, "#memory svg line[data-line='headroom']")
    else:
        assert not browser.find_elements(By.CSS_SELECTOR, "#memory svg line[data-line='headroom']")
    # a plan whose memory_gib states a headroom (the API's answers do not yet): its line, short of the capacity
    with_headroom = {**figures, "headroom": 16.8}
    browser.execute_script(
        "drawMemory(document.getElementById('memory'), document.getElementById('memory-legend'), arguments[0]);",
        {"memory_gib": with_headroom},
    )
    capacity = browser.find_element(By.CSS_SELECTOR, "#memory svg line[data-line='capacity']")
    headroom_line = browser.find_element(By.CSS_SELECTOR, "#memory svg line[data-line='headroom']")
    assert float(headroom_line.get_attribute("x1")) < float(capacity.get_attribute("x1"))
    assert "headroom: 16.8 GiB" in browser.find_element(By.ID, "memory-legend").text
    caption = browser.find_element(By.CSS_SELECTOR, "#memory svg > text:last-of-type").get_attribute("textContent")
    assert caption.endswith(f"headroom 16.8 GiB (fits up to {figures['capacity'] - 16.8:.1f} GiB)"), caption
    _no_severe(browser)


def _post(served, route: str, body: dict, text: bool = False):  # noqa: F811
    """What the API answers for the body: its JSON (or its text)."""
    request = urllib.request.Request(
        served + route, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=WAIT_S) as response:
        answer = response.read().decode()
    return answer if text else json.loads(answer)


# the page's /v1/check bodies, kept in window.checksSent as the page sends them
RECORD_CHECKS = record_bodies("/v1/check", "checksSent")


def _label(plan: dict) -> str:
    """A plan's label as the page and the CLI print it (results.Plan.label)."""
    per = f"{plan['nodes']} x {plan['gpus_per_node']}" if plan["nodes"] > 1 else f"{plan['gpus']}"
    return f"{per} {plan['sku']}" + (f" ({plan['offer']})" if plan["offer"] else "")


def _layout(plan: dict) -> dict:
    """A plan's hardware and layout as /v1/check's check: mapping states them (the CLI's check flags)."""
    strategy = plan["strategy"]
    recompute = strategy["recompute"]
    if recompute == "full" and strategy["recompute_layers"]:
        recompute = f"layers:{strategy['recompute_layers']}"
    layout = {"sku": plan["offer"] or plan["sku"], "gpus": plan["gpus"], "nodes": plan["nodes"]}
    for name in ("tp", "pp", "shard_degree", "virtual_stages", "cp", "ep", "expert_tp"):
        if strategy[name] is not None:
            layout[name] = strategy[name]
    layout.update(micro_batch=strategy["micro_batch"], grad_accum=strategy["grad_accum"])
    layout.update(zero=strategy["zero_stage"], recompute=recompute, offload=strategy["offload"])
    layout["framework"] = strategy["framework"]
    if plan["spot"]:
        layout["spot"] = True
    return layout


def test_spot_precision_lora_rank_compile_and_gpu_counts_reach_the_solve(served, browser, tmp_path):  # noqa: F811
    _open(browser, served)
    assert not browser.find_element(By.ID, "lora_rank").is_displayed()  # full fine-tuning has no rank
    Select(browser.find_element(By.ID, "method")).select_by_visible_text("lora")
    _type(browser, "lora_rank", "64")
    Select(browser.find_element(By.ID, "precision")).select_by_value("fp8")
    browser.find_element(By.ID, "compile").click()
    Select(browser.find_element(By.ID, "spot")).select_by_value("never")
    _type(browser, "max_gpus", "16")
    _type(browser, "gpu_count", "8")
    browser.find_element(By.ID, "plan").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "verdict") != "")
    _settled(browser)
    doc = {
        **README_DOC,
        "job": {**README_DOC["job"], "method": "lora", "lora_rank": 64, "precision": "fp8", "compile": True},
        "constraints": {"deadline": "5d", "max_gpus": 16, "spot": "never", "gpu": {"count": 8}},
    }
    job_yaml = yaml.safe_load(browser.find_element(By.ID, "job-yaml").get_attribute("textContent"))
    assert job_yaml["job"]["lora_rank"] == 64 and job_yaml["job"]["precision"] == "fp8"
    assert job_yaml["job"]["compile"] is True
    assert job_yaml["constraints"]["spot"] == "never" and job_yaml["constraints"]["max_gpus"] == 16
    assert job_yaml["constraints"]["gpu"]["count"] == 8
    assert _text(browser, "verdict") == _headline(doc, tmp_path)
    label = browser.find_element(By.ID, "frontier").get_attribute("data-best")
    assert "(spot)" not in label
    _no_severe(browser)


def test_gpu_limits_reach_the_solve(served, browser, tmp_path):  # noqa: F811
    """Max nodes, the least GPU memory and the providers ticked: the job's constraints, as the API answers."""
    _open(browser, served)
    with urllib.request.urlopen(served + "/v1/catalogs/default", timeout=WAIT_S) as response:
        providers = sorted({row["provider"] for row in json.loads(response.read())["rows"] if row["provider"]})
    boxes = browser.find_elements(By.CSS_SELECTOR, "#gpu-providers input")
    assert [box.get_attribute("value") for box in boxes] == providers
    _type(browser, "max_nodes", "4")
    _type(browser, "min_memory", "150GB")
    picked = providers[:2]
    for box in boxes:
        if box.get_attribute("value") in picked:
            box.click()
    browser.find_element(By.ID, "plan").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "verdict") != "")
    _settled(browser)
    constraints = {"deadline": "5d", "max_nodes": 4, "gpu": {"min_memory": "150GB", "providers": picked}}
    job_yaml = yaml.safe_load(browser.find_element(By.ID, "job-yaml").get_attribute("textContent"))
    assert job_yaml["constraints"] == constraints
    doc = {**README_DOC, "constraints": constraints}
    assert _text(browser, "verdict") == _headline(doc, tmp_path)
    best = _post(served, "/v1/solve", doc)["best"]  # the README's B200s are Nodus's: another provider's plan
    assert best["provider"] in picked and best["nodes"] <= 4
    assert browser.find_element(By.ID, "frontier").get_attribute("data-best") == _label(best)
    _no_severe(browser)


def test_a_frontier_point_shows_its_plan_and_the_check_form_checks_it(served, browser):  # noqa: F811
    assert _ask(browser, served)
    answer = _post(served, "/v1/solve", README_DOC)
    best = browser.find_element(By.ID, "frontier").get_attribute("data-best")
    assert _text(browser, "shown-label") == best
    points = browser.find_elements(By.CSS_SELECTOR, "#frontier svg circle")
    other = next(p for p in points if p.get_attribute("fill") != "#2f8f46")
    key = other.get_attribute("data-key")
    plan = answer["frontier"][int(key.removeprefix("frontier[").removesuffix("]"))]
    label = other.find_element(By.TAG_NAME, "title").get_attribute("textContent").split(":")[0]
    # by keyboard: focus the point, press Enter
    browser.execute_script("arguments[0].focus();", other)
    webdriver.ActionChains(browser).send_keys(Keys.ENTER).perform()
    WebDriverWait(browser, 10).until(lambda d: _text(d, "shown-label") == label)
    assert other.get_attribute("aria-pressed") == "true"
    assert f"{plan['memory_gib']['activations']:.1f} GiB" in browser.find_element(By.ID, "memory-legend").text
    # by mouse: the chosen point shows the chosen plan again
    next(p for p in points if p.get_attribute("fill") == "#2f8f46").click()
    WebDriverWait(browser, 10).until(lambda d: _text(d, "shown-label") == best)
    other.click()
    WebDriverWait(browser, 10).until(lambda d: _text(d, "shown-label") == label)
    # its export is this plan's
    Select(browser.find_element(By.ID, "export-kind")).select_by_value("skypilot")
    browser.find_element(By.ID, "export").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "num_nodes" in _text(d, "export-text"))
    exported = browser.find_element(By.ID, "export-text").get_attribute("textContent")
    assert exported == _post(
        served, "/v1/export", {**README_DOC, "export": {"kind": "skypilot", "plan": plan}}, text=True
    )

    # check this layout: the plan's hardware and whole layout go to /v1/check at once, which answers for that plan
    browser.execute_script(RECORD_CHECKS)
    browser.find_element(By.ID, "shown-check").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "check-verdict") != "")
    assert browser.find_element(By.ID, "check-sku").get_attribute("value") == plan["offer"]
    assert browser.find_element(By.ID, "check-gpus").get_attribute("value") == str(plan["gpus"])
    assert browser.find_element(By.ID, "check-pp").get_attribute("value") == str(plan["strategy"]["pp"])
    sent = browser.execute_script("return window.checksSent;")
    assert [body["check"] for body in sent] == [_layout(plan)]
    checked = _post(served, "/v1/check", {**README_DOC, "check": _layout(plan)})
    assert checked["strategy"] == plan["strategy"]
    assert (checked["hours"], checked["cost_usd"]) == (plan["hours"], plan["cost_usd"])
    verdict = _text(browser, "check-verdict")
    assert verdict.startswith(f"{checked['gpus']} x {checked['sku']} ({checked['offer']}): fits, "), verdict
    assert f"${checked['cost_usd']['p50']:,.2f}" in verdict, verdict
    assert "bad" not in browser.find_element(By.ID, "check-verdict").get_attribute("class")
    assert browser.find_elements(By.CSS_SELECTOR, "#check-memory svg rect")

    # a layout the API refuses: its message, in red, in place of the last verdict
    _type(browser, "check-sku", "no-such-gpu")
    browser.find_element(By.ID, "check-run").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "no-such-gpu" in _text(d, "check-verdict"))
    assert "bad" in browser.find_element(By.ID, "check-verdict").get_attribute("class")
    assert not browser.find_elements(By.CSS_SELECTOR, "#check-memory svg")
    _no_severe(browser, answered="/v1/check - Failed to load resource: the server responded with a status of 422")


def test_a_runner_up_shows_its_plan_exports_it_and_checks_it(served, browser):  # noqa: F811
    assert _ask(browser, served)
    answer = _post(served, "/v1/solve", README_DOC)
    rows = browser.find_elements(By.CSS_SELECTOR, "#runners-up tbody tr")
    assert len(rows) == len(answer["runners_up"]) > 1
    at = 1
    plan = answer["runners_up"][at]
    rows[at].find_element(By.TAG_NAME, "button").click()
    WebDriverWait(browser, 10).until(lambda d: _text(d, "shown-label") == _label(plan))
    assert "shown" in rows[at].get_attribute("class")
    legend = browser.find_element(By.ID, "memory-legend").text
    assert f"weights: {plan['memory_gib']['weights']:.1f} GiB" in legend
    Select(browser.find_element(By.ID, "export-kind")).select_by_value("skypilot")
    browser.find_element(By.ID, "export").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "num_nodes" in _text(d, "export-text"))
    exported = browser.find_element(By.ID, "export-text").get_attribute("textContent")
    assert exported == _post(
        served, "/v1/export", {**README_DOC, "export": {"kind": "skypilot", "plan": plan}}, text=True
    )
    # the form changed since the answer (not solved again): the plan is checked on the job it answers
    _type(browser, "tokens", "40B")
    browser.execute_script(RECORD_CHECKS)
    browser.find_element(By.ID, "shown-check").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "check-verdict") != "")
    assert browser.execute_script("return window.checksSent;") == [{**README_DOC, "check": _layout(plan)}]
    # checked from the form, the layout is checked on the job the form holds now
    browser.find_element(By.ID, "check-run").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: len(d.execute_script("return window.checksSent;")) == 2)
    assert browser.execute_script("return window.checksSent;")[1]["job"]["tokens"] == "40B"
    _no_severe(browser)


def test_an_export_never_appears_under_a_plan_it_is_not_of(served, browser):  # noqa: F811
    assert _ask(browser, served)
    answer = _post(served, "/v1/solve", README_DOC)
    browser.execute_script(SLOW_FETCH, 1500)  # the export's answer comes back after another plan is shown
    Select(browser.find_element(By.ID, "export-kind")).select_by_value("skypilot")
    browser.find_element(By.ID, "export").click()
    assert _text(browser, "export-status") == "exporting skypilot…"
    rows = browser.find_elements(By.CSS_SELECTOR, "#runners-up tbody tr")
    rows[0].find_element(By.TAG_NAME, "button").click()
    WebDriverWait(browser, 10).until(lambda d: _text(d, "shown-label") == _label(answer["runners_up"][0]))
    time.sleep(2.5)  # the best plan's export has come back by now, and is dropped
    assert not browser.find_element(By.ID, "export-text").is_displayed()
    assert _text(browser, "export-status") == ""
    # exported now, it is the runner-up's
    browser.find_element(By.ID, "export").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "export-text").is_displayed())
    exported = browser.find_element(By.ID, "export-text").get_attribute("textContent")
    plan = answer["runners_up"][0]
    assert exported == _post(
        served, "/v1/export", {**README_DOC, "export": {"kind": "skypilot", "plan": plan}}, text=True
    )
    _no_severe(browser)


def test_the_check_form_takes_every_field_of_a_plans_layout(served, browser):  # noqa: F811
    """Each layout field /v1/check takes, from a plan as the API states it: a full recompute of some layers
    as layers:N, per-op recompute, context and expert parallelism, the framework, the offload, spot."""
    _open(browser, served)
    strategy = {
        "tp": 2,
        "pp": 4,
        "dp": 2,
        "zero_stage": 1,
        "shard_degree": 2,
        "micro_batch": 2,
        "grad_accum": 16,
        "recompute": "full",
        "recompute_layers": 12,
        "virtual_stages": 2,
        "offload": "optimizer",
        "cp": 2,
        "ep": 4,
        "expert_tp": 1,
        "framework": "megatron",
    }
    plan = {"sku": "B200", "offer": "nodus-b200", "spot": True, "nodes": 4, "gpus": 32, "strategy": strategy}
    fields = browser.execute_script("fillCheck(arguments[0]); return checkFields();", plan)
    assert fields == _layout(plan)
    assert fields["recompute"] == "layers:12" and fields["framework"] == "megatron" and fields["spot"] is True
    plan["strategy"] = {**strategy, "recompute": "op", "recompute_layers": None, "expert_tp": None, "offload": "none"}
    fields = browser.execute_script("fillCheck(arguments[0]); return checkFields();", plan)
    assert fields == _layout(plan) and fields["recompute"] == "op" and "expert_tp" not in fields
    # emptied, a field goes out of the request: gpuplan chooses it, as check does for a flag not given
    for name in ("check-tp", "check-cp", "check-recompute"):
        _type(browser, name, "")
    Select(browser.find_element(By.ID, "check-framework")).select_by_value("")
    fields = browser.execute_script("return checkFields();")
    assert not {"tp", "cp", "recompute", "framework"} & set(fields)
    _no_severe(browser)


def test_the_options_view_lists_every_option_as_the_api_does_and_checks_one(served, browser):  # noqa: F811
    _open(browser, served)
    browser.find_element(By.ID, "options-show").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "options-table").is_displayed())
    answer = _post(served, "/v1/options", README_DOC)
    options = answer["options"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#options-table tbody tr")
    assert len(rows) == len(options) > 1
    for row, option in zip(rows, options):
        cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        assert cells[0] == _label(option)
        assert cells[5] == ("ok" if option["feasible"] else f"rejected: {option['rejected_by']}")
        assert cells[4] == (f"${option['cost_usd']['p50']:,.2f}" if option["fits"] and option["cost_usd"] else "-")
    feasible = sum(option["feasible"] for option in options)
    assert _text(browser, "options-verdict").startswith(f"{len(options)} hardware options, {feasible} feasible")
    assert [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#options-notes li")] == answer["notes"]
    # an option's check button checks its layout through /v1/check
    at, option = next((i, o) for i, o in enumerate(options) if o["feasible"] and o["offer"])
    browser.execute_script(RECORD_CHECKS)
    rows[at].find_element(By.TAG_NAME, "button").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "check-verdict") != "")
    assert [body["check"] for body in browser.execute_script("return window.checksSent;")] == [_layout(option)]
    checked = _post(served, "/v1/check", {**README_DOC, "check": _layout(option)})
    assert _text(browser, "check-verdict").startswith(f"{checked['gpus']} x {checked['sku']} ({checked['offer']}")
    assert checked["strategy"] == option["strategy"] and checked["hours"] == option["hours"]
    _no_severe(browser)


def test_the_portfolio_form_plans_many_jobs_as_the_api_does(served, browser, tmp_path):  # noqa: F811
    _open(browser, served)
    example = browser.find_element(By.ID, "portfolio-text").get_attribute("value")
    assert "jobs:" in example and "file: llama-8b-lora.yaml" in example  # the example, bundled job files by name
    # a file opened from disk replaces the example in the box; planning sends the box
    path = tmp_path / "two-finetunes.yaml"
    path.write_text(example.replace("budget: $5,000", "budget: $6,000"))
    browser.find_element(By.ID, "portfolio-file").send_keys(str(path))
    WebDriverWait(browser, 10).until(
        lambda d: "$6,000" in d.find_element(By.ID, "portfolio-text").get_attribute("value")
    )
    text = browser.find_element(By.ID, "portfolio-text").get_attribute("value")
    assert text == path.read_text()
    assert _text(browser, "portfolio-status") == "two-finetunes.yaml opened"
    browser.find_element(By.ID, "portfolio-run").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "portfolio-verdict") != "")
    request = urllib.request.Request(
        served + "/v1/portfolio", text.encode(), {"Content-Type": "application/yaml"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=WAIT_S) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "optimal"  # so the page's solve found the same total
    verdict = _text(browser, "portfolio-verdict")
    assert verdict.startswith(f"optimal: ${answer['total_cost_usd']:,.2f} in all of a $6,000.00 budget"), verdict
    rows = browser.find_elements(By.CSS_SELECTOR, "#portfolio-schedule tbody tr")
    assert sorted(row.find_element(By.TAG_NAME, "td").text for row in rows) == sorted(
        item["job"] for item in answer["schedule"]
    )
    notes = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#portfolio-notes li")]
    assert notes == answer["notes"]
    # each pool's GPUs, its peak use, and its use over the horizon drawn
    pools = browser.find_elements(By.CSS_SELECTOR, "#portfolio-pools tbody tr")
    assert [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")][:3] for row in pools] == [
        [pool["offer"], str(pool["gpus"]), str(pool["peak_used"])] for pool in answer["pools"]
    ]
    assert answer["pools"] and any(pool["timeline"] for pool in answer["pools"])
    for row, pool in zip(pools, answer["pools"]):
        drawn = row.find_elements(By.CSS_SELECTOR, "svg path[data-line='in-use']")
        assert len(drawn) == (1 if pool["timeline"] else 0)
        assert row.find_elements(By.CSS_SELECTOR, "svg path[data-line='capacity']")

    # a portfolio the API refuses: its message, in red, and no schedule
    box = browser.find_element(By.ID, "portfolio-text")
    box.clear()
    box.send_keys("catalog: default\njobs: 3\n")
    browser.find_element(By.ID, "portfolio-run").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "portfolio-verdict") != verdict)
    assert "bad" in browser.find_element(By.ID, "portfolio-verdict").get_attribute("class")
    assert _text(browser, "portfolio-verdict").startswith("request body")
    assert not browser.find_element(By.ID, "portfolio-schedule").is_displayed()
    assert not browser.find_element(By.ID, "portfolio-pools").is_displayed()
    _no_severe(browser, answered="/v1/portfolio - Failed to load resource: the server responded with a status of 422")


def test_the_catalog_view_lists_its_offers_and_prices(served, browser):  # noqa: F811
    _open(browser, served)
    with urllib.request.urlopen(served + "/v1/catalogs/default", timeout=WAIT_S) as response:
        listing = json.loads(response.read())
    browser.find_element(By.ID, "catalog-show").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "catalog-table").is_displayed())
    rows = browser.find_elements(By.CSS_SELECTOR, "#catalog-table tbody tr")
    assert len(rows) == len(listing["rows"]) > 0
    for row, offer in zip(rows, listing["rows"]):
        cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        assert cells[:3] == [offer["sku"], offer["offer"] or "-", offer["provider"] or "-"]
        price = offer["price_usd_per_gpu_hour"]
        assert cells[6] == (f"${price:,.2f}" if price else "-")
    assert _text(browser, "catalog-description").startswith("default: ")
    _no_severe(browser)


def test_a_catalog_imported_from_skypilot_and_served_is_listed_and_shown(browser, tmp_path):  # noqa: F811
    """gpuplan catalog import skypilot, then gpuplan serve --catalog FILE: the page lists it beside the bundled
    ones, as the server's own (its default), and its offers and prices are the API's."""
    out = tmp_path / "skypilot.yaml"
    fixtures = DATA / "skypilot"
    done = CliRunner().invoke(cli.app, ["catalog", "import", "skypilot", "--from", str(fixtures), "--out", str(out)])
    assert done.exit_code == 0, done.output
    proc, url = start_serve(tmp_path / "serve.log", "--host", "127.0.0.1", "--catalog", str(out))
    try:
        assert url, (tmp_path / "serve.log").read_text()
        _wait_for(url, 30)
        with urllib.request.urlopen(url + "/v1/catalogs", timeout=WAIT_S) as response:
            catalogs = json.loads(response.read())["catalogs"]
        served_here = next(c for c in catalogs if not c["bundled"])
        _open(browser, url)
        rows = browser.find_elements(By.CSS_SELECTOR, "#catalog-list tbody tr")
        assert [row.get_attribute("data-catalog") for row in rows] == [c["name"] for c in catalogs]
        first = [cell.text for cell in rows[0].find_elements(By.TAG_NAME, "td")][:4]
        assert first == [
            served_here["name"],
            "gpuplan serve --catalog",
            str(served_here["offers"]),
            ", ".join(served_here["gpus"]),
        ]
        assert "chosen" in rows[0].get_attribute("class")  # the server's default
        # a bundled one, shown: the form's catalog becomes it, and the table lists its offers
        rows[1].find_element(By.TAG_NAME, "button").click()
        WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "catalog-description").startswith(catalogs[1]["name"]))
        assert browser.find_element(By.ID, "catalog").get_attribute("value") == catalogs[1]["name"]
        # and back to the imported one
        browser.find_elements(By.CSS_SELECTOR, "#catalog-list tbody tr")[0].find_element(By.TAG_NAME, "button").click()
        WebDriverWait(browser, WAIT_S).until(lambda d: _text(d, "catalog-description").startswith(served_here["name"]))
        with urllib.request.urlopen(url + f"/v1/catalogs/{served_here['name']}", timeout=WAIT_S) as response:
            listing = json.loads(response.read())
        offers = browser.find_elements(By.CSS_SELECTOR, "#catalog-table tbody tr")
        assert [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")][:2] for row in offers] == [
            [row["sku"], row["offer"] or "-"] for row in listing["rows"]
        ]
        assert _text(browser, "catalog-description") == f"{listing['catalog']}: {listing['description']}"
        types = [box.get_attribute("value") for box in browser.find_elements(By.CSS_SELECTOR, "#gpu-types input")]
        assert types == served_here["gpus"]
        _no_severe(browser)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_last_catalog_chosen_wins_over_an_answer_that_comes_back_late(served, browser):  # noqa: F811
    _open(browser, served)
    with urllib.request.urlopen(served + "/v1/catalogs", timeout=WAIT_S) as response:
        catalogs = {c["name"]: c for c in json.loads(response.read())["catalogs"]}
    # the first request held back 1.5 s, the rest answered at once: the first catalog's answer comes back last
    browser.execute_script("""
let hold = 1500;
const fetchFirst = window.fetch;
window.fetch = (url, options) => {
  const wait = hold;
  hold = 0;
  return fetchFirst(url, options).then((response) => new Promise((done) => setTimeout(() => done(response), wait)));
};
""")
    catalog = Select(browser.find_element(By.ID, "catalog"))
    catalog.select_by_value("nodus-2026-11")
    catalog.select_by_value("seed-003-rtx-vs-b200")
    time.sleep(2.5)
    types = [box.get_attribute("value") for box in browser.find_elements(By.CSS_SELECTOR, "#gpu-types input")]
    assert types == catalogs["seed-003-rtx-vs-b200"]["gpus"]
    chosen = browser.find_elements(By.CSS_SELECTOR, "#catalog-list tbody tr.chosen")
    assert [row.get_attribute("data-catalog") for row in chosen] == ["seed-003-rtx-vs-b200"]
    _no_severe(browser)


@pytest.fixture(autouse=True)
def _fresh_page(browser):  # noqa: F811
    """Each test opens the page itself; the log of the test before is read and dropped."""
    browser.get_log("browser")
    yield
