"""Partial activation recompute (issues 48 and 49): full recompute of N layers of each pipeline stage, the rest
keeping their activations (Megatron-Core's ``--recompute-method block --recompute-num-layers``, torchtune's
``ac_mode: selective, ac_option: k``). ``check --recompute layers:N`` takes it; ``solve`` recomputes the fewest
layers that fit where the framework can, and says how many; the exports carry the count."""

from __future__ import annotations

import shlex
from dataclasses import replace

import numpy as np
import pytest
import tomllib
from typer.testing import CliRunner

from optimizer import CheckRequest, check, plan
from optimizer.cli import app
from optimizer.inputs.files import expand_models, load_catalog
from optimizer.inputs.schema import Problem, Strategy
from optimizer.physics.layout import Layout, Recompute, RunSettings
from optimizer.physics.memory import activation_bytes, least_recomputed_layers, op_saved_bytes_per_token
from optimizer.physics.time import op_recompute_flops_per_token
from optimizer.planning.calibration import job_context
from optimizer.planning.frameworks import recompute_count
from optimizer.planning.runnable import why_not_runnable
from optimizer.present.exports import export
from optimizer.present.exports.megatron import megatron_args

runner = CliRunner()

# The case: Llama 3.1 70B SFT on 8 B300 under FSDP ZeRO-3, TP 1 (the recipe batch, 32 x 4,096 tokens).
JOB_70B = {"model": "llama-3.1-70b", "tokens": "2B"}
B300_ZERO3 = {"zero": 3, "tp": 1, "framework": "fsdp", "compare": False}


def problem_of(job: dict, **constraints) -> Problem:
    return Problem.model_validate(expand_models({"catalog": "default", "job": job, "constraints": constraints}))


def checked(recompute: str | None, job: dict = JOB_70B, sku: str = "B300", gpus: int = 8, **fixed):
    return check(problem_of(job), CheckRequest(sku, gpus, recompute=recompute, **{**B300_ZERO3, **fixed}))


# The case on 8 B300 fits without recompute since the framework reserve stopped growing with capacity
# (265.2 of 268.2 GiB, at the edge; physics/memory.allocator_fragmentation_bytes): the same job on 16 B200 is short.
TWO_B200_NODES = {"sku": "B200", "gpus": 16}


def test_the_seventy_b_zero3_case_fits_with_a_few_layers_recomputed_at_under_ten_percent():
    none, full, chosen = (checked(rc, **TWO_B200_NODES) for rc in ("none", "full", None))
    assert not none.fits and full.fits and chosen.fits
    s = chosen.plan.strategy
    assert s.recompute == "full" and s.recompute_layers is not None and s.recompute_layers < 80
    # recomputing every layer adds a third of the compute, partly hidden here where ZeRO-3's gathers over two
    # nodes run beside it (half the compute hides them: the fitted overlap); a few layers cost a few percent
    assert none.plan.tokens_per_s / chosen.plan.tokens_per_s < 1.10
    assert 1.04 < none.plan.tokens_per_s / full.plan.tokens_per_s <= 4 / 3
    # and the plan is the fastest that fits: one layer fewer (in torchtune's every-k counts) does not
    fewer = recompute_count("every_k", s.recompute_layers - 1, 80, 1, 1)
    if fewer < s.recompute_layers:
        assert not checked(f"layers:{fewer}", **TWO_B200_NODES).fits


def test_solve_finds_it_and_check_takes_it_back_unchanged():
    problem = problem_of({**JOB_70B, "framework": "fsdp"}, gpu={"types": ["B200"]}, max_gpus=16)
    best = plan(problem).best
    assert best is not None and best.strategy.recompute_layers
    again = check(
        problem,
        CheckRequest(
            "B200",
            16,
            zero=3,
            tp=1,
            micro_batch=best.strategy.micro_batch,
            grad_accum=best.strategy.grad_accum,
            recompute=best.strategy.recompute_label,
            compare=False,
        ),
    )
    assert again.plan.strategy == best.strategy
    assert again.plan.tokens_per_s == pytest.approx(best.tokens_per_s)
    assert again.plan.memory_gib.total == pytest.approx(best.memory_gib.total)


