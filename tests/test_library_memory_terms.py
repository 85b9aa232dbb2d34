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
