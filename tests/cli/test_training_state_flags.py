"""``--no-master-weights`` and ``--lora-targets``: job flags for ``job.master_weights`` and ``job.lora_targets``,
planning as the job file's fields plan, with the bytes each one moves (AdamW's state; LoRA's adapters)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from optimizer.cli import app

runner = CliRunner()

# Llama 3.1 8B: 8,030,261,248 parameters (the safetensors total of meta-llama/Llama-3.1-8B); per layer hidden 4,096,
# 8 key/value heads of 128 (k and v 1,024 wide), MLP 14,336; 32 layers
LLAMA_31_8B_PARAMS = 8_030_261_248
HIDDEN, KV_WIDTH, FFN, LAYERS = 4096, 1024, 14336, 32
# AdamW with an fp32 master copy: 4 (master) + 4 + 4 (two fp32 moments) bytes a parameter; pure bf16: 2 + 2 moments
ADAMW_BYTES = {True: 12, False: 4}
GIB = 2**30
JOB = ["--model", "llama-3.1-8b", "--tokens", "1B"]
REPLICATED = ["--sku", "H100", "--gpus", "8", "--tp", "1", "--pp", "1", "--zero", "0"]


def json_answer(*args: str) -> dict:
    r = runner.invoke(app, ["check", *args, "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_no_master_weights_keeps_four_bytes_of_adamw_state_a_parameter():
    memory = {
        kept: json_answer(*JOB, *REPLICATED, "--master-weights" if kept else "--no-master-weights")["memory_gib"]
        for kept in ADAMW_BYTES
    }
    for kept, size in ADAMW_BYTES.items():
        assert memory[kept]["optimizer"] * GIB == pytest.approx(size * LLAMA_31_8B_PARAMS, rel=1e-9), kept
    assert json_answer(*JOB, *REPLICATED)["memory_gib"] == memory[True]  # the default keeps the master copy


def test_the_flags_plan_as_the_job_files_fields(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(
        "job:\n  name: llama-3.1-8b\n  model: llama-3.1-8b\n  tokens: 1B\n  method: lora\n"
        "  master_weights: false\n  lora_targets: attention\n"
    )
    flags = [*JOB, "--method", "lora", "--no-master-weights", "--lora-targets", "attention"]
    assert json_answer(*flags, *REPLICATED) == json_answer(str(path), *REPLICATED)


def test_attention_targets_adapt_q_k_v_o_only():
    # LoRA's trainable parameters are r (in + out) per adapted linear: attention q and o (h -> h), k and v (h -> 1,024);
    # all_linear adds gate and up (h -> f) and down (f -> h). Their gradients (bf16, 2 bytes) are what LoRA keeps.
    def gradients_gib(targets: str) -> float:
        args = [*JOB, "--method", "lora", "--lora-targets", targets, *REPLICATED]
        return json_answer(*args)["memory_gib"]["gradients"]

    attention = 2 * (HIDDEN + HIDDEN) + 2 * (HIDDEN + KV_WIDTH)
    mlp = 3 * (HIDDEN + FFN)
    assert gradients_gib("attention") / gradients_gib("all_linear") == pytest.approx(attention / (attention + mlp))


@pytest.mark.parametrize("bad", [["--lora-targets", "mlp"], ["--master-weights=yes"]])
def test_bad_values_name_the_flag_and_exit_2(bad):
    r = runner.invoke(app, ["check", *JOB, "--method", "lora", *REPLICATED, *bad])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and bad[0].split("=")[0] in r.output