def test_full_recompute_named_recomputes_every_layer():
    full = checked("full")
    assert full.plan.strategy.recompute_layers is None
    assert checked("layers:80").plan.memory_gib.activations == pytest.approx(full.plan.memory_gib.activations)


SHAPE = job_context(problem_of(JOB_70B), load_catalog("default")).shape  # Llama 3.1 70B's, 80 layers


def test_activations_shrink_and_time_grows_with_each_layer_recomputed():
    settings = RunSettings(seq_len=4096)
    counts = np.arange(1, 81)
    layout = Layout(recompute=Recompute.FULL, recompute_layers=counts)
    acts = activation_bytes(SHAPE, settings, layout)
    # (the last one saves nothing: its working set is live when it re-runs, as its saved tensors would be)
    assert np.all(np.diff(acts)[:-1] < 0)
    everything = activation_bytes(SHAPE, settings, Layout(recompute=Recompute.FULL))
    nothing = activation_bytes(SHAPE, settings, Layout(recompute=Recompute.NONE))
    assert acts[-1] == pytest.approx(everything) and acts[0] < nothing
    # each recomputed layer trades its saved tensors for its 2 sbh input
    per_layer = (nothing - everything) / 80
    assert acts[39] == pytest.approx(nothing - 40 * per_layer, rel=0.02)
    assert np.all(np.diff(layout.recomputed_share(80)) > 0)


def test_the_fewest_that_fit_is_the_bisection_of_the_linear_scan():
    settings = RunSettings(seq_len=4096)
    layout = Layout(recompute=Recompute.FULL, pp=np.array([1, 2, 4, 8]), micro_batch=np.array([1, 2, 1, 4]))
    budget = np.array([60e9, 40e9, 20e9, 30e9])
    least = least_recomputed_layers(SHAPE, settings, layout, budget)
    for i, n in enumerate(least):
        one = Layout(recompute=Recompute.FULL, pp=int(layout.pp[i]), micro_batch=int(layout.micro_batch[i]))
        stage = int(np.ceil(80 / layout.pp[i]))
        fitting = [
            k
            for k in range(1, stage + 1)
            if activation_bytes(SHAPE, settings, replace(one, recompute_layers=k)) <= budget[i]
        ]
        expected = 0 if not fitting or fitting[0] == stage else fitting[0]
        assert n == expected


# 32 H100 under Megatron, PP 4 x 4 chunks per GPU, 8 of each GPU's 20 layers fully recomputed
INTERLEAVED = Strategy(
    tp=4,
    pp=4,
    dp=2,
    zero_stage=1,
    grad_accum=16,
    recompute="full",
    recompute_layers=8,
    virtual_stages=4,
    framework="megatron",
)


def test_megatron_recomputes_the_same_count_in_each_chunk():
    s = INTERLEAVED.model_copy(update={"recompute_layers": 6})
    assert any("same number of layers in each" in rule for rule in why_not_runnable("megatron", s, 80))
    # more layers than a stage has: every layer, which runs
    assert not why_not_runnable("megatron", INTERLEAVED.model_copy(update={"recompute_layers": 30}), 80)
    runs = INTERLEAVED
    assert not why_not_runnable("megatron", runs, 80)
    args = shlex.split(" ".join(megatron_args(plan_of(runs), num_layers=80)))
    assert args[args.index("--recompute-method") + 1] == "block"
    assert args[args.index("--recompute-num-layers") + 1] == "2"  # 8 per GPU over its 4 chunks
    assert any(
        "every layer or none" in rule
        for rule in why_not_runnable(
            "deepspeed", runs.model_copy(update={"virtual_stages": 1, "pp": 1, "tp": 1, "dp": 32}), 80
        )
    )


def plan_of(strategy: Strategy):
    """A plan of the 70B with ``strategy``, as check answers it."""
    s = strategy
    result = check(
        problem_of({**JOB_70B, "framework": s.framework, "global_batch": s.global_batch}),
        CheckRequest(
            "H100",
            s.tp * s.pp * s.dp,
            tp=s.tp,
            pp=s.pp,
            zero=s.zero_stage,
            micro_batch=s.micro_batch,
            virtual_stages=s.virtual_stages,
            recompute=s.recompute_label,
            compare=False,
        ),
    )
    assert result.plan.strategy.recompute_layers == s.recompute_layers
    return result.plan


