"""DeepSpeed ZeRO-3's per-module fetches (physics/zero3_hooks.py): a hook per module with partitioned parameters,
in forward, backward and the recomputed forward, 0.41 ms each (DeepSpeed PR 1188, measured on a dense BERT).
What it explains: Qwen's README times a full fine-tune of Qwen-7B on 2 A100 under ZeRO-3 at 4.5 s an iteration
(8 micro-batches of one 1,024-token sequence), 1.44x slower than gpuplan predicted without it (1.05x with it:
validation/finetune_runs.yaml qwen1-7b-full-2xa100-s1024)."""

from __future__ import annotations

import sys

import pytest
import yaml
from paths import ROOT

from optimizer import load_catalog
from optimizer.api import check
from optimizer.inputs.files import expand_models
from optimizer.inputs.hf_counts import model_fields
from optimizer.inputs.requests import CheckRequest
from optimizer.inputs.schema import Problem
from optimizer.physics.constants import ZERO3_MODULE_FETCH_S
from optimizer.physics.shapes import ModelShape, TrainingState
from optimizer.physics.zero3_hooks import fetched_modules_per_layer

sys.path.insert(0, str(ROOT / "bench"))
import throughput  # noqa: E402

LLAMA_8B_LAYERS = 32


def _plan(framework: str, zero: int, micro_batch: int, **job):
    data = {
        "catalog": "default",
        "job": {
            "model": "llama-3.1-8b",
            "tokens": "1B",
            "seq_len": 1024,
            "global_batch": 64,
            "framework": framework,
            **job,
        },
    }
    problem = Problem.model_validate(expand_models(data))
    request = CheckRequest("A100-80GB", 8, framework=framework, zero=zero, micro_batch=micro_batch, recompute="full")
    return check(problem, request)


def test_deepspeed_zero3_waits_for_a_hook_per_linear_in_each_pass():
    result = _plan("deepspeed", 3, 1)
    plan = result.plan
    # Llama's 7 linears a block (norms persist below 10 x hidden), the embedding and the LM head; forward,
    # recomputed forward and backward; every micro-batch of the step
    per_micro_batch = 3 * (LLAMA_8B_LAYERS * 7 + 2) * ZERO3_MODULE_FETCH_S
    assert plan.time_breakdown_s["zero3_fetch"] == pytest.approx(plan.strategy.grad_accum * per_micro_batch)
    assert any("hook of its own" in note for note in result.notes)


def test_zero2_and_fsdp_fetch_no_module_and_the_share_falls_with_the_micro_batch():
    zero3, zero2 = _plan("deepspeed", 3, 1).plan, _plan("deepspeed", 2, 1).plan
    fsdp = _plan("fsdp", 3, 1).plan  # FSDP gathers a decoder layer's flat parameter at once
    assert "zero3_fetch" not in zero2.time_breakdown_s and "zero3_fetch" not in fsdp.time_breakdown_s
    assert zero3.step_s > fsdp.step_s
    larger = _plan("deepspeed", 3, 4).plan
    share = {mb: p.time_breakdown_s["zero3_fetch"] / p.step_s for mb, p in ((1, zero3), (4, larger))}
    assert share[4] < share[1] / 2


def _shape(**fields) -> ModelShape:
    base = {"params": 7e9, "active_params": 7e9, "layers": 32, "hidden": 4096, "has_shapes": True}
    return ModelShape(**{**base, **fields})


def _train(trainable: float, targets: str = "all_linear") -> TrainingState:
    return TrainingState(trainable, 2.0, 2.0, 2.0, 12.0, lora=True, lora_targets=targets)


def test_lora_matrices_are_fetched_only_above_the_persistence_threshold():
    # PEFT makes lora_A and lora_B modules of their own: r x width parameters each, fetched from 10 x hidden
    shape = _shape()
    rank_8 = _train(8 * 4096 * 32 * 7 * 2)  # r x h parameters a matrix, two matrices per linear
    rank_64 = _train(64 * 4096 * 32 * 7 * 2)
    assert fetched_modules_per_layer(shape, rank_8) == 7  # 32,768 < 40,960: persisted
    assert fetched_modules_per_layer(shape, rank_64) == 7 + 14


def test_qwens_published_zero3_full_fine_tune_takes_the_fetches_it_waits_for():
    # Qwen's README: Qwen-7B (its 5 linears a block) fully fine-tuned on 2 A100 under DeepSpeed ZeRO-3, 8
    # micro-batches of one 1,024-token sequence an iteration, 4.5 s an iteration (1,820 tokens/s a GPU)
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    runs = yaml.safe_load((ROOT / "validation" / "finetune_runs.yaml").read_text())["runs"]
    run = next(r for r in runs if r["name"] == "qwen1-7b-full-2xa100-s1024")
    assert run["framework"] == "deepspeed" and run["model"]["linear_modules"] == 5
    plan = throughput.checked(run, catalog, pinned=True).plan
    per_gpu = plan.tokens_per_s / run["gpus"]
    assert per_gpu == pytest.approx(run["tokens_per_s_per_gpu"], rel=0.10)
    without = plan.tokens_per_s * plan.step_s / (plan.step_s - plan.time_breakdown_s["zero3_fetch"]) / run["gpus"]
    assert without > 1.3 * run["tokens_per_s_per_gpu"]  # without them: as it was predicted, 1.44x too fast


def test_a_hub_config_with_fused_projections_carries_its_count():
    phi3 = {
        "model_type": "phi3",
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32064,
    }
    assert model_fields(phi3)["linear_modules"] == 4
    llama = {**phi3, "model_type": "llama"}
    assert "linear_modules" not in model_fields(llama)
