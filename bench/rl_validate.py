"""Predict published GRPO throughputs (validation/rl_runs.yaml) with gpuplan's defaults and print predicted
against published, tokens/s a GPU and seconds a step (both ratios predicted / published in rate, published /
predicted in time), with each stage's seconds.

    python bench/rl_validate.py            # the trainer as gpuplan plans it (FSDP), as the planner answers
    python bench/rl_validate.py --as-run   # each row's trainer as it ran (its Megatron-Core degrees)

No constant is fitted on these rows: the GPUs' training efficiency is gpuplan's default for their class, the
engines' settings are the rows' recipes', the decode step's host share is vLLM's measured bubble
(physics/decode.py), and what a recipe leaves unstated (the prompt length) is marked ASSUMPTION in the file.
tests/roles/test_roles_grpo.py holds each row within the factor it reaches."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optimizer import load_catalog  # noqa: E402
from optimizer.inputs.catalog import find_sku  # noqa: E402
from optimizer.inputs.schema import ModelSpec  # noqa: E402
from optimizer.physics.shapes import TrainingState  # noqa: E402
from optimizer.planning.grpo import GrpoJob, GrpoRecipe, grpo_step  # noqa: E402
from optimizer.planning.model_state import model_shape  # noqa: E402
from optimizer.planning.roles import RoleHardware  # noqa: E402

DATA = ROOT / "validation" / "rl_runs.yaml"
CATALOG = ROOT / "catalogs" / "default.yaml"
AS_RUN = "--as-run" in sys.argv  # each row's trainer as it ran (``trainer:``), not gpuplan's FSDP plan
ADAM_MIXED_PRECISION = (2.0, 0.0, 2.0, 12.0)  # bf16 weights and gradients, fp32 master + two moments


def trainer_of(run: dict) -> dict:
    """gpuplan's FSDP plan of the trainer (what the planner answers), or with ``--as-run`` the row's trainer as
    it ran (``trainer:`` in the file: its Megatron-Core degrees, packing and recompute)."""
    t = run.get("trainer")
    if not t or not AS_RUN:
        return {}
    return {
        "train_tp": int(t.get("tp", 1)),
        "train_pp": int(t.get("pp", 1)),
        "train_ep": int(t.get("ep", 1)),
        "megatron": t.get("backend") == "megatron",
        "pack_tokens": float(t.get("pack_tokens", 0.0)),
        "recompute": bool(t.get("recompute", True)),
    }


def job_of(run: dict) -> GrpoJob:
    """A row's setup as the GRPO model takes it."""
    shape = model_shape(ModelSpec.model_validate(run["model"]))
    weights, adapters, grads, optimizer = ADAM_MIXED_PRECISION
    train = TrainingState(shape.params, weights, adapters, grads, optimizer)
    prompt = float(run["prompt_tokens"])
    recipe = GrpoRecipe(
        prompts_per_step=int(run["prompts_per_step"]),
        samples_per_prompt=int(run["samples_per_prompt"]),
        prompt_tokens=prompt,
        response_tokens=float(run["seq_tokens"]) - prompt,
        max_response_tokens=float(run.get("max_seq_tokens", 0.0)) - prompt if run.get("max_seq_tokens") else 0.0,
        rollout_tp=int(run.get("rollout_tp", 1)),
        memory_utilization=float(run.get("memory_utilization", 0.5)),
        placement=run.get("placement", "colocated"),
        asynchronous=bool(run.get("async", False)),
        **trainer_of(run),
    )
    return GrpoJob(shape, train, recipe, tokens=recipe.tokens_per_step, weight_bytes=2.0 * shape.params)


def predict(run: dict, catalog) -> dict:
    """Predicted tokens/s a GPU and seconds a step of ``run``, and the step's stages."""
    hw = RoleHardware.from_sku(find_sku(catalog, run["sku"]), 0.0)
    job = job_of(run)
    gpus = int(run["gpus"])
    if run.get("placement", "colocated") == "colocated":
        step = grpo_step(job, hw, gpus, gpus)
    else:
        step = grpo_step(job, hw, int(run["rollout_gpus"]), gpus - int(run["rollout_gpus"]))
    return {
        "tokens_per_s_per_gpu": step.tokens_per_s / gpus,
        "step_s": step.step_s,
        "stages": {
            "generate": step.generate_s,
            "forward": step.forward_s,
            "train": step.train_s,
            "sync": step.sync_s,
            "switch": step.switch_s,
        },
    }


def rows() -> list[tuple[dict, dict]]:
    catalog = load_catalog(CATALOG)
    runs = yaml.safe_load(DATA.read_text())["runs"]
    return [(run, predict(run, catalog)) for run in runs]


def main() -> int:
    print(
        f"{'run':<42} {'sku':<8} {'GPUs':>4} {'placement':<19} {'pred tok/s/GPU':>14} {'published':>9} {'ratio':>6} "
        f"{'pred step s':>11} {'published':>9} {'ratio':>6}"
    )
    worst = 1.0
    for run, p in rows():
        ratio = p["tokens_per_s_per_gpu"] / run["published_tokens_per_s_per_gpu"]
        step_ratio = run["published_step_s"] / p["step_s"]
        worst = max(worst, ratio, 1.0 / ratio)
        placement = run.get("placement", "colocated") + (" async" if run.get("async") else "")
        print(
            f"{run['name']:<42} {run['sku']:<8} {run['gpus']:>4} {placement:<19} "
            f"{p['tokens_per_s_per_gpu']:>14,.0f} {run['published_tokens_per_s_per_gpu']:>9,} {ratio:>6.2f} "
            f"{p['step_s']:>11.1f} {run['published_step_s']:>9} {step_ratio:>6.2f}"
        )
        print("    " + ", ".join(f"{k} {v:.1f} s" for k, v in p["stages"].items()))
    print(f"worst factor (tokens/s a GPU, either way): {worst:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
