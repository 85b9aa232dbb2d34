"""Eager attention's score kernels (physics/eager_attention.py): the bytes its op list reads and writes, and the
published cost of running attention unfused (rasbt/LLMs-from-scratch ch05/10: GPT-2 124M on one A100, 55,256
tokens/s with the chapter's own attention, 91,901 with PyTorch's SDPA: 1.66x)."""

from __future__ import annotations

import sys

import pytest
from paths import ROOT

from optimizer import load_catalog
from optimizer.physics.eager_attention import (
    eager_attention_bytes_per_token,
)
from optimizer.physics.shapes import ModelShape

sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402
import unseen  # noqa: E402

GPT2_124M = ModelShape(params=124e6, active_params=124e6, layers=12, hidden=768, heads=12, has_shapes=True)


def test_bytes_per_token_count_every_key_of_every_head_in_every_layer():
    # 12 layers x 12 heads x 1024 keys x (22 + 20) bytes = 6,193,152 bytes a token; full recompute adds a forward
    assert eager_attention_bytes_per_token(GPT2_124M, 1024, 0.0) == pytest.approx(12 * 12 * 1024 * 42)
    assert eager_attention_bytes_per_token(GPT2_124M, 1024, 1.0) == pytest.approx(12 * 12 * 1024 * 64)
    # quadratic in the sequence: twice the keys, twice the bytes a token
    assert eager_attention_bytes_per_token(GPT2_124M, 2048, 0.0) == pytest.approx(
        2 * eager_attention_bytes_per_token(GPT2_124M, 1024, 0.0)
    )


def test_a_model_without_shapes_has_no_score_traffic():
    assert eager_attention_bytes_per_token(ModelShape(params=7e9, active_params=7e9), 4096, 0.0) == 0.0


def _plan(name: str):
    data = unseen.load(unseen.DATA_4)
    row = next(r for r in data["runs"] if r["name"] == name)
    return throughput.checked(row, load_catalog(str(ROOT / "validation" / "hardware.yaml"))).plan


def test_unfused_attention_costs_what_the_published_switch_to_sdpa_saved():
    eager = _plan("rasbt-gpt2-124m-bf16-torch-layers-a100")
    sdpa = _plan("rasbt-gpt2-124m-bf16-sdpa-a100")
    assert eager.time_breakdown_s["eager_attention"] > 0 and "eager_attention" not in sdpa.time_breakdown_s
    published = 91901.0 / 55256.0  # 1.66x
    predicted = sdpa.tokens_per_s / eager.tokens_per_s  # 1.49x
    assert predicted == pytest.approx(published, rel=0.15)
