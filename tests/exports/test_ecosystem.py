"""Meeting users where they are: exports for launchers, the seed's spec.resources.gpu block as input,
JSON Schemas that every bundled file validates against, pictures and the HTML report."""

import json
import random
from types import SimpleNamespace

import jsonschema
import pytest
import yaml
from paths import ROOT
from typer.testing import CliRunner

from optimizer import load_job, plan
from optimizer.cli import app
from optimizer.present.exports import export, skypilot_accelerator
from optimizer.present.jsonschema import json_schema
from optimizer.present.plot import pack_lanes, portfolio_plot

runner = CliRunner()


@pytest.fixture(scope="module")
def best():
    return plan(load_job(ROOT / "problems" / "llama-70b-within-5-days.yaml")).best


@pytest.fixture(scope="module")
def data_parallel():
    """A plan DeepSpeed and accelerate's FSDP can run as it is (no TP or PP)."""
    return plan(load_job(ROOT / "problems" / "seed-70b-one-b200-node.yaml")).best


def test_skypilot_task_keys(best):
    task = yaml.safe_load(export(best, "skypilot", "sft"))
    assert task["resources"]["accelerators"] == f"{skypilot_accelerator(best.sku)}:{best.gpus_per_node}"
    assert task["num_nodes"] == best.nodes and "run" in task and task["name"] == "sft"


def test_kubernetes_spec_is_the_seeds_format(best):
    # The seed's spec.resources.gpu form is the 'nodus' export; 'kubernetes' is a batch/v1 Indexed Job.
    spec = yaml.safe_load(export(best, "nodus"))
    gpu = spec["spec"]["resources"]["gpu"]
    assert gpu == {"type": best.sku, "count": best.gpus_per_node, "minMemory": f"{int(best.memory_gib.capacity)}Gi"}


def test_deepspeed_config_carries_stage_micro_batch_and_accumulation(data_parallel):
    best = data_parallel
    cfg = json.loads(export(best, "deepspeed"))
    s = best.strategy
    assert cfg["zero_optimization"]["stage"] == s.zero_stage
    assert cfg["train_micro_batch_size_per_gpu"] == s.micro_batch
    assert cfg["gradient_accumulation_steps"] == s.grad_accum
    assert cfg["train_batch_size"] == s.dp * s.micro_batch * s.grad_accum  # DeepSpeed's own consistency rule
    assert cfg["bf16"]["enabled"] is True


def test_accelerate_fsdp_config(data_parallel):
    best = data_parallel
    text = export(best, "accelerate")
    cfg = yaml.safe_load(text)
    assert cfg["distributed_type"] == "FSDP" and cfg["num_processes"] == best.gpus and cfg["num_machines"] == best.nodes
    expected = {0: "NO_SHARD", 1: "SHARD_GRAD_OP", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}[best.strategy.zero_stage]
    if best.strategy.zero_stage == 3 and best.strategy.shard_degree < best.strategy.dp:
        expected = "HYBRID_SHARD"
    assert cfg["fsdp_config"]["fsdp_sharding_strategy"] == expected
    assert f"gradient accumulation {best.strategy.grad_accum}" in text


def test_torchrun_command(best):
    line = export(best, "torchrun")
    assert f"--nnodes {best.nodes}" in line and f"--nproc-per-node {best.gpus_per_node}" in line


def test_export_flag_and_unknown_kind(tmp_path):
    out = tmp_path / "task.yaml"
    r = runner.invoke(
        app, ["solve", str(ROOT / "problems" / "llama-8b-lora.yaml"), "--export", "skypilot", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(out.read_text())["resources"]["accelerators"]
    r = runner.invoke(app, ["solve", str(ROOT / "problems" / "llama-8b-lora.yaml"), "--export", "lsf"])
    assert r.exit_code == 2 and "skypilot" in r.output


def test_skypilot_parses_our_task_when_installed(best):
    sky = pytest.importorskip("sky")
    task = sky.Task.from_yaml_config(yaml.safe_load(export(best, "skypilot")))
    assert task.num_nodes == best.nodes


def test_seed_spec_resources_gpu_block_filters(problems):
    answer = plan(load_job(problems / "seed-k8s-spec.yaml"))
    assert answer.best.sku in ("B200", "B300") and answer.best.gpus_per_node == 8
    assert all(p.sku != "H200" for p in answer.frontier)


def as_json(path):
    """What a YAML language server validates: the document as JSON (dates as strings)."""
    return json.loads(json.dumps(yaml.safe_load(path.read_text()), default=str))


@pytest.mark.parametrize("path", sorted((ROOT / "problems").glob("*.yaml")), ids=lambda p: p.name)
def test_problem_files_validate_against_the_generated_schema(path):
    data = as_json(path)
    kind = "portfolio" if "jobs" in data else "job"
    jsonschema.validate(data, json_schema(kind))


@pytest.mark.parametrize("path", sorted((ROOT / "catalogs").glob("*.yaml")), ids=lambda p: p.name)
def test_catalog_files_validate_against_the_generated_schema(path):
    if path.name == "models.yaml":
        pytest.skip("model presets are not a catalog")
    jsonschema.validate(as_json(path), json_schema("catalog"))


def test_schema_rejects_a_typo():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"job": {"model": {"params": "7B"}, "tokenz": "1B"}}, json_schema("job"))


