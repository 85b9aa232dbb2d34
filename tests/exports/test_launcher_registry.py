"""Adding a launcher is one module and one registry line (issue 50): a toy launcher, registered for one test,
is in every list of the kinds (the CLI's ``--export`` help, the service's export schema and ``GET /v1/info``),
the CLI and the service write it, and the service names its download with the toy's suffix. Nothing lists
the kinds by hand: the README's table of exports has a row for each registered kind."""

from __future__ import annotations

import re

import pytest
from paths import ROOT
from typer.testing import CliRunner

from optimizer.cli import app
from optimizer.present import exports
from optimizer.present.exports import Launcher

JOB = ROOT / "problems" / "llama-70b-within-5-days.yaml"
runner = CliRunner()


def _write(plan, job) -> str:
    return f"toy launch of {job.name}: {plan.nodes} x {plan.gpus_per_node} {plan.sku}\n"


TOY = Launcher("toy", _write, aliases=("plaything",), suffix="toycfg", summary="a toy's config")


@pytest.fixture
def toy(monkeypatch):
    """The toy, registered as a launcher module's one ``register`` line registers it, for one test."""
    monkeypatch.setitem(exports.LAUNCHERS, TOY.kind, TOY)
    return TOY


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", ["solve", "check"])
def test_a_registered_launcher_is_in_the_export_help(toy, command):
    r = runner.invoke(app, [command, "--help"], terminal_width=100)
    assert r.exit_code == 0, r.output
    assert "toy (also plaything: a toy's config)" in _one_line(r.output), r.output
    assert "slurm (also sbatch: an sbatch script)" in _one_line(r.output)


def test_the_export_help_lists_the_registry_as_it_is_now():
    r = runner.invoke(app, ["solve", "--help"], terminal_width=100)
    assert "toy" not in _one_line(r.output)
    assert all(kind in _one_line(r.output) for kind in exports.LAUNCHERS)


def test_the_cli_writes_a_registered_launcher(toy):
    r = runner.invoke(app, ["check", str(JOB), "--sku", "B200", "--gpus", "32", "--export", "plaything"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "toy launch of llama-3.1-70b-sft: 4 x 8 B200\n"


def test_the_service_lists_and_downloads_a_registered_launcher(toy):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from optimizer.server.app import create_app
    from optimizer.server.service import Service

    service = Service()
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1") as client:
            assert "toy" in client.get("/v1/info").json()["export_kinds"]
            schema = client.get("/openapi.json").json()
            spec = schema["paths"]["/v1/export"]["post"]["requestBody"]["content"]["application/json"]["schema"]
            kind = spec["properties"]["export"]["properties"]["kind"]
            assert "toy (also plaything: a toy's config)" in kind["description"], kind
            body = JOB.read_text() + "\nexport: {kind: plaything}\n"
            r = client.post("/v1/export", content=body, headers={"content-type": "application/yaml"})
            assert r.status_code == 200, r.text
            assert 'filename="llama-3.1-70b-sft-toy.toycfg"' in r.headers["content-disposition"]
            assert r.text.startswith("toy launch of llama-3.1-70b-sft: ")
    finally:
        service.close()


def test_the_readme_has_a_row_for_every_registered_launcher():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z0-9]+)` \| `gpuplan [^`]*--export \1", readme, flags=re.MULTILINE))
    assert rows == set(exports.LAUNCHERS), f"README rows {sorted(rows)}, registry {sorted(exports.LAUNCHERS)}"
