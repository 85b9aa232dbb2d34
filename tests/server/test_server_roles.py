"""gpuplan serve on a job with roles (issue 52, docs/roles.md): POST /v1/solve answers seed 003 with its split as
``gpuplan solve --format json`` does, POST /v1/check takes a hand-picked split as ``check.roles`` (``--role``'s
parser) and answers as ``gpuplan check --role``, POST /v1/export writes the launch per role as ``--export`` does,
and bad input is a 422 naming the body's field, never a 500."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from paths import ROOT

pytest.importorskip("fastapi")
pytest.importorskip("httpx")  # fastapi's TestClient
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402
from serving import JSON, LOCAL, YAML  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from optimizer.cli import app as cli_app  # noqa: E402
from optimizer.server.app import create_app  # noqa: E402
from optimizer.server.service import Service  # noqa: E402

JOB = ROOT / "problems" / "seed-003-drafter-roles.yaml"
ONE_MODEL_JOB = ROOT / "problems" / "llama-70b-within-5-days.yaml"
SPLIT = {"target": "3xRTX-PRO-6000", "drafter": "1xRTX-PRO-6000"}
FLAGS = ["--role", "target=3xRTX-PRO-6000", "--role", "drafter=1xRTX-PRO-6000"]
runner = CliRunner()


@pytest.fixture(scope="module")
def client():
    service = Service()
    try:
        with TestClient(create_app(service), base_url=LOCAL) as c:
            yield c
    finally:
        service.close()


def document(**extra) -> dict:
    """Seed 003's job file as a body: its catalog by name (a body names no file of the server's machine)."""
    data = yaml.safe_load(JOB.read_text())
    assert data["catalog"] == "../catalogs/seed-003-roles.yaml"
    return data | {"catalog": "seed-003-roles"} | extra


def post(client, path: str, data: dict):
    return client.post(path, content=json.dumps(data), headers=JSON)


def cli(*args) -> object:
    result = runner.invoke(cli_app, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.output
    return result


def _split(plan: dict) -> tuple[int, int]:
    producers, consumers = plan["roles"]
    return producers["gpus"], consumers["gpus"]


# --------------------------------------------------------------------------- answers


def test_solve_answers_the_split_as_the_cli_does(client):
    r = post(client, "/v1/solve", document())
    assert r.status_code == 200, r.text
    answer = r.json()
    printed = json.loads(cli("solve", JOB, "--format", "json").stdout)
    assert answer == printed
    # the fastest: 7 B200 targets + 1 B200 drafter over NVLink, the targets binding (docs/roles.md)
    best = answer["best"]
    assert best["offer"] == "b200-3.4x" and _split(best) == (7, 1)
    assert best["binding"] == "producers" and best["link"]["kind"] == "peer"
    assert best["days"] == pytest.approx(0.83, abs=0.02)
    rows = {(p["offer"], p["gpus"]): (_split(p), p["binding"]) for p in answer["plans"]}
    assert rows[("rtx-pro-6000-box", 4)] == ((3, 1), "producers")
    assert rows[("rtx-pro-6000-8x", 8)] == ((7, 1), "producers")


def test_a_yaml_body_and_a_job_ask_the_same(client):
    text = JOB.read_text().replace("catalog: ../catalogs/seed-003-roles.yaml", "catalog: seed-003-roles")
    r = client.post("/v1/solve", content=text, headers=YAML)
    assert r.status_code == 200, r.text
    expected = post(client, "/v1/solve", document()).json()
    assert r.json() == expected
    r = client.post("/v1/solve?async=true", content=text, headers=YAML)
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 30
    while (view := client.get(r.headers["location"]).json())["status"] not in ("done", "failed"):
        assert time.monotonic() < deadline, view
        time.sleep(0.05)
    assert view["status"] == "done" and view["result"] == expected


def test_solve_under_the_cost_objective(client):
    r = post(client, "/v1/solve", document(objective="cost", constraints={"gpu": {"types": ["RTX-PRO-6000"]}}))
    assert r.status_code == 200, r.text
    printed = json.loads(cli("solve", JOB, "--objective", "cost", "--gpu-types", "RTX-PRO-6000", "-f", "json").stdout)
    assert r.json() == printed
    assert _split(r.json()["best"]) == (7, 1) and r.json()["best"]["sku"] == "RTX-PRO-6000"


def test_check_takes_a_hand_picked_split_as_the_cli_role_flags(client):
    r = post(client, "/v1/check", document(check={"roles": SPLIT}))
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer == json.loads(cli("check", JOB, *FLAGS, "-f", "json").stdout)
    # the seed's own run: 3 + 1 RTX PRO 6000 through host memory, the targets binding, 8.62 days
    assert answer["best"]["offer"] == "rtx-pro-6000-box" and _split(answer["best"]) == (3, 1)
    assert answer["best"]["binding"] == "producers" and answer["best"]["link"]["kind"] == "host"
    assert 8.6 <= answer["best"]["days"] <= 8.8
    assert answer["headline"].startswith("Checked ") and _split(answer["optimum"]) == (7, 1)
    # names as --role takes them: an offer by name, a role name in any case, compare left at its default
    split = {"TARGET": "3 x rtx-pro-6000-box", "drafter": "1xrtx-pro-6000-box"}
    r = post(client, "/v1/check", document(check={"roles": split, "compare": True}))
    assert r.status_code == 200, r.text
    assert r.json()["best"] == answer["best"]


def test_export_writes_the_launch_per_role_as_the_cli(client):
    r = post(client, "/v1/export", document(export={"kind": "k8s"}))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    assert 'filename="dflash-drafter-qwen3.6-27b-kubernetes.yaml"' in r.headers["content-disposition"]
    assert r.text == cli("solve", JOB, "--export", "k8s").stdout
    assert "kind: JobSet" in r.text and "7 x B200 target" in r.text
    # a hand-picked split's launch: export.roles, as check --role ... --export writes it
    r = post(client, "/v1/export", document(export={"kind": "slurm", "roles": SPLIT}))
    assert r.status_code == 200, r.text
    assert 'filename="dflash-drafter-qwen3.6-27b-slurm.sh"' in r.headers["content-disposition"]
    assert r.text == cli("check", JOB, *FLAGS, "--export", "sbatch").stdout
    assert "#SBATCH hetjob" in r.text and "3 x RTX-PRO-6000 target" in r.text
    r = post(client, "/v1/export", document(export={"kind": "skypilot"}))
    assert (
        r.status_code == 200
        and 'filename="dflash-drafter-qwen3.6-27b-skypilot.yaml"' in r.headers["content-disposition"]
    )
    assert r.text == cli("solve", JOB, "--export", "skypilot").stdout


# --------------------------------------------------------------------------- refusals

REFUSED = {
    "a role missing": ("/v1/check", {"check": {"roles": {"target": "3xRTX-PRO-6000"}}}, "check.roles"),
    "no role given": ("/v1/check", {"check": {"roles": {}}}, "check.roles"),
    "roles not a mapping": ("/v1/check", {"check": {"roles": ["target=3xB200"]}}, "check.roles"),
    "an unknown role": ("/v1/check", {"check": {"roles": {"teacher": "3xB200", "drafter": "1xB200"}}}, "check.roles.teacher"),
    "an unreadable split": ("/v1/check", {"check": {"roles": {"target": "three", "drafter": "1xB200"}}}, "check.roles.target"),
    "a count, not text": ("/v1/check", {"check": {"roles": {"target": 3, "drafter": "1xB200"}}}, "check.roles.target"),
    "an unknown GPU": ("/v1/check", {"check": {"roles": {"target": "3xB999", "drafter": "1xB999"}}}, "check.roles"),
    "more GPUs than a node": ("/v1/check", {"check": {"roles": {"target": "99xB200", "drafter": "1xB200"}}}, "check.roles"),
    "a role without GPUs": ("/v1/check", {"check": {"roles": {"target": "0xB200", "drafter": "1xB200"}}}, "check.roles"),
    "a layout beside the split": ("/v1/check", {"check": {"roles": SPLIT, "tp": 2}}, "check.tp"),
    "spot beside the split": ("/v1/check", {"check": {"roles": SPLIT, "spot": True}}, "check.spot"),
    "sku and gpus on a role job": ("/v1/check", {"check": {"sku": "B200", "gpus": 8}}, "check.roles"),
    "no check at all": ("/v1/check", {}, "check"),
    "an export split past a node": ("/v1/export", {"export": {"kind": "k8s", "roles": {"target": "9xB200", "drafter": "1xB200"}}}, "export.roles"),
    "a bad job field": ("/v1/solve", {"objective": "speed"}, "objective"),
    "a one-model export": ("/v1/export", {"export": {"kind": "deepspeed"}}, "export.kind"),
    "an unknown export": ("/v1/export", {"export": {"kind": "helm"}}, "export.kind"),
    "a one-model plan": ("/v1/export", {"export": {"kind": "slurm", "plan": {"sku": "B200"}}}, "export.plan"),
    "a bad export split": ("/v1/export", {"export": {"kind": "slurm", "roles": {"target": "3xB200"}}}, "export.roles"),
    "options": ("/v1/options", {}, "job.roles"),
    "the page": ("/page/solve", {}, "job.roles"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED))
def test_bad_role_requests_are_422_naming_the_field(client, case):
    path, extra, field = REFUSED[case]
    r = post(client, path, document(**extra))
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["field"] == field, error
    assert error["detail"].startswith(f"request body, field '{field}': ") and error["reason"]


def test_the_refusals_say_what_to_send(client):
    r = post(client, "/v1/check", document(check={"sku": "B200", "gpus": 8}))
    assert '"target": "3xRTX-PRO-6000"' in r.json()["reason"]
    r = post(client, "/v1/export", document(export={"kind": "deepspeed"}))
    assert "kubernetes" in r.json()["reason"] and "slurm" in r.json()["reason"] and "skypilot" in r.json()["reason"]
    r = post(client, "/v1/options", document())
    assert "POST /v1/solve" in r.json()["reason"]
    r = post(client, "/v1/check", document())
    assert "check: {roles: {target: 3xRTX-PRO-6000" in r.json()["reason"]
    # the OpenAPI schema of check's body says how to give a split
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/check"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "roles" in body["properties"]["check"]["properties"]


def test_a_job_without_roles_has_no_split(client):
    job = yaml.safe_load(ONE_MODEL_JOB.read_text())
    r = post(client, "/v1/check", job | {"check": {"roles": SPLIT}})
    assert r.status_code == 422 and r.json()["field"] == "check.roles", r.text
    r = post(client, "/v1/export", job | {"export": {"kind": "slurm", "roles": SPLIT}})
    assert r.status_code == 422 and r.json()["field"] == "export.roles", r.text
    for check, field in [({"gpus": 8}, "check.sku"), ({"sku": "B200"}, "check.gpus")]:
        r = post(client, "/v1/check", job | {"check": check})
        assert r.status_code == 422 and r.json()["field"] == field, r.text


def test_a_bad_roles_section_is_422_at_its_field_as_the_cli_says(client, tmp_path):
    data = document()
    data["job"]["roles"]["target"]["mfu"]["value"] = 2
    r = post(client, "/v1/solve", data)
    assert r.status_code == 422 and r.json()["field"] == "job.roles.target.mfu.value", r.text
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data | {"catalog": str(ROOT / "catalogs" / "seed-003-roles.yaml")}))
    printed = runner.invoke(cli_app, ["solve", str(path)])
    assert printed.exit_code == 2 and r.json()["reason"] in printed.stderr


def test_a_grpo_jobs_export_is_refused_as_the_cli_refuses_it(client):
    # a GRPO job runs as one RL framework's launch, not a drafter's two (tests/roles/test_roles_grpo.py, the CLI's side)
    data = yaml.safe_load((ROOT / "problems" / "grpo-llama-3.1-8b.yaml").read_text())
    assert data["catalog"] == "../catalogs/default.yaml"
    r = post(client, "/v1/export", data | {"catalog": "default", "export": {"kind": "slurm"}})
    assert 400 <= r.status_code < 500, r.text
    assert "GRPO job" in r.text and "cluster.num_nodes" in r.text and "Traceback" not in r.text
