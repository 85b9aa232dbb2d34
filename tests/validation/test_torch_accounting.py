"""gpuplan's activation and FLOP formulas against PyTorch's own accounting (issue 12).

Each bundled dense preset is built from its config with ``transformers`` (random weights) at depths 1
and 2 and run forward + backward in bf16 under ``FakeTensorMode`` at its full widths; see
``tests/torch_accounting.py``. Per layer = depth 2 minus depth 1. MoE presets route on the data, so they
run for real at reduced width (their architecture, expert count and top-k scaled down). Needs torch and
transformers (skipped without them).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch_accounting import hf_config, measure  # noqa: E402

from optimizer.inputs.hf_models import model_fields, presets  # noqa: E402
from optimizer.inputs.schema import JobSpec, ModelSpec  # noqa: E402
from optimizer.physics.layout import Layout, Recompute, RunSettings  # noqa: E402
from optimizer.physics.memory import activation_bytes, layer_activation_bytes  # noqa: E402
from optimizer.physics.time import flops_per_token  # noqa: E402
from optimizer.planning.model_state import model_shape, training_state  # noqa: E402

SEQ = 4096
TOLERANCE = 0.10
DENSE = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "mistral-7b"]
# Per-layer activations that need a shape gpuplan's ModelShape does not carry yet (measured vs predicted, s 4096):
_NEEDS_SHAPE_FIELD: dict[str, str] = {}


def _preset_config(name: str) -> dict:
    return presets()[name]["config"]


@functools.cache
def _measured(name: str, layers: int, recompute: bool):
    return measure(hf_config(_preset_config(name), layers), SEQ, recompute, fake=True)


def _shape(name: str, layers: int | None = None):
    cfg = dict(_preset_config(name))
    if layers is not None:
        cfg["num_hidden_layers"] = layers
    spec = ModelSpec(**model_fields(cfg, name))
    shape = model_shape(spec)
    return shape, training_state(JobSpec(model=spec, tokens=1e9), shape)


def _per_layer(name: str, recompute: bool, attr: str) -> float:
    return getattr(_measured(name, 2, recompute), attr) - getattr(_measured(name, 1, recompute), attr)


def _dense_params(memory: bool):
    params = []
    for name in DENSE + ["gemma-2-9b"]:
        reason = _NEEDS_SHAPE_FIELD.get(_preset_config(name)["model_type"]) if memory else None
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", _dense_params(memory=True))
def test_activation_bytes_per_layer_without_recompute(name):
    measured = _per_layer(name, False, "saved_bytes")
    predicted = float(layer_activation_bytes(_shape(name, 2)[0], SEQ, 1, eager_attention=False))
    assert predicted == pytest.approx(measured, rel=TOLERANCE)
    # activation_bytes adds the same per layer (1 layer more, everything else equal)
    settings, layout = RunSettings(seq_len=SEQ), Layout(recompute=Recompute.NONE)
    added = float(activation_bytes(_shape(name, 2)[0], settings, layout)) - float(
        activation_bytes(_shape(name, 1)[0], settings, layout)
    )
    assert added == pytest.approx(predicted)


@pytest.mark.parametrize("name", _dense_params(memory=False))
def test_full_recompute_keeps_the_layer_input(name):
    measured = _per_layer(name, True, "saved_bytes")
    settings, layout = RunSettings(seq_len=SEQ), Layout(recompute=Recompute.FULL)
    predicted = float(activation_bytes(_shape(name, 2)[0], settings, layout)) - float(
        activation_bytes(_shape(name, 1)[0], settings, layout)
    )
    assert predicted == pytest.approx(measured, rel=TOLERANCE)


@pytest.mark.parametrize("name", _dense_params(memory=False))
def test_flops_per_token_per_layer_and_whole_model(name):
    per_layer = _per_layer(name, False, "flops") / SEQ
    (model_2, _), (model_1, _) = (flops_per_token(*_shape(name, n), SEQ) for n in (2, 1))
    assert float(model_2 - model_1) == pytest.approx(per_layer, rel=TOLERANCE)
    # The whole model at its real depth: the layers are identical, so FLOPs are affine in the depth.
    layers = _preset_config(name)["num_hidden_layers"]
    whole = _measured(name, 1, False).flops / SEQ + (layers - 1) * per_layer
    shape, train = _shape(name)
    assert float(flops_per_token(shape, train, SEQ)[0]) == pytest.approx(whole, rel=TOLERANCE)


# --------------------------------------------------------------------------- MoE presets at reduced width

MOE_SEQ = 256
# Widths scaled down so a real forward + backward runs on a CPU in a second; the architecture (norms, router,
# grouped-GEMM experts, attention) is the preset's. 16 experts, top-4.
_MOE_WIDTHS = {
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_experts_per_tok": 4,
    "vocab_size": 1024,
}
MOE = {
    "qwen3-30b-a3b": {**_MOE_WIDTHS, "moe_intermediate_size": 96, "intermediate_size": 384, "num_experts": 16},
    "qwen3-235b-a22b": {**_MOE_WIDTHS, "moe_intermediate_size": 96, "intermediate_size": 384, "num_experts": 16},
    "gpt-oss-20b": {**_MOE_WIDTHS, "intermediate_size": 96, "num_local_experts": 16},
    "gpt-oss-120b": {**_MOE_WIDTHS, "intermediate_size": 96, "num_local_experts": 16},
    "mixtral-8x7b": {**_MOE_WIDTHS, "intermediate_size": 96, "num_local_experts": 16},
    "deepseek-v3": {
        **_MOE_WIDTHS,
        "num_key_value_heads": 4,
        "head_dim": 16,  # DeepseekV3Config's head_dim is the rope part (qk_rope_head_dim)
        "q_lora_rank": 96,
        "kv_lora_rank": 64,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        # v as wide as q and k (32 + 16): PyTorch's CPU flash kernel takes only equal head dims (otherwise
        # the math path keeps the fp32 softmax, which no GPU kernel does)
        "v_head_dim": 48,
        "moe_intermediate_size": 96,
        "intermediate_size": 384,
        "n_routed_experts": 16,
        "first_k_dense_replace": 0,
        "n_group": 1,
        "topk_group": 1,
    },
}
_MOE_NEEDS_SHAPE_FIELD: dict[str, str] = {}


@functools.cache
def _moe_measured(name: str, layers: int, recompute: bool):
    return measure(hf_config(_preset_config(name), layers, **MOE[name]), MOE_SEQ, recompute, fake=False)


def _moe_shape(name: str, layers: int):
    cfg = {**_preset_config(name), **MOE[name], "num_hidden_layers": layers}
    spec = ModelSpec(**model_fields(cfg, name))
    shape = model_shape(spec)
    return shape, training_state(JobSpec(model=spec, tokens=1e9), shape)


def _moe_params(memory: bool):
    params = []
    for name in MOE:
        for recompute in (Recompute.NONE, Recompute.FULL):
            # Full recompute keeps only each layer's input, which no architecture detail changes.
            reason = _MOE_NEEDS_SHAPE_FIELD.get(name) if memory and recompute == Recompute.NONE else None
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            params.append(pytest.param(name, recompute, marks=marks, id=f"{name}-{recompute.label}"))
    return params


@pytest.mark.parametrize(("name", "recompute"), _moe_params(memory=True))
def test_moe_activation_bytes_per_layer(name, recompute):
    # Qwen3-30B-A3B's MoE layer keeps, per token, the dense count with f = top-k x expert width, Qwen3's q/k
    # norms, and the dispatch: each token's hidden state once per routed expert plus the experts' outputs
    # (4hk), the router's fp32 logits (4E) and int64 routing indices.
    full = recompute == Recompute.FULL
    measured = _moe_measured(name, 2, full).saved_bytes - _moe_measured(name, 1, full).saved_bytes
    settings, layout = RunSettings(seq_len=MOE_SEQ), Layout(recompute=recompute)
    predicted = float(activation_bytes(_moe_shape(name, 2)[0], settings, layout)) - float(
        activation_bytes(_moe_shape(name, 1)[0], settings, layout)
    )
    assert predicted == pytest.approx(measured, rel=TOLERANCE)


@pytest.mark.parametrize(("name", "recompute"), _moe_params(memory=False))
def test_moe_flops_per_token_per_layer(name, recompute):
    # FLOPs follow the active parameters: 6 x (attention + router + top-k experts) + 12 h s per layer, and
    # full recompute one more forward. FlopCounterMode counts the experts' grouped GEMM (aten._grouped_mm).
    full = recompute == Recompute.FULL
    measured = (_moe_measured(name, 2, full).flops - _moe_measured(name, 1, full).flops) / MOE_SEQ
    rc = np.array([recompute])
    hw_2, hw_1 = (flops_per_token(*_moe_shape(name, n), MOE_SEQ, rc)[1] for n in (2, 1))
    assert float(hw_2[0] - hw_1[0]) == pytest.approx(measured, rel=TOLERANCE)