@pytest.mark.parametrize("bad", ["layers", "layers:", "layers:0", "layers:x", "some", "layers:-2"])
def test_a_bad_recompute_is_one_paragraph_naming_the_flag(bad):
    r = runner.invoke(
        app, ["check", "--model", "llama-3.1-8b", "--tokens", "1B", "--sku", "H100", "--gpus", "8", "--recompute", bad]
    )
    assert r.exit_code == 2, r.output
    assert "--recompute" in r.output and "layers:N" in r.output and "Traceback" not in r.output


def test_the_table_names_the_layers():
    r = runner.invoke(
        app,
        [
            "check",
            "--model",
            "llama-3.1-70b",
            "--tokens",
            "2B",
            "--sku",
            "B300",
            "--gpus",
            "8",
            "--zero",
            "3",
            "--tp",
            "1",
            "--framework",
            "fsdp",
            "--recompute",
            "layers:10",
            "--no-compare",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "full recompute of 10 layers" in r.output


def test_per_op_selective_recompute_keeps_torchtitans_saved_ops():
    # torchtitan's SelectiveAC on a Llama block: the input, q, v, SDPA's output (with its fp32 log-sum-exp per
    # head), w1's and w2's outputs; wk, wo and w3 (the second, fourth and sixth matmuls) re-run in backward.
    h, q, kv, f, heads = 4096, 4096, 1024, 14336, 32  # Llama 3.1 8B
    shape = job_context(problem_of({"model": "llama-3.1-8b", "tokens": "1B"}), load_catalog("default")).shape
    assert op_saved_bytes_per_token(shape) == 2 * (h + q + kv + q + f + h) + 4 * heads
    assert op_recompute_flops_per_token(shape) == 2 * 32 * (h * kv + q * h + h * f)
    s = Strategy(dp=8, zero_stage=3, shard_degree=8, micro_batch=2, recompute="op", framework="torchtitan")
    assert not why_not_runnable("torchtitan", s, 32)
    assert any(
        "per-op selective" in rule for rule in why_not_runnable("megatron", s.model_copy(update={"zero_stage": 1}), 32)
    )


def test_per_op_selective_recompute_sits_between_none_and_full_in_memory_and_time():
    job = {"model": "llama-3.1-8b", "tokens": "1B", "seq_len": 8192, "framework": "torchtitan"}
    plans = {
        rc: check(
            problem_of(job), CheckRequest("H100", 8, tp=1, pp=1, zero=3, micro_batch=2, recompute=rc, compare=False)
        ).plan
        for rc in ("none", "op", "full")
    }
    acts = {rc: p.memory_gib.activations for rc, p in plans.items()}
    speed = {rc: p.tokens_per_s for rc, p in plans.items()}
    assert acts["full"] < acts["op"] < 0.5 * acts["none"]
    assert speed["full"] < speed["op"] < speed["none"]


def test_per_op_recompute_asked_under_auto_runs_in_torchtitan_and_its_export_says_so():
    job = {"model": "llama-3.1-8b", "tokens": "1B", "seq_len": 8192}
    result = check(problem_of(job), CheckRequest("H100", 8, tp=1, pp=1, zero=3, recompute="op", compare=False))
    s = result.plan.strategy
    assert (s.recompute, s.framework) == ("op", "torchtitan") and result.runnable
    text = export(result.plan, "torchtitan", job=problem_of(job).job)
    config = tomllib.loads("\n".join(line for line in text.splitlines() if not line.startswith("#")))
    assert config["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    # solve under auto does not offer it (its element-wise recompute is not timed)
    best = plan(problem_of(job, gpu={"types": ["H100"]}, max_gpus=8)).best
    assert best is not None and best.strategy.recompute != "op"


def test_a_strategy_copied_with_another_recompute_keeps_no_stale_layer_count():
    partial = plan_of(INTERLEAVED)
    none = partial.model_copy(update={"strategy": partial.strategy.model_copy(update={"recompute": "none"})})
    assert none.strategy.recompute_label == "none" and none.strategy.partial_layers is None
    assert not any("recompute" in arg for arg in megatron_args(none, num_layers=80))
