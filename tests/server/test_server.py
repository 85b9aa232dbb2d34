"""gpuplan serve: the routes answer what the CLI prints for the same documents, bad and hostile requests get
4xx with the CLI's message and field, and a real server (uvicorn on 127.0.0.1) keeps serving through
concurrent, oversized, slow and vanishing clients. Every loop here is bounded in count and time."""

from __future__ import annotations

import json
import shlex
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from paths import ROOT

pytest.importorskip("fastapi")
pytest.importorskip("httpx")  # fastapi's TestClient
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402
from serving import JSON, LOCAL, SMALL_JOB, YAML, post_json  # noqa: E402
from serving import get_json as _get  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from optimizer import api, server  # noqa: E402
from optimizer.cli import app as cli_app  # noqa: E402
from optimizer.inputs.files import load_job, load_portfolio  # noqa: E402
from optimizer.present.answers import model_rows  # noqa: E402
from optimizer.present.exports import export  # noqa: E402
from optimizer.present.jsonschema import json_schema  # noqa: E402
from optimizer.server.app import Running, create_app, listen  # noqa: E402
from optimizer.server.service import Busy, Limits, Service  # noqa: E402

JOB = ROOT / "problems" / "llama-70b-within-5-days.yaml"
PORTFOLIO = ROOT / "problems" / "portfolio-q1-finetunes.yaml"
runner = CliRunner()


@pytest.fixture(scope="module")
def service():
    svc = Service()
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def client(service):
    with TestClient(create_app(service), base_url=LOCAL) as c:
        yield c


@pytest.fixture(scope="module")
def readme_answer():
    return api.plan(load_job(JOB))


