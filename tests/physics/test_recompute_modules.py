"""Selective recompute by module, as Megatron-Core's --recompute-modules names it (job.recompute_modules,
physics/recompute_modules.py): what each module frees counted by hand, published runs that ran with them fit the
memory they ran in, and the MLP's recompute costs what Megatron-Bridge measured."""

from __future__ import annotations

import typing

import pytest
import yaml
from paths import ROOT
from typer.testing import CliRunner

from optimizer import CheckRequest, check
from optimizer.cli import app
from optimizer.inputs.files import expand_models, load_catalog
from optimizer.inputs.schema import JobSpec, Problem
from optimizer.physics.recompute_modules import RECOMPUTE_MODULES, freed_bytes_per_token, rerun_flops_per_token
from optimizer.physics.shapes import ModelShape

HARDWARE = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
runner = CliRunner()

# Qwen3-235B-A22B (config.json): hidden 4096, 128 experts of width 1536, 8 a token, every layer MoE
QWEN3_235B = ModelShape(
    params=235e9,
    active_params=22e9,
    layers=94,
    hidden=4096,
    ffn_active=8 * 1536,
    experts=128,
    experts_per_token=8,
    expert_ffn=1536,
)
# Llama 3.1 70B: hidden 8192, a gated MLP of width 28,672
LLAMA_70B = ModelShape(params=70.6e9, active_params=70.6e9, layers=80, hidden=8192, ffn_active=28672)


def test_what_each_module_frees_by_hand():
    h, f_routed = 4096, 8 * 1536
    both = frozenset({"layernorm", "moe_act"})
    # bf16 under Transformer Engine: the two norms' outputs (2h each) and the experts' activation output (2 f)
    assert freed_bytes_per_token(QWEN3_235B, both, True, False) == pytest.approx(2 * h + 2 * h + 2 * f_routed)
    # FP8: the QKV input in one byte (h), the router's input still 16 bits (2h), the FC2 input in one byte (f)
    assert freed_bytes_per_token(QWEN3_235B, both, True, True) == pytest.approx(h + 2 * h + f_routed)
    # the names are Megatron-Core's: eager PyTorch layers keep what they keep
    assert freed_bytes_per_token(QWEN3_235B, both, False, False) == 0.0
    # the default (the attention core) frees nothing FlashAttention keeps
    assert freed_bytes_per_token(LLAMA_70B, frozenset({"core_attn"}), True, False) == 0.0
    # a dense MLP checkpointed from its input: its norm's output, FC1's (4f) and the SwiGLU's (2f)
    assert freed_bytes_per_token(LLAMA_70B, frozenset({"mlp"}), True, False) == pytest.approx(2 * 8192 + 6 * 28672)
    # and its forward re-runs: 2 x its 3 h f parameters a token, every layer
    assert rerun_flops_per_token(LLAMA_70B, frozenset({"mlp"})) == pytest.approx(2 * 3 * 8192 * 28672 * 80)


def test_the_job_field_names_the_modules_the_physics_models():
    annotation = JobSpec.model_fields["recompute_modules"].annotation
    (listed,) = [a for a in typing.get_args(annotation) if typing.get_origin(a) is list]
    assert typing.get_args(typing.get_args(listed)[0]) == RECOMPUTE_MODULES


def _unseen(name: str) -> dict:
    rows = yaml.safe_load((ROOT / "validation" / "unseen_runs.yaml").read_text())["runs"]
    return next(r for r in rows if r["name"] == name)


@pytest.mark.parametrize("name", ["zoo-qwen3-235b-h100-deepep-pp8", "zoo-qwen3-235b-h100-a2a-pp32"])
def test_published_runs_with_their_modules_fit_where_they_ran(name):
    # NVIDIA's Megatron-MoE-ModelZoo ran Qwen3-235B-A22B on 256 H100 with --recompute-modules layernorm moe_act
    # (model_configs/benchmarking/Qwen3-235B-A22B.yaml): without the modules gpuplan called them "does not fit"
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    import throughput

    row = _unseen(name)
    without = throughput.checked({**row, "recompute_modules": ["core_attn"]}, HARDWARE)
    with_modules = throughput.checked({**row, "recompute_modules": ["layernorm", "moe_act"]}, HARDWARE)
    assert not without.fits
    assert with_modules.fits, with_modules.notes
    assert with_modules.plan.strategy.recompute == "selective"


def _llama_sft(modules: list[str]) -> Problem:
    # Megatron-Bridge's activation-recompute skill: Llama 3 70B SFT on 32 H100, FP8, TP 4, PP 4, VPP 5, MBS 1, GBS 32
    job = {
        "name": "llama3-70b-sft",
        "model": "llama-3.1-70b",
        "tokens": "10M",
        "seq_len": 4096,
        "global_batch": 32,
        "precision": "fp8",
        "framework": "megatron",
        "kernels": "fused",
        "recompute_modules": modules,
    }
    return Problem.model_validate(expand_models({"job": job}))


def test_the_mlps_recompute_costs_what_megatron_bridge_measured():
    # published: 704 TFLOP/s with [core_attn], 593.6 with [mlp]: 15.7 % slower (SKILL.md, Megatron-Bridge 067f987)
    request = CheckRequest("H100-SXM", 32, tp=4, pp=4, zero=1, micro_batch=1, recompute="selective", virtual_stages=5)
    base = check(_llama_sft(["core_attn"]), request, catalog=HARDWARE).plan.tokens_per_s
    mlp = check(_llama_sft(["mlp"]), request, catalog=HARDWARE).plan.tokens_per_s
    assert 1 - mlp / base == pytest.approx(1 - 593.6 / 704, abs=0.04)


def test_modules_a_framework_does_not_run_are_refused(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("job: {name: j, model: llama-3.1-8b, tokens: 1B, framework: fsdp, recompute_modules: [layernorm]}\n")
    result = runner.invoke(app, ["check", str(job), "--sku", "H100-SXM", "--gpus", "8"])
    assert result.exit_code == 2, result.output
    assert "recompute_modules" in result.output and "megatron" in result.output
    job.write_text("job: {name: j, model: llama-3.1-8b, tokens: 1B, recompute_modules: [everything]}\n")
    result = runner.invoke(app, ["check", str(job), "--sku", "H100-SXM", "--gpus", "8"])
    assert result.exit_code == 2 and "recompute_modules" in result.output, result.output
