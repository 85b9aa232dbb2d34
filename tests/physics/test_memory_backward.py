"""The gradients a block's backward holds beyond the tensors it saved (physics/memory_terms.py
``backward_gradient_bytes_per_token``), against PyTorch's own live tensors where torch is installed, and how
``memory.activation_bytes`` places them: after the loss's tensors (the larger of the two) where no layer is re-run."""

from __future__ import annotations

import pytest

from optimizer.inputs.files import expand_models, load_catalog
from optimizer.inputs.schema import Problem
from optimizer.physics.layout import Layout, Recompute, RunSettings
from optimizer.physics.memory import activation_bytes, layer_activation_bytes
from optimizer.physics.memory_terms import backward_gradient_bytes_per_token
from optimizer.planning.calibration import job_context

SEQ = 8192
SHAPE = job_context(
    Problem.model_validate(expand_models({"catalog": "default", "job": {"model": "llama-3.1-8b", "tokens": "1B"}})),
    load_catalog("default"),
).shape


def _grads_per_token() -> float:
    return sum(backward_gradient_bytes_per_token(SHAPE))


def test_a_gated_block_holds_its_output_gradient_and_two_thirds_of_its_mlp_width_more():
    h, f = SHAPE.hidden, SHAPE.ffn_active
    assert backward_gradient_bytes_per_token(SHAPE) == (2.0 * h, 4.0 * f)  # 8 KiB + 56 KiB a token for Llama 3.1 8B


def test_without_recompute_the_gradients_follow_the_loss_and_count_where_it_keeps_no_logits():
    kept = SHAPE.layers * float(layer_activation_bytes(SHAPE, SEQ, 1, eager_attention=False))
    fused = RunSettings(seq_len=SEQ, logits_bytes_per_vocab=0.0)  # Liger's fused loss: no logits
    assert float(activation_bytes(SHAPE, fused, Layout(recompute=Recompute.NONE))) == pytest.approx(
        kept + SEQ * _grads_per_token()
    )
    standard = RunSettings(seq_len=SEQ)  # 12 bytes a logit: 1.5 MiB a token, far above the 64 KiB of gradients
    logits = 12.0 * SEQ * SHAPE.vocab
    assert float(activation_bytes(SHAPE, standard, Layout(recompute=Recompute.NONE))) == pytest.approx(kept + logits)


def _mlp_backward_peak_bytes_per_token(gated: bool) -> float:
    """Peak live bytes of a bf16 MLP's backward beyond what its forward left alive, per token, less the first
    weight gradient it writes (the down projection's, made before the peak): PyTorch's own count."""
    torch = pytest.importorskip("torch")
    from live_tensors import LiveBytes

    tokens, hidden, width = 4096, 64, 256
    torch.manual_seed(0)

    def weight(rows: int, cols: int):
        return (torch.randn(rows, cols, dtype=torch.bfloat16) * 0.02).requires_grad_()

    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    up, gate, down = weight(width, hidden), weight(width, hidden), weight(hidden, width)

    def mlp(inputs):
        if gated:  # transformers' LlamaMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x))
            return (torch.nn.functional.silu(inputs @ gate.t()) * (inputs @ up.t())) @ down.t()
        return torch.nn.functional.gelu(inputs @ up.t()) @ down.t()  # fc2(act(fc1(x)))

    mode = LiveBytes()
    with mode:
        out = mlp(x)
        after_forward = mode.live
        out.backward(torch.ones_like(out))
    return (mode.peak - after_forward - hidden * width * 2) / tokens


def test_pytorch_holds_two_h_and_four_f_beyond_a_gated_mlps_saved_tensors():
    h, f = 64, 256
    assert _mlp_backward_peak_bytes_per_token(gated=True) == pytest.approx(2 * h + 4 * f, rel=0.02)


def test_pytorch_holds_two_h_and_two_f_beyond_an_ungated_mlps_saved_tensors():
    h, f = 64, 256
    assert _mlp_backward_peak_bytes_per_token(gated=False) == pytest.approx(2 * h + 2 * f, rel=0.02)
