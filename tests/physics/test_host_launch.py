"""The host's floor under an eager PyTorch step (physics/host_launch.py): a micro-batch takes the longer of the GPU's
work and the host's time to issue its operators. Independent truths: the operator count against a hand enumeration
of transformers' Llama code, the floor binding for a 1B model at 512 tokens on one B200 and not for an 8B at 8192,
torch.compile lowering it, Transformer Engine's stack left out."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.host_launch import (
    HOST_S_PER_OP,
    MULTI_TENSOR_ELEMENTS_PER_LAUNCH,
    layer_ops,
    micro_batch_host_s,
    optimizer_host_s,
    optimizer_step_ops,
)
from optimizer.physics.layout import Layout, Recompute, RunSettings
from optimizer.physics.shapes import ModelShape, TrainingState
from optimizer.physics.time import StepTime

# Llama 3.2 1B's config (meta-llama/Llama-3.2-1B: 16 layers of 2048, 32 heads, 8 KV heads of 64, MLP 8192, tied)
LLAMA_1B = {
    "params": 1235814400,
    "layers": 16,
    "hidden": 2048,
    "heads": 32,
    "kv_heads": 8,
    "head_dim": 64,
    "ffn_hidden": 8192,
    "vocab": 128256,
    "tied_embeddings": True,
}
SHAPE = ModelShape(
    params=1.24e9, active_params=1.24e9, layers=16, hidden=2048, heads=32, kv_width=512, q_width=2048,
    ffn_active=8192, vocab=128256, gated_mlp=True, has_shapes=True,
)  # fmt: skip
FULL = TrainingState(trainable_params=1.24e9, weight_bytes=2.0, adapter_weight_bytes=0.0, grad_bytes=2.0,
                     optimizer_bytes=4.0)  # fmt: skip

# transformers' modeling_llama.py, read op by op (LlamaRMSNorm.forward, apply_rotary_pos_emb with rotate_half,
# LlamaAttention.forward with SDPA, LlamaMLP.forward, LlamaDecoderLayer.forward): one entry per dispatched operator
RMSNORM = ["to(float32)", "pow(2)", "mean(-1)", "+ eps", "rsqrt", "h * rsqrt", "to(bf16)", "weight * h"]
ROPE_ONE = ["x * cos", "-x2", "cat(-x2, x1)", "rot * sin", "+"]
LAYER_FORWARD = (
    RMSNORM
    + ["q_proj", "k_proj", "v_proj"]
    + ROPE_ONE * 2
    + ["sdpa", "o_proj", "residual +"]
    + RMSNORM
    + ["gate_proj", "up_proj", "silu", "silu * up", "down_proj", "residual +"]
)
# their backward kernels, from each operator's derivative (tools/autograd/derivatives.yaml)
RMSNORM_BACK = (
    ["to(bf16) back"]
    + ["weight-side product", "h-side product", "weight grad sum"]
    + ["to(float32) back"]
    + ["rsqrt-side product", "h-side product", "broadcast sum"]
    + ["rsqrt: result^3", "* grad", "* -0.5"]
    + ["mean: / n"]
    + ["pow: self^1", "* 2 * grad"]
    + ["fp32 input's two gradients added"]
)
ROPE_ONE_BACK = ["* cos", "* sin", "neg", "slice zeros", "slice copy", "slice zeros", "slice copy", "add", "add"]
LINEAR_BACK = ["data-gradient GEMM", "weight-gradient GEMM"]
LAYER_BACKWARD = (
    RMSNORM_BACK * 2
    + LINEAR_BACK * 7
    + ["q/k/v input gradients added", "added", "gate/up input gradients added"]
    + ["sdpa backward"]
    + ROPE_ONE_BACK * 2
    + ["silu backward", "mul: gate side", "mul: up side"]
    + ["residual stream gradient added"] * 2
)


def problem_of(**job) -> Problem:
    base = {"model": LLAMA_1B, "tokens": "1B", "seq_len": 512, "global_batch": 1, "framework": "fsdp"}
    base |= {"optimizer": "adamw", "optimizer_implementation": "foreach", "master_weights": False}
    return Problem.model_validate(expand_models({"catalog": "default", "job": {**base, **job}}))


ONE_B200 = CheckRequest("B200", 1, tp=1, pp=1, zero=0, micro_batch=1, recompute="full", framework="fsdp")


def test_a_llama_layer_issues_the_operators_its_code_does():
    forward, backward = layer_ops(SHAPE, FULL, compiled=False)
    assert forward == len(LAYER_FORWARD) == 38
    assert backward == len(LAYER_BACKWARD) == 71
    # compiled: the GEMMs and the attention stay calls of their own; each element-wise chain is one kernel
    compiled_forward, compiled_backward = layer_ops(SHAPE, FULL, compiled=True)
    gemms = sum(1 for op in LAYER_FORWARD if op.endswith("_proj"))
    assert gemms + 1 < compiled_forward < forward / 2
    assert 2 * gemms + 1 < compiled_backward < backward / 2


def test_lora_adds_its_branches_and_drops_the_frozen_weights_gradients():
    lora = replace(FULL, lora=True, trainable_params=1e7, lora_targets="all_linear")
    full_f, full_b = layer_ops(SHAPE, FULL, compiled=False)
    lora_f, lora_b = layer_ops(SHAPE, lora, compiled=False)
    assert lora_f == full_f + 7 * 4  # A, B, scaling, add per adapted linear
    assert lora_b == full_b - 7 + 7 * 6  # no weight gradient for the 7 base weights; the branches' backward
    dropout_f, _ = layer_ops(SHAPE, replace(lora, lora_dropout=True), compiled=False)
    assert dropout_f == lora_f + 7


def test_a_micro_batch_counts_its_layers_the_recomputed_forward_and_what_lies_around_them():
    settings = RunSettings(seq_len=512, host_launch=True)
    none = micro_batch_host_s(SHAPE, FULL, Layout(), settings)
    full = micro_batch_host_s(SHAPE, FULL, Layout(recompute=Recompute.FULL), settings)
    assert float(full - none) == pytest.approx(16 * 38 * HOST_S_PER_OP)
    # two pipeline stages: each issues its 8 layers' operators
    halves = micro_batch_host_s(SHAPE, FULL, Layout(pp=2), settings)
    assert float(none - halves) == pytest.approx(8 * (38 + 71) * HOST_S_PER_OP)
    # Transformer Engine's stack (host_launch False) and a model known by its size alone have no floor
    assert float(micro_batch_host_s(SHAPE, FULL, Layout(), RunSettings(seq_len=512))) == 0.0
    sized = ModelShape(params=1.24e9, active_params=1.24e9)
    assert float(micro_batch_host_s(sized, FULL, Layout(), settings)) == 0.0


def test_the_optimizer_step_dispatches_its_multi_tensor_operators_once_each():
    assert optimizer_step_ops("adamw", "foreach") == 8
    assert optimizer_step_ops("sgd", "foreach") == 4
    assert optimizer_step_ops("adamw", "fused") == 1
    foreach = RunSettings(seq_len=512, host_launch=True, optimizer_step_ops=8.0)
    fused = replace(foreach, optimizer_step_ops=1.0)
    assert float(optimizer_host_s(SHAPE, FULL, Layout(), foreach)) > 7 * float(
        optimizer_host_s(SHAPE, FULL, Layout(), fused)
    )
    # 1.24B elements: 9 launches of 65536 x 2240 each per operator, the first one dispatched
    assert math.ceil(1.24e9 / MULTI_TENSOR_ELEMENTS_PER_LAUNCH) == 9


def test_the_floor_binds_for_a_1b_model_at_512_tokens_on_a_b200_eager():
    plan = check(problem_of(), ONE_B200).plan
    assert plan.bound == "host"
    settings = RunSettings(seq_len=512, host_launch=True, optimizer_step_ops=8.0)
    layout = Layout(recompute=Recompute.FULL)
    host_s = float(micro_batch_host_s(SHAPE, FULL, layout, settings))
    # the step lasts at least the host's time to issue its micro-batch, and is no longer than that plus the GPU's
    # optimizer step and the host's for it (a few ms)
    assert host_s <= plan.step_s < host_s + 0.012
    assert 0.02 < host_s < 0.04  # about 2,400 operators at 11 us


def test_the_floor_does_not_bind_for_the_8b_model_at_8192_tokens():
    eight_b = {"model": "llama-3.1-8b", "seq_len": 8192}
    plan = check(problem_of(**eight_b), ONE_B200).plan
    assert plan.bound != "host"
    assert plan.time_breakdown_s["compute"] > 5 * 0.06  # the host's ~60 ms hide behind seconds of matmuls


def test_compile_lowers_the_floor():
    eager = check(problem_of(), ONE_B200).plan
    compiled = check(problem_of(compile=True, kernels="fused"), ONE_B200).plan
    settings = RunSettings(seq_len=512, host_launch=True)
    layout = Layout(recompute=Recompute.FULL)
    eager_s = micro_batch_host_s(SHAPE, FULL, layout, settings)
    compiled_s = micro_batch_host_s(SHAPE, FULL, layout, replace(settings, compiled=True))
    assert float(compiled_s) < float(eager_s) / 2
    assert compiled.tokens_per_s > 1.5 * eager.tokens_per_s


def test_megatron_cores_transformer_engine_stack_has_no_floor():
    megatron = CheckRequest("B200", 1, tp=1, pp=1, zero=0, micro_batch=1, recompute="full", framework="megatron")
    plan = check(problem_of(framework="megatron"), megatron).plan
    assert plan.bound != "host"


def test_faster_scales_the_launch_terms_and_bound_reads_all_of_the_host_time():
    # StepTime itself: the exposed part is a part of ideal_s, the whole launch time what bound compares
    st = StepTime(
        step_s=np.array([0.03]), ideal_s=np.array([0.03]), compute_s=np.array([0.008]), memory_s=np.array([0.002]),
        network_s=np.array([0.0]), bubble_s=np.array([0.0]), tokens_per_step=np.array([512.0]),
        model_flops_per_token=1.0, launch_host_s=np.array([0.004]), launch_total_s=np.array([0.03]),
    )  # fmt: skip
    assert st.bound()[0] == "host"  # 30 ms of launches against 8 ms of matmuls, though only 4 ms are exposed
    assert float(st.faster(2.0).launch_total_s[0]) == pytest.approx(0.015)
    assert float(st.faster(2.0).launch_host_s[0]) == pytest.approx(0.002)
    hidden = replace(st, launch_host_s=np.array([0.0]), launch_total_s=np.array([0.005]))
    assert hidden.bound()[0] == "compute"


def test_a_stated_whole_step_efficiency_is_the_stack_as_it_ran_host_included():
    job = {"model": LLAMA_1B, "tokens": "1B", "seq_len": 512, "global_batch": 1, "framework": "fsdp"}
    # a high stated MFU: the GPU's work alone would take a few ms, well under the host's ~27 ms
    stated = Problem.model_validate(expand_models({"catalog": "default", "job": job, "assumptions": {"mfu": 0.6}}))
    plan = check(stated, ONE_B200).plan
    assert plan.bound != "host"
    assert plan.step_s < 0.02
