"""The page asks every question gpuplan solve's flags ask (issue: the page had no control for --context-parallel,
--optimizer-implementation, --gradient-dtype and ten more job flags). The truth is the CLI: the solve command's
own options, as typer reads them. Each option is a control of the page (one of its own in index.html, or one
app.js builds from GET /v1/job-fields), or an output the page gives its own way; a flag added to the CLI and
to neither fails here. Each served field states the default the CLI's --help states; a page question with each
setting is answered as the CLI answers the flag, and the page's flags command, read by the CLI's own parser
(``--save``), asks the same question the page's job file does."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
import typer.main
import yaml
from paths import ROOT

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402
from serving import JSON, LOCAL  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from optimizer.cli import app as cli_app  # noqa: E402
from optimizer.cli.shared import JOB_FLAG_OPTIONS  # noqa: E402
from optimizer.inputs.schema.job import Measurement  # noqa: E402
from optimizer.present.jsonschema import json_schema  # noqa: E402
from optimizer.server.app import create_app  # noqa: E402
from optimizer.server.service import Service  # noqa: E402

STATIC = ROOT / "optimizer" / "server" / "static"
runner = CliRunner()

# solve's other options that set the question (its constraints, its measurements), by flag: the page's own control
# (an id of index.html)
OWN_CONTROLS = {
    "measured": "measured",
    "objective": "objective",
    "deadline": "deadline",
    "budget": "budget",
    "max_nodes": "max_nodes",
    "max_gpus": "max_gpus",
    "gpu_types": "gpu-types",
    "min_memory": "min_memory",
    "deadline_quantile": "deadline_quantile",
    "spot": "spot",
    "headroom": "headroom",
    "catalog": "catalog",
}
# solve's options that say what to write, not what to ask: the page's way of giving each
OUTPUTS = {
    "job": "the page's job.yaml (download) is the job file",
    "save": "the page's job.yaml and its flags command",
    "time_limit": "POST /page/solve?time_limit= (the page's command states it)",
    "plot": "the page draws the frontier",
    "report": "the page is the report",
    "export": "Export the plan shown",
    "out": "Export's download",
    "format": "the page shows the answer; /v1/solve is the JSON",
    "quiet": "the page's verdict line",
}


def _solve_options() -> dict[str, tuple[str, str]]:
    """gpuplan solve's options as typer reads them, by their flag's name (--context-parallel: context_parallel,
    the job field it sets): the flag and its help."""
    command = typer.main.get_command(cli_app).commands["solve"]  # type: ignore[attr-defined]
    return {
        p.opts[0].lstrip("-").replace("-", "_"): (p.opts[0], getattr(p, "help", None) or "") for p in command.params
    }


@pytest.fixture(scope="module")
def client():
    service = Service()
    with TestClient(create_app(service), base_url=LOCAL) as c:
        yield c
    service.close()


@pytest.fixture(scope="module")
def served(client) -> dict[str, dict]:
    return {field["name"]: field for field in client.get("/v1/job-fields").json()["fields"]}


def test_every_flag_of_solve_is_a_control_of_the_page(served):
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    options = _solve_options()
    job_flags = set(JOB_FLAG_OPTIONS) | {"framework", "compile"}
    assert job_flags <= set(options)  # the registry is solve's
    # every job flag is served, under its own flag, and is a control: the form's own or one app.js builds
    assert set(served) == job_flags, sorted(set(served) ^ job_flags)
    for name, field in served.items():
        assert field["flag"] == options[name][0], name
    assert "/v1/job-fields" in (STATIC / "app.js").read_text(encoding="utf-8")
    built = set(served) - ids
    assert {"context_parallel", "optimizer_implementation", "gradient_dtype"} <= built
    for name, control in OWN_CONTROLS.items():
        assert control in ids, f"solve's --{name} has no control on the page (no id {control!r} in index.html)"
    unknown = set(options) - job_flags - set(OWN_CONTROLS) - set(OUTPUTS)
    assert not unknown, f"solve's flags {sorted(unknown)} have no page control: add one (or a /v1/job-fields field)"


def test_each_field_states_the_clis_default_choices_and_help(served):
    """The served default is the schema's and the one the CLI's --help names; the choices are the schema's."""
    helps = {name: help_text for name, (_, help_text) in _solve_options().items()}
    properties = json_schema("job")["$defs"]["JobSpec"]["properties"]
    for name, field in served.items():
        spec = properties[name]
        assert field["choices"] == spec.get("enum", []), name
        assert field["help"], name
        if field["kind"] == "switch":
            assert field["default"] == ("on" if spec["default"] else "off")
            assert re.search(rf"\b(else|default) {field['default']}\b", helps[name]), (name, helps[name])
        elif field["kind"] == "choice":
            assert field["default"] == spec["default"]
            assert re.search(rf"\b{field['default']}\b", helps[name]), (name, helps[name])
    assert served["seq_len"]["unit"] == "tokens per sequence" and served["seq_len"]["default"] == "4096"
    assert served["epochs"]["default"] == "1"  # the CLI's "else 1"
    assert served["context_parallel"]["choices"] == ["ring", "all_to_all", "all_to_all_repeat_kv"]
    assert served["lora_rank"]["minimum"] == 1 and served["epochs"]["minimum"] is None  # epochs: > 0, not >= 0


