"""Exports that start the run (issue 51): each carries the plan's steps, checkpoints and model, read back by the
tool's own parser where it is installed and otherwise by the field and flag names its source defines (cited at
the commit read). The 70B job of the README (a full fine-tune of Llama 3.1 70B on 20B tokens) and variants."""

from __future__ import annotations

import math
import shlex
from functools import cache
from pathlib import Path

import pytest

from optimizer import CheckRequest, check, load_job
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.present.exports import export
from optimizer.present.exports.run import PRETRAINED, TORCHTITAN_MODELS
from optimizer.results import Plan

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parent.parent
LLAMA_70B = ROOT / "problems" / "llama-70b-within-5-days.yaml"

# torchtitan v0.2.2 (73a0e6979dd1) torchtitan/config/job_config.py: the fields of the sections the run adds
TORCHTITAN_022_FIELDS = {
    "model": {"name", "flavor", "hf_assets_path", "tokenizer_path", "converters", "print_after_conversion"},
    "training": {
        "dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len", "max_norm", "steps",
        "enable_cpu_offload", "dtype", "mixed_precision_param", "mixed_precision_reduce", "gc_freq", "gc_debug",
    },
    "checkpoint": {
        "enable", "enable_ft_dataloader_checkpoints", "folder", "interval", "initial_load_path",
        "initial_load_model_only", "initial_load_in_hf", "initial_load_in_hf_quantized", "last_save_model_only",
        "last_save_in_hf", "export_dtype", "async_mode", "keep_latest_k", "load_step", "exclude_from_loading",
        "enable_first_step_checkpoint", "create_seed_checkpoint", "load_only",
    },
}  # fmt: skip


def job_problem(model: str, **job) -> Problem:
    data = {"job": {"name": f"{model}-run", "model": model, "method": "full", "tokens": "20B", "seq_len": 4096, **job}}
    return Problem.model_validate(expand_models(data))


@cache
def llama70b(framework: str = "torchtitan", **layout) -> tuple[Problem, Plan]:
    problem = load_job(LLAMA_70B)
    problem = problem.model_copy(update={"job": problem.job.model_copy(update={"framework": framework})})
    request = CheckRequest("B200", 32, nodes=4, compare=False, **(layout or {"tp": 1, "pp": 1, "zero": 3}))
    return problem, check(problem, request).plan


def steps_of(problem: Problem, p: Plan) -> int:
    return math.ceil(problem.job.total_tokens / (p.strategy.global_batch * problem.job.seq_len))


# --------------------------------------------------------------------------- torchtitan


def test_torchtitan_starts_the_planned_70b_fine_tune():
    """The TOML names llama3 70B (not torchtitan's default debugmodel), runs the plan's steps, checkpoints into a
    folder at the reliability model's interval, and starts from the pretrained weights (a named placeholder)."""
    problem, p = llama70b()
    config = tomllib.loads(export(p, "torchtitan", job=problem.job))
    assert (config["model"]["name"], config["model"]["flavor"]) == ("llama3", "70B")
    assert config["training"]["steps"] == steps_of(problem, p) == math.ceil(20e9 / (256 * 4096))
    checkpoint = config["checkpoint"]
    assert checkpoint["enable"] is True and checkpoint["folder"]
    assert 1 <= checkpoint["interval"] < config["training"]["steps"]
    assert checkpoint["initial_load_path"] == PRETRAINED and checkpoint["initial_load_model_only"] is True
    for section, fields in TORCHTITAN_022_FIELDS.items():
        assert set(config[section]) <= fields, section


def test_torchtitan_interval_is_youngs_for_the_plan():
    """The interval in steps is Young's sqrt(2 delta M) over the plan's step time: delta = 70.55B x 14 bytes
    over 4 hosts at 2 GB/s, M = 1 / (32 GPUs x 1.97e-5 failures per GPU-hour)."""
    problem, p = llama70b()
    interval = tomllib.loads(export(p, "torchtitan", job=problem.job))["checkpoint"]["interval"]
    delta_h = 70.55e9 * 14 / (4 * 2e9) / 3600
    rate = 32 * 1.97e-5
    expected = math.sqrt(2 * delta_h / rate) * 3600 / p.step_s
    assert interval == pytest.approx(expected, rel=0.02)


def test_torchtitan_pretraining_loads_nothing_and_an_unknown_model_is_named_not_defaulted():
    """A pre-training (tokens past compute-optimal) has no initial_load_path; a model torchtitan has no flavour of
    gets placeholders torchtitan refuses, never its silent default llama3 'debugmodel', and a line saying so."""
    problem = job_problem("llama-3.1-8b", tokens="400B", global_batch=512, framework="torchtitan")
    p = check(problem, CheckRequest("B200", 8, zero=3, compare=False)).plan
    config = tomllib.loads(export(p, "torchtitan", job=problem.job))
    assert (config["model"]["name"], config["model"]["flavor"]) == ("llama3", "8B")
    assert "initial_load_path" not in config["checkpoint"]
    assert config["training"]["steps"] == steps_of(problem, p)

    problem = job_problem("mistral-7b", framework="torchtitan")
    p = check(problem, CheckRequest("B200", 8, zero=3, compare=False)).plan
    text = export(p, "torchtitan", job=problem.job)
    model = tomllib.loads(text)["model"]
    assert model["flavor"] != "debugmodel" and model["name"] not in {known.name for known in TORCHTITAN_MODELS.values()}
    assert "set [model] name and flavor" in text


def test_torchtitan_030_line_names_the_model_config_and_the_run():
    """torchtitan 0.3.0's line picks the model's config function and carries the steps and checkpoint flags;
    with torchtitan installed, its ConfigManager parses them."""
    problem, p = llama70b()
    text = export(p, "torchtitan", job=problem.job)
    (line,) = [line for line in text.splitlines() if "--config llama3_70b" in line]
    flags = shlex.split(line.split("--config llama3_70b", 1)[1])
    assert f"--training.steps={steps_of(problem, p)}" in " ".join(flags).replace("steps ", "steps=")
    assert "--checkpoint.enable" in flags and "--checkpoint.initial-load-path" in flags
    config_manager = pytest.importorskip("torchtitan.config").ConfigManager
    config = config_manager().parse_args(["--module", "llama3", "--config", "llama3_70b", *flags])
    assert config.training.steps == steps_of(problem, p) and config.checkpoint.enable