def cli(*args) -> object:
    result = runner.invoke(cli_app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result


def without_timing(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "solve_s"}


# --------------------------------------------------------------------------- answers


def test_solve_answers_the_readme_job_as_the_api_and_the_cli_do(client, readme_answer):
    r = client.post("/v1/solve", content=JOB.read_text(), headers=YAML)
    assert r.status_code == 200, r.text
    answer = r.json()
    # the same best plan as optimizer.api.plan on the file (the README's: 4 x 8 B200, Megatron TP 2 x PP 8)
    assert answer["status"] == "optimal"
    assert answer["best"] == readme_answer.best.model_dump(mode="json")
    assert answer["best"]["sku"] == "B200" and answer["best"]["gpus"] == 32
    # and the same JSON as gpuplan solve --format json, all of it but the solver's wall time
    printed = cli("solve", JOB, "--format", "json")
    assert printed.exit_code == 0
    assert without_timing(answer) == without_timing(json.loads(printed.stdout))


def test_a_json_body_is_the_same_question_as_its_yaml(client, readme_answer):
    document = yaml.safe_load(JOB.read_text())
    r = client.post("/v1/solve", content=json.dumps(document), headers=JSON)
    assert r.status_code == 200, r.text
    assert r.json()["best"] == readme_answer.best.model_dump(mode="json")


def test_options_answers_as_the_cli(client):
    r = client.post("/v1/options", content=JOB.read_text(), headers=YAML)
    assert r.status_code == 200, r.text
    printed = cli("options", JOB, "--format", "json")
    assert r.json() == json.loads(printed.stdout)


def test_check_takes_the_cli_flags_under_check(client):
    body = JOB.read_text() + "\ncheck: {sku: B200, gpus: 32, tp: 2, pp: 8, zero: 1}\n"
    r = client.post("/v1/check", content=body, headers=YAML)
    assert r.status_code == 200, r.text
    printed = cli("check", JOB, "--sku", "B200", "--gpus", "32", "--tp", "2", "--pp", "8", "--zero", "1", "-f", "json")
    assert printed.exit_code == 0, printed.output
    assert r.json() == json.loads(printed.stdout)
    assert r.json()["fits"] is True and r.json()["strategy"]["tp"] == 2


def test_check_with_a_plans_spot_offer_and_without_comparison(client):
    body = JOB.read_text() + "\ncheck: {sku: nodus-b200, gpus: 32, compare: false}\n"
    r = client.post("/v1/check", content=body, headers=YAML)
    assert r.status_code == 200, r.text
    assert r.json()["offer"] == "nodus-b200" and r.json()["optimum"] is None


def test_export_writes_what_the_cli_writes(client, readme_answer):
    body = JOB.read_text() + "\nexport: {kind: skypilot}\n"
    r = client.post("/v1/export", content=body, headers=YAML)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    assert 'filename="llama-3.1-70b-sft-skypilot.yaml"' in r.headers["content-disposition"]
    printed = cli("solve", JOB, "--export", "skypilot")
    assert printed.exit_code == 0
    assert r.text == printed.stdout
    assert r.text == export(readme_answer.best, "skypilot", job=load_job(JOB).job)
    r = client.post("/v1/export", content=JOB.read_text() + "\nexport: {kind: k8s}\n", headers=YAML)  # an alias
    assert r.status_code == 200 and 'filename="llama-3.1-70b-sft-kubernetes.yaml"' in r.headers["content-disposition"]
    # every kind downloads with its tool's suffix, from the registry (a Slurm script had come as .txt)
    r = client.post("/v1/export", content=JOB.read_text() + "\nexport: {kind: slurm}\n", headers=YAML)
    assert r.status_code == 200 and 'filename="llama-3.1-70b-sft-slurm.sh"' in r.headers["content-disposition"]


def test_export_of_a_given_plan(client, readme_answer):
    plan = readme_answer.frontier[0].model_dump(mode="json")
    document = yaml.safe_load(JOB.read_text()) | {"export": {"kind": "torchrun", "plan": plan}}
    r = client.post("/v1/export", content=json.dumps(document), headers=JSON)
    assert r.status_code == 200, r.text
    assert f"--nproc_per_node={plan['gpus_per_node']}" in r.text.replace(" ", "=") or str(plan["nodes"]) in r.text


def test_reference_routes_answer_as_the_cli(client):
    assert client.get("/v1/models").json() == {"models": model_rows()}
    assert client.get("/v1/models").json() == json.loads(cli("models", "-f", "json").stdout)
    assert client.get("/v1/schema/job").json() == json_schema("job")
    assert client.get("/v1/catalogs/default").json() == json.loads(cli("catalog", "default", "-f", "json").stdout)
    listed = client.get("/v1/catalogs").json()
    assert listed["default"] == "default" and "nodus-2026-11" in [c["name"] for c in listed["catalogs"]]
    for path in ("/v1/schema/nope", "/v1/catalogs/nope", "/v1/jobs/nope"):
        r = client.get(path)
        assert r.status_code == 404 and r.json()["detail"], path
    info = client.get("/v1/info").json()
    assert "skypilot" in info["export_kinds"] and info["limits"]["max_body_bytes"] == 2**20


def test_openapi_lists_every_route(client):
    paths = client.get("/openapi.json").json()["paths"]
    for route in ("/v1/solve", "/v1/check", "/v1/options", "/v1/portfolio", "/v1/export", "/v1/jobs/{job_id}"):
        assert route in paths
    assert "requestBody" in paths["/v1/solve"]["post"]


def test_the_page_and_its_files(client):
    page = client.get("/")
    assert page.status_code == 200 and '<form id="job"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/static/../bodies.py").status_code == 404
    bundle = client.post("/page/solve", content=JOB.read_text(), headers=YAML).json()
    assert bundle["headline"].startswith("Cheapest plan finishing within 5.0 days: 4 x 8 B200")
    assert bundle["frontier_svg"].startswith("<svg") and "#2f8f46" in bundle["frontier_svg"]  # the chosen point
    assert bundle["command"] == "gpuplan solve job.yaml" and "catalog: default" in bundle["job_yaml"]
    assert yaml.safe_load(bundle["job_yaml"]) == yaml.safe_load(JOB.read_text())


def test_the_pages_job_file_names_the_catalog_the_answer_used(client):
    """A query's ?catalog= over the body's catalog: the job file the page offers had kept the body's, so saved
    and asked again it answered on another catalog (issue 46: a saved question is the same question)."""
    bundle = client.post("/page/solve?catalog=nodus-2026-11", content=JOB.read_text(), headers=YAML).json()
    assert yaml.safe_load(bundle["job_yaml"])["catalog"] == "nodus-2026-11"
    assert bundle["answer"]["best"]["offer"].startswith("nodus")


def test_the_page_gives_the_question_as_flags_the_cli_answers_alike(client):
    # the document the page's form builds for the README's question
    document = {
        "catalog": "default",
        "objective": "cost",
        "job": {"name": "llama-3.1-70b", "model": "llama-3.1-70b", "method": "full", "tokens": "20B"}
        | {"seq_len": 4096, "global_batch": 256},
        "constraints": {"deadline": "5d", "gpu": {"types": ["B200", "H200"]}},
    }
    bundle = client.post("/page/solve", content=json.dumps(document), headers=JSON).json()
    command = bundle["flags_command"]
    assert command == (
        "gpuplan solve --model llama-3.1-70b --method full --tokens 20B --seq-len 4096 --global-batch 256 "
        "--objective cost --deadline 5d --gpu-types B200,H200"
    )
    printed = cli(*shlex.split(command)[1:], "--format", "json")
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.stdout)["best"] == bundle["answer"]["best"]
    # a job file the flags cannot say (model shapes, a name of its own) has the job file's command alone
    assert client.post("/page/solve", content=JOB.read_text(), headers=YAML).json()["flags_command"] is None