def test_the_job_fields_are_a_route_of_the_api(client):
    assert "/v1/job-fields" in client.get("/openapi.json").json()["paths"]


# a small question, as the page's form sends it, and each new setting over it (the job field or constraint, its
# value as the page sends it, and the flag the CLI takes for it)
BASE = {
    "catalog": "default",
    "objective": "cost",
    "job": {"name": "llama-3.1-8b", "model": "llama-3.1-8b", "method": "full", "tokens": "1B", "seq_len": 8192},
    "constraints": {"gpu": {"types": ["H100-SXM"]}},
}
SETTINGS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("job", {"context_parallel": "all_to_all"}, ["--context-parallel", "all_to_all"]),
    ("job", {"optimizer_implementation": "foreach"}, ["--optimizer-implementation", "foreach"]),
    ("job", {"gradient_dtype": "fp32"}, ["--gradient-dtype", "fp32"]),
    ("job", {"loss": "chunked", "attention": "eager"}, ["--loss", "chunked", "--attention", "eager"]),
    ("job", {"offload": "optimizer", "activation_offload": True}, ["--offload", "optimizer", "--activation-offload"]),
    ("job", {"master_weights": False, "optimizer": "adamw8bit"}, ["--no-master-weights", "--optimizer", "adamw8bit"]),
    ("job", {"dataset_tokens": "500M", "epochs": 1.5}, ["--dataset-tokens", "500M", "--epochs", "1.5"]),
    ("job", {"compile": True, "framework": "torchtitan"}, ["--compile", "--framework", "torchtitan"]),
    (
        "job",
        {"measured": [{"sku": "H100-SXM", "gpus": 8, "tokens_per_s": "30k tok/s", "peak_memory": "60GiB"}]},
        ["--measured", "8xH100-SXM:30k tok/s,60GiB"],
    ),
    (
        "constraints",
        {"memory_headroom": "10%", "deadline_quantile": "p90"},
        ["--headroom", "10%", "--deadline-quantile", "p90"],
    ),
]


def _document(where: str, setting: dict) -> dict:
    document = json.loads(json.dumps(BASE))
    if "dataset_tokens" in setting:
        del document["job"]["tokens"]
    document[where].update(setting)
    return document


def _measurements_read(document: dict) -> dict:
    """The document with its job.measured entries as the job file's reader reads them (--save writes the flag's
    text read: 30000.0 tokens/s for '30k tok/s')."""
    entries = document["job"].get("measured")
    if entries:
        read = [Measurement.model_validate(e).model_dump(by_alias=True, exclude_none=True) for e in entries]
        document = {**document, "job": {**document["job"], "measured": read}}
    return document


def _cli_json(*args: str) -> dict:
    result = runner.invoke(cli_app, ["solve", *args, "--format", "json"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("where", "setting", "flags"), SETTINGS, ids=[next(iter(s[1])) for s in SETTINGS])
def test_a_page_question_with_each_setting_is_the_clis_with_the_flag(client, tmp_path, where, setting, flags):
    document = _document(where, setting)
    bundle = client.post("/page/solve", content=json.dumps(document), headers=JSON).json()
    assert "answer" in bundle, bundle
    # the saved question carries the setting
    assert yaml.safe_load(bundle["job_yaml"])[where].items() >= setting.items()
    command = bundle["flags_command"]
    assert command, "the page's question has no flags command"
    words = shlex.split(command)
    for flag in flags:
        assert flag in words, (flag, command)
    # the CLI asked with the flags written by hand answers as the page
    base = ["--model", "llama-3.1-8b", "--method", "full", "--seq-len", "8192", "--gpu-types", "H100-SXM"]
    if "dataset_tokens" not in setting:
        base += ["--tokens", "1B"]
    assert _cli_json(*base, *flags)["best"] == bundle["answer"]["best"]
    # the printed command, read by the CLI's own parser, asks the page's question: what it saves is the job file
    saved = tmp_path / "asked.yaml"
    result = runner.invoke(cli_app, [*words[1:], "--save", str(saved), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["best"] == bundle["answer"]["best"]
    page_question = yaml.safe_load(bundle["job_yaml"])
    if page_question.get("catalog") == "default":  # the CLI's own default, so no --catalog in the command
        del page_question["catalog"]
    assert _measurements_read(yaml.safe_load(saved.read_text())) == _measurements_read(page_question)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("context_parallel", "ring_of_fire", "all_to_all"),
        ("optimizer_implementation", "fast", "foreach"),
        ("gradient_dtype", "fp64", "fp32"),
        ("epochs", "two", "number"),
    ],
)
def test_a_bad_setting_is_one_paragraph_naming_its_field(client, field, value, words):
    document = _document("job", {field: value})
    response = client.post("/page/solve", content=json.dumps(document), headers=JSON)
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["field"] == f"job.{field}" and words in error["detail"], error
    assert "\n" not in error["detail"].strip() and "Traceback" not in error["detail"]
