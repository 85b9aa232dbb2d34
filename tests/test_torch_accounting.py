"""gpuplan's activation and FLOP formulas against PyTorch's own accounting (issue 12).

Each bundled dense preset is built from its config with ``transformers`` (random weights) at depths 1
and 2 and run forward + backward in bf16 under ``FakeTensorMode`` at its full widths; see
``tests/torch_accounting.py``. Per layer = depth 2 minus depth 1. Needs torch and transformers
(skipped without them).
"""

from __future__ import annotations

import functools

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
_NEEDS_SHAPE_FIELD = {
    # per-head q_norm / k_norm in fp32 keep 6q + 6k + 4 (heads + kv heads) more bytes per token: -13 to -15 %
    "qwen3": "Qwen3's q/k RMSNorm (6q + 6k bytes per token) is not in ModelShape",
    # four RMSNorms per layer (sandwich), fp32 (1 + w): 36h instead of 16h bytes per token: -27 %
    "gemma2": "Gemma 2's four sandwich RMSNorms (36h bytes per token) are not in ModelShape",
}


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