def test_the_page_writes_a_switch_as_its_flag(client):
    # a true/false job field is a switch on the command line (--master-weights/--no-master-weights): the flags
    # command once wrote "--master-weights False", which the CLI refuses as an extra argument
    document = {
        "catalog": "default",
        "job": {"name": "llama-3.1-8b", "model": "llama-3.1-8b", "tokens": "1B"}
        | {"master_weights": False, "variable_lengths": True},
        "constraints": {"gpu": {"types": ["H100-SXM"]}},
    }
    bundle = client.post("/page/solve", content=json.dumps(document), headers=JSON).json()
    command = bundle["flags_command"]
    assert "--no-master-weights" in command and "--variable-lengths" in command and "False" not in command
    printed = cli(*shlex.split(command)[1:], "--format", "json")
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.stdout)["best"] == bundle["answer"]["best"]


def test_a_solve_past_its_time_limit_is_an_answer(client):
    r = client.post("/v1/solve?time_limit=0.001", content=JOB.read_text(), headers=YAML)
    assert r.status_code == 200, r.text
    assert r.json()["status"] in ("optimal", "feasible", "unknown")


# --------------------------------------------------------------------------- bad input: the CLI's words


def _bad(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


BAD_JOBS = {
    "a bad unit": ("tokens: 20B", "tokens: 20Q", "job.tokens"),
    "an unknown field": ("  method: full", "  method: full\n  metod: full", "job.metod"),
    "a wrong type": ("seq_len: 4096", "seq_len: long", "job.seq_len"),
    "a missing field": ("  tokens: 20B\n", "", "job"),  # tokens or epochs: the job says which
    "a duplicate key": ("  method: full", "  method: full\n  method: lora", "job.method"),
    "malformed YAML": ("  method: full", "  method: [full", None),
    "an unknown catalog": ("catalog: default", "catalog: nodus-2099", "catalog"),
}


@pytest.mark.parametrize("case", list(BAD_JOBS))
def test_bad_input_is_422_with_the_message_and_field_the_cli_prints(client, tmp_path, case):
    old, new, field = BAD_JOBS[case]
    text = _bad(JOB.read_text(), old, new)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    printed = cli("solve", path, "-f", "json")
    assert printed.exit_code == 2, printed.output
    r = client.post("/v1/solve", content=text, headers=YAML)
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["field"] == field
    if case == "an unknown catalog":  # the service names the catalogs it offers; a file may name any path
        assert "unknown catalog 'nodus-2099'" in error["detail"] and "/v1/catalogs" in error["detail"]
        return
    assert error["detail"] == printed.stderr.strip().removeprefix("error: ").replace(str(path), "request body")


def test_wrong_types_and_unknown_fields_of_check_are_422(client, tmp_path):
    for fields, field in [
        ("{sku: B200, gpus: eight}", "check.gpus"),
        ("{sku: B200, gpus: 8, tpp: 2}", "check.tpp"),
        ("{sku: B200, gpus: 8, spot: maybe}", "check.spot"),
        ("{sku: B200, gpus: 8, recompute: some}", "check.recompute"),
        ("{sku: B999, gpus: 8}", "check.sku"),
        ("{sku: B200, gpus: 8, tp: 3}", "check.tp"),  # the library's ArgumentError, by its parameter
        ("[B200, 8]", "check"),
    ]:
        r = client.post("/v1/check", content=JOB.read_text() + f"\ncheck: {fields}\n", headers=YAML)
        assert r.status_code == 422 and r.json()["field"] == field, (fields, r.text)
    r = client.post("/v1/check", content=JOB.read_text(), headers=YAML)
    assert r.status_code == 422 and r.json()["field"] == "check"
    # the reason is the CLI's for the same flag
    r = client.post("/v1/check", content=JOB.read_text() + "\ncheck: {sku: B200, gpus: 0}\n", headers=YAML)
    printed = cli("check", JOB, "--sku", "B200", "--gpus", "0")
    assert printed.exit_code == 2
    assert r.json()["detail"] == "request body, field 'check.gpus': " + r.json()["reason"]
    assert printed.stderr.strip() == "error: command line, option '--gpus': " + r.json()["reason"]


def test_bodies_that_are_no_job(client):
    cases = [
        (b"", YAML, "the body is empty"),
        (b"\xff\xfe", YAML, "not UTF-8"),
        (b"[1, 2]", JSON, "top-level 'job:'"),
        (b"job: [1, 2]", YAML, "field 'job': Input should be a valid dictionary"),
        (b'{"job": {"model": "llama-3.1-8b", "tokens": "1B"},}', JSON, "malformed JSON"),
        (b'{"job": 1, "job": 2}', JSON, "duplicate"),
        (b'{"job": {"tokens": NaN}}', JSON, "NaN"),
    ]
    for body, headers, words in cases:
        r = client.post("/v1/solve", content=body, headers=headers)
        assert r.status_code == 422 and words in r.json()["detail"], (body, r.text)


def test_bodies_name_no_file_of_the_server(client):
    for old, new, field in [
        ("catalog: default", "catalog: /etc/passwd", "catalog"),
        ("    name: llama-3.1-70b ", "    hf_config: /etc/passwd\n    name: llama-3.1-70b ", "job.model.hf_config"),
        ("catalog: default", "source_path: /etc\ncatalog: default", "source_path"),
    ]:
        r = client.post("/v1/solve", content=_bad(JOB.read_text(), old, new), headers=YAML)
        assert r.status_code == 422 and r.json()["field"] == field, r.text
    for name in ("../../etc/passwd", "/etc/passwd", "nothing-here.yaml"):
        text = _bad(PORTFOLIO.read_text(), "file: llama-8b-lora.yaml", f"file: {name}")
        r = client.post("/v1/portfolio", content=text, headers=YAML)
        assert r.status_code == 422 and r.json()["field"] == "jobs[1].file", r.text
        assert "bundled job files" in r.json()["detail"]


def test_bad_query_parameters_are_422_naming_them(client):
    for query, field in [
        ("time_limit=abc", "time_limit"),
        ("time_limit=-1", "time_limit"),
        ("time_limit=1h", "time_limit"),  # past the synchronous cap: a job's to run
        ("catalog=../x", "catalog"),
        ("async=maybe", "async"),
    ]:
        r = client.post(f"/v1/solve?{query}", content=JOB.read_text(), headers=YAML)
        assert r.status_code == 422 and r.json()["field"] == field, (query, r.text)
        assert r.json()["detail"].startswith(f"query parameter '{field}': "), r.text
    r = client.post("/v1/portfolio?workers=99", content=PORTFOLIO.read_text(), headers=YAML)
    assert r.status_code == 422 and r.json()["field"] == "workers"
    r = client.post("/v1/export", content=JOB.read_text() + "\nexport: {kind: lsf}\n", headers=YAML)
    assert r.status_code == 422 and r.json()["field"] == "export.kind"


# --------------------------------------------------------------------------- hostile bodies


def test_a_huge_body_is_413(client):
    big = "# " + "x" * (2**20) + "\n" + JOB.read_text()
    r = client.post("/v1/solve", content=big, headers=YAML)
    assert r.status_code == 413 and "1,048,576" in r.json()["detail"]

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(40):
            yield b"# " + b"x" * 65536 + b"\n"

    r = client.post("/v1/solve", content=chunks(), headers=YAML)
    assert r.status_code == 413 and "more than" in r.json()["detail"]


def test_deep_nesting_and_alias_bombs_are_4xx(client):
    deep_json = '{"job": ' + "[" * 5000 + "]" * 5000 + "}"
    deep_yaml = "job:\n  model: " + "[" * 5000 + "]" * 5000 + "\n"
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    for body, headers, words in [
        (deep_json, JSON, "nests more than 64 levels"),
        (deep_yaml, YAML, "64"),
        (bomb, YAML, "values"),
    ]:
        r = client.post("/v1/solve", content=body, headers=headers)
        assert 400 <= r.status_code < 500, r.text
        assert words in r.json()["detail"], r.text


def test_too_many_waiting_is_503_and_then_it_serves_again():
    svc = Service(limits=Limits(solvers=1, max_waiting=0))
    gate = threading.Event()
    held = svc.submit(gate.wait, 30)
    try:
        with pytest.raises(Busy):
            svc.submit(time.sleep, 0)
        with TestClient(create_app(svc), base_url=LOCAL) as c:
            r = c.post("/v1/options", content=SMALL_JOB, headers=YAML)
            assert r.status_code == 503 and r.headers["retry-after"] == "2"
            gate.set()
            held.result(timeout=10)
            deadline = time.monotonic() + 10
            while svc.waiting and time.monotonic() < deadline:
                time.sleep(0.01)
            assert c.post("/v1/options", content=SMALL_JOB, headers=YAML).status_code == 200
    finally:
        gate.set()
        svc.close()


# --------------------------------------------------------------------------- portfolios and jobs


def test_a_portfolio_inline(client):
    document = {
        "catalog": "default",
        "horizon": "14d",
        "pools": [{"offer": "nodus-h200", "gpus": 8}],
        "jobs": [
            {"name": "a", "job": {"model": "llama-3.1-8b", "method": "lora", "tokens": "200M"}},
            {"name": "b", "job": {"model": "qwen3-8b", "method": "lora", "tokens": "200M"}, "after": ["a"]},
        ],
    }
    r = client.post("/v1/portfolio?workers=1&time_limit=30", content=json.dumps(document), headers=JSON)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["status"] in ("optimal", "feasible") and {s["job"] for s in answer["schedule"]} == {"a", "b"}


def test_a_long_portfolio_runs_as_a_job_with_progress_and_the_apis_answer(client):
    r = client.post("/v1/portfolio?async=true&workers=1", content=PORTFOLIO.read_text(), headers=YAML)
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["location"] == job["url"] == f"/v1/jobs/{job['id']}"
    assert job["status"] in ("queued", "running")
    deadline = time.monotonic() + 240
    seen = set()
    while time.monotonic() < deadline:
        view = client.get(job["url"]).json()
        seen.add(view["status"])
        if view["status"] in ("done", "failed"):
            break
        time.sleep(0.2)
    assert view["status"] == "done", view
    assert view["progress"][-1] == "done" and view["elapsed_s"] > 0
    direct = api.portfolio(load_portfolio(PORTFOLIO), workers=1)
    assert view["result"]["status"] == direct.status
    assert view["result"]["total_cost_usd"] == direct.total_cost_usd
    assert {s["job"] for s in view["result"]["schedule"]} == {s.job for s in direct.schedule}
    listed = client.get("/v1/jobs").json()["jobs"]
    assert job["id"] in [j["id"] for j in listed] and all("result" not in j for j in listed)


def test_a_job_is_checked_before_it_is_queued_and_one_that_fails_says_why(client):
    r = client.post("/v1/solve?async=true", content=_bad(JOB.read_text(), "tokens: 20B", "tokens: 20Q"), headers=YAML)
    assert r.status_code == 422 and r.json()["field"] == "job.tokens"
    r = client.post("/v1/portfolio?async=true&time_limit=1h", content=PORTFOLIO.read_text(), headers=YAML)
    assert r.status_code == 422 and "at most 600 s" in r.json()["detail"]
    # an unknown pool offer shows when the portfolio's options are built: the job fails, naming the field
    text = _bad(PORTFOLIO.read_text(), "- offer: nodus-b300", "- offer: nodus-b900")
    r = client.post("/v1/portfolio?async=true", content=text, headers=YAML)
    assert r.status_code == 202
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view = client.get(r.headers["location"]).json()
        if view["status"] in ("done", "failed"):
            break
        time.sleep(0.05)
    assert view["status"] == "failed" and view["error"]["field"] == "pools[1].offer", view
    assert view["error"]["detail"].startswith("request body, field 'pools[1].offer': ")


# --------------------------------------------------------------------------- the service's catalogs


def test_serve_catalogs(tmp_path):
    svc = Service(["nodus-2026-11"])
    try:
        assert svc.default_catalog == "nodus-2026-11" and svc.offered().count("nodus-2026-11") == 1
    finally:
        svc.close()
    own = tmp_path / "mine.yaml"
    own.write_text("name: mine\ninclude: [nodus-2026-11]\n")
    svc = Service([str(own)])
    try:
        assert svc.default_catalog == "mine" and svc.offered()[0] == "mine"
        with TestClient(create_app(svc), base_url=LOCAL) as c:
            body = SMALL_JOB.replace("catalog: nodus-2026-11\n", "")
            page = c.post("/page/solve", content=body, headers=YAML).json()
            assert f"catalog: {own}" in page["job_yaml"]  # the job file names it as the CLI finds it
    finally:
        svc.close()
    clash = tmp_path / "clash.yaml"
    clash.write_text("name: default\ninclude: [nodus-2026-11]\n")
    with pytest.raises(Exception, match="give it its own"):
        Service([str(clash)])


# --------------------------------------------------------------------------- a real server on 127.0.0.1


def _post(
    url: str, body: str | bytes, content_type: str = "application/yaml", timeout: float = 120
) -> tuple[int, dict]:
    return post_json(url, body, {"Content-Type": content_type}, timeout)


def _raw(port: int, data: bytes, *, wait_s: float = 10) -> bytes:
    """Send ``data`` as it is and read what comes back until the server closes or ``wait_s`` passes."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(data)
        received = b""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and b"\r\n\r\n" not in received:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            received += chunk
        return received


@pytest.fixture(scope="module")
def live():
    with Running(Service(limits=Limits(body_timeout_s=1.0))) as running:
        yield running


def test_twenty_concurrent_requests_are_all_answered(live, readme_answer):
    job, best = JOB.read_text(), readme_answer.best.model_dump(mode="json")
    # the README's job five times (kept answers after the first), five more with deadlines of their own (each
    # solved), five small options and five reference reads, all at once
    deadlines = [_bad(job, "deadline: 5d", f"deadline: {d}d") for d in ("5.1", "5.2", "5.3", "5.4", "5.5")]
    calls = (
        [lambda: _post(f"{live.url}/v1/solve", job) for _ in range(5)]
        + [lambda body=body: _post(f"{live.url}/v1/solve", body) for body in deadlines]
        + [lambda: _post(f"{live.url}/v1/options", SMALL_JOB) for _ in range(5)]
        + [lambda: _get(f"{live.url}/v1/models") for _ in range(5)]
    )
    with ThreadPoolExecutor(len(calls)) as pool:
        answers = [f.result(timeout=300) for f in [pool.submit(call) for call in calls]]
    assert [status for status, _ in answers] == [200] * 20
    assert all(data["best"] == best for _, data in answers[:10])  # a deadline past 5 days keeps the plan
    assert [round(data["deadline_h"], 6) for _, data in answers[5:10]] == [122.4, 124.8, 127.2, 129.6, 132.0]
    assert all(len(data["options"]) > 0 for _, data in answers[10:15])


def test_proven_answers_are_kept_and_cut_short_ones_are_not():
    svc = Service()
    try:
        with TestClient(create_app(svc), base_url=LOCAL) as c:
            first = c.post("/v1/solve", content=SMALL_JOB, headers=YAML).json()
            again = c.post("/v1/solve", content=SMALL_JOB, headers=YAML).json()
            assert first == again and first["status"] == "optimal"
            kept = svc.cache_counts()
            assert kept["answers"]["hits"] == 1 and kept["tables"]["misses"] == 1 and kept["catalogs"] == 1
            other = c.post("/v1/solve?time_limit=5", content=SMALL_JOB, headers=YAML).json()  # solved, table kept
            assert other["best"] == first["best"] and svc.cache_counts()["tables"]["hits"] == 1
            for _ in range(2):
                cut = c.post("/v1/solve?time_limit=0.001", content=JOB.read_text(), headers=YAML).json()
                if cut["status"] != "optimal":
                    assert svc.cache_counts()["answers"]["kept"] == 2  # not kept
    finally:
        svc.close()


def test_a_client_that_disconnects_mid_solve_does_not_stop_the_server(live, readme_answer):
    job = JOB.read_text()
    for i, days in enumerate((4, 6, 7)):  # deadlines no other test asks: each a fresh table, about a second
        body = _bad(job, "deadline: 5d", f"deadline: {days}d").encode()
        head = f"POST /v1/solve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/yaml\r\nContent-Length: {len(body)}\r\n\r\n"
        sock = socket.create_connection(("127.0.0.1", live.port), timeout=5)
        sock.sendall(head.encode() + body)
        time.sleep(0.2)
        if i == 0:  # an abortive close (RST) as well as an orderly one
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
    status, data = _post(f"{live.url}/v1/solve", job)
    assert status == 200 and data["best"] == readme_answer.best.model_dump(mode="json")
    assert live.thread.is_alive()
    deadline = time.monotonic() + 60
    while live.service.waiting and time.monotonic() < deadline:  # the abandoned solves end on their threads
        time.sleep(0.05)
    assert live.service.waiting == 0
    assert _get(f"{live.url}/v1/health")[1]["status"] == "ok"


def test_a_client_that_leaves_the_queue_takes_its_request_with_it():
    svc = Service(limits=Limits(solvers=1, readers=0))  # one thread: the gate holds it
    gate = threading.Event()
    with Running(svc) as running:
        held = svc.submit(gate.wait, 30)  # the one solver thread, busy
        try:
            body = JOB.read_bytes()
            head = f"POST /v1/options HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/yaml\r\nContent-Length: {len(body)}\r\n\r\n"
            sock = socket.create_connection(("127.0.0.1", running.port), timeout=5)
            sock.sendall(head.encode() + body)
            deadline = time.monotonic() + 10
            while svc.waiting < 2 and time.monotonic() < deadline:  # the request queued behind the gate
                time.sleep(0.02)
            assert svc.waiting == 2
            sock.close()
            while svc.waiting > 1 and time.monotonic() < deadline:  # ... and off the queue once its client left
                time.sleep(0.02)
            assert svc.waiting == 1
        finally:
            gate.set()
            held.result(timeout=10)
        assert svc.cache_counts()["tables"]["misses"] == 0  # its options were never computed
        assert _post(f"{running.url}/v1/options", SMALL_JOB)[0] == 200


def test_oversized_and_slow_bodies_on_a_real_server(live):
    head = b"POST /v1/solve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/yaml\r\n"
    answer = _raw(live.port, head + b"Content-Length: 50000000\r\n\r\n" + b"x" * 1000)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    started = time.monotonic()
    answer = _raw(live.port, head + b"Content-Length: 100\r\n\r\njob:\n", wait_s=15)  # 5 of 100 bytes, then nothing
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.monotonic() - started < 10
    assert _raw(live.port, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _get(f"{live.url}/v1/health")[0] == 200


def test_running_refuses_other_than_loopback():
    with pytest.raises(ValueError, match="loopback"):
        Running(host="0.0.0.0")


# --------------------------------------------------------------------------- the command


def test_serve_without_the_extra_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(server, "missing", lambda: ["fastapi", "uvicorn"])
    printed = cli("serve", "--port", "0")
    assert printed.exit_code == 2
    assert "pip install 'gpuplan[serve]'" in printed.stderr


def test_serve_on_a_taken_port_is_bad_input():
    taken = listen("127.0.0.1", 0)
    try:
        printed = cli("serve", "--port", str(taken.getsockname()[1]))
        assert printed.exit_code == 2
        assert "option '--port': cannot listen on 127.0.0.1:" in printed.stderr
    finally:
        taken.close()
    printed = cli("serve", "--port", "0", "--catalog", "nope")
    assert printed.exit_code == 2 and "option '--catalog': unknown catalog 'nope'" in printed.stderr


def test_gpuplan_serve_starts_answers_and_stops(tmp_path):
    from serving import start_serve

    log = tmp_path / "serve.log"
    proc, url = start_serve(log)
    try:
        assert url, log.read_text()
        for _ in range(100):  # the socket listens before uvicorn takes it: at most 10 s more
            try:
                status, data = _get(f"{url}/v1/health", timeout=5)
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        assert status == 200 and data["status"] == "ok"
        status, data = _post(f"{url}/v1/options", SMALL_JOB)
        assert status == 200 and data["options"]
    finally:
        proc.terminate()
        code = proc.wait(timeout=30)
    assert code == 143, log.read_text()  # SIGTERM: 'terminated', as every gpuplan command
