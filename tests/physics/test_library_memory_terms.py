"""Library-specific memory terms (optimizer/physics/memory_terms.py): bitsandbytes' 4-bit linears keep their inputs."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.physics.layout import Layout, Recompute, RunSettings
from optimizer.physics.memory_terms import bnb_saved_input_bytes, bnb_saved_input_bytes_per_token
from optimizer.physics.shapes import ModelShape

# Llama 2 7B (config.json): 32 layers, hidden 4096, MLP 11008
LLAMA2_7B = ModelShape(
    params=6.74e9, active_params=6.74e9, layers=32.0, hidden=4096.0, heads=32.0, kv_width=4096.0, q_width=4096.0,
    ffn_active=11008.0, vocab=32000.0, gated_mlp=True, has_shapes=True,
)  # fmt: skip


def _layout(**kw) -> Layout:
    base = dict(tp=1, pp=1, dp=1, zero=0, shard=1, micro_batch=1, grad_accum=1, recompute=Recompute.NONE)
    return Layout(**{**base, **kw})


def test_per_token_is_the_two_norm_outputs_the_output_projection_and_down_projection_inputs():
    # 2h + 2h + 2q + 2f = 46,592 bytes per token and block
    assert bnb_saved_input_bytes_per_token(LLAMA2_7B) == 2 * 4096 * 3 + 2 * 11008


def test_every_layer_without_recompute_one_with_it():
    settings = RunSettings(seq_len=1304.0)
    none = float(bnb_saved_input_bytes(LLAMA2_7B, settings, _layout()))
    assert none / 2**30 == pytest.approx(1.81, abs=0.01)  # LitGPT's 7B 4-bit row over its 16-bit row, less weights
    full = float(bnb_saved_input_bytes(LLAMA2_7B, settings, _layout(recompute=Recompute.FULL)))
    assert full == pytest.approx(none / 32)
    tp2 = float(bnb_saved_input_bytes(LLAMA2_7B, settings, _layout(tp=2)))
    assert tp2 == pytest.approx(none / 2)
    assert np.all(
        bnb_saved_input_bytes(LLAMA2_7B, RunSettings(seq_len=1304.0, activation_offload=True), _layout())
        <= 2 * none / 32
    )


def test_peft_upcasts_a_qlora_base_s_sixteen_bit_parameters_to_fp32_unless_sharded():
    from dataclasses import replace

    from optimizer.physics.memory_terms import kbit_upcast_bytes
    from optimizer.physics.shapes import TrainingState

    base = TrainingState(1e6, 0.516, 2.0, 2.0, 6.0, lora=True, quantized_base=True, bf16_base_params=1.05e9)
    hf = replace(base, bnb_saved_inputs=True)
    assert float(kbit_upcast_bytes(hf, _layout())) == pytest.approx(2.1e9)  # 2 bytes more each, 1.96 GiB
    assert float(kbit_upcast_bytes(hf, _layout(zero=3, shard=8))) == 0.0  # TRL skips it for sharded QLoRA
    assert float(kbit_upcast_bytes(replace(hf, bnb_saved_inputs=False), _layout())) == 0.0  # torchao NF4 (torchtune)
    assert float(kbit_upcast_bytes(base, _layout())) == 0.0


def test_deepspeed_keeps_the_running_block_gathered_up_to_its_reuse_distance():
    from optimizer.physics.memory_terms import DEEPSPEED_MAX_REUSE_DISTANCE_PARAMS, deepspeed_held_block_params

    # Llama 2 70B: a block of 0.856e9 parameters beside the LM head's 0.262e9, which the estimator term counts
    assert float(deepspeed_held_block_params(0.856e9, 0.262e9)) == pytest.approx(0.594e9)
    # a block larger than stage3_max_reuse_distance is released module by module past it
    assert float(deepspeed_held_block_params(3.2e9, 1e8)) == pytest.approx(DEEPSPEED_MAX_REUSE_DISTANCE_PARAMS - 1e8)
    assert float(deepspeed_held_block_params(0.9e9, 1.25e9)) == 0.0  # the largest module is already the larger