def test_schema_command():
    r = runner.invoke(app, ["schema", "portfolio"])
    assert r.exit_code == 0 and json.loads(r.stdout)["title"] == "gpuplan portfolio file"
    assert runner.invoke(app, ["schema", "nope"]).exit_code == 2


def test_html_report_is_self_contained(tmp_path, problems):
    out = tmp_path / "report.html"
    r = runner.invoke(app, ["solve", str(problems / "llama-70b-within-5-days.yaml"), "--report", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert page.startswith("<!doctype html>") and page.count("<svg") >= 2
    assert (
        "<script" not in page and "src=" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    )
    assert "Cheapest plan" in page and "Every option considered" in page and "rejected: memory" in page
    # what the table says, the page says: the notes, and a runner-up's break-even efficiency (seed 002: 79.2 %)
    assert "Note: framework: any" in page
    r = runner.invoke(app, ["solve", str(problems / "seed-b300-breakeven.yaml"), "--report", str(out)])
    assert r.exit_code == 0 and "wins above 79.2% scaling efficiency" in out.read_text()


@pytest.mark.parametrize(
    "cmd",
    [
        ["solve", "llama-8b-lora.yaml"],
        ["check", "seed-100b-one-node.yaml", "--sku", "B300", "--gpus", "8"],
        ["portfolio", "portfolio-q1-finetunes.yaml", "--workers", "1"],
    ],
)
def test_plots_are_written(tmp_path, problems, cmd):
    pytest.importorskip("matplotlib")
    out = tmp_path / "chart.png"
    r = runner.invoke(app, [cmd[0], str(problems / cmd[1]), *cmd[2:], "--plot", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_large_schedule_is_drawn_in_lanes_as_few_as_jobs_overlap(tmp_path):
    # 2,000 jobs of 1-9 hours on two pools: a named row per job would make a chart 700 inches tall. Each
    # pool gets as many lanes as the most of its jobs running at once (the fewest any chart without
    # overlapping bars can have), no two bars of a lane overlap, and the picture stays a page high.
    plt = pytest.importorskip("matplotlib.pyplot")
    rng = random.Random(0)
    jobs = []
    for k in range(2000):
        start = float(rng.randrange(500))
        jobs.append(
            SimpleNamespace(job=f"j{k}", offer="ab"[k % 2], start_h=start, end_h=start + rng.randint(1, 9), plan=None)
        )
    jobs.sort(key=lambda j: (j.start_h, j.job))
    lanes = pack_lanes(jobs)
    for offer, pool in lanes.items():
        mine = [j for j in jobs if j.offer == offer]
        most = max(sum(1 for j in mine if j.start_h <= t < j.end_h) for t in range(510))
        assert len(pool) == most
        assert sum(len(lane) for lane in pool) == len(mine)
        assert all(a[0] + a[1] <= b[0] for lane in pool for a, b in zip(lane, lane[1:]))
    result = SimpleNamespace(
        schedule=jobs,
        pools=[SimpleNamespace(offer=o, gpus=8, timeline=[(0.0, 4), (100.0, 8)], capacity=[(0.0, 8)]) for o in "ab"],
        total_cost_usd=1.0,
        makespan_h=max(j.end_h for j in jobs),
    )
    portfolio_plot(result, tmp_path / "gantt.png")
    assert plt.imread(tmp_path / "gantt.png").shape[0] <= 1700


def test_accelerate_parses_our_fsdp_config_when_installed(data_parallel, tmp_path):
    best = data_parallel
    config_args = pytest.importorskip("accelerate.commands.config.config_args")
    path = tmp_path / "fsdp.yaml"
    path.write_text(export(best, "accelerate"))
    parsed = config_args.ClusterConfig.from_yaml_file(str(path))
    assert parsed.num_processes == best.gpus and parsed.fsdp_config["fsdp_sharding_strategy"]


def test_a_layout_that_does_not_fit_shows_no_time_or_cost(tmp_path, problems):
    """1 B200 cannot hold Llama 70B's training state (1,071 of 168 GiB); options and the HTML report gave it
    125.3 days and $16,543.54 as if it ran, where solve's runners-up table shows '-'."""
    out = tmp_path / "report.html"
    job = str(problems / "llama-70b-within-5-days.yaml")
    r = runner.invoke(app, ["solve", job, "--report", str(out)])
    assert r.exit_code == 0, r.output
    rows = [row for row in out.read_text().split("<tr") if "rejected: memory" in row]
    assert rows and all(row.count("<td class='num'>-</td>") == 5 and "$" not in row for row in rows), rows[:1]
    r = runner.invoke(app, ["options", job])
    rows = [line for line in r.stdout.splitlines() if "rejected: memory" in line]
    assert rows and all([c.strip() for c in row.split("│")][4:6] == ["-", "-"] for row in rows), rows[:1]
