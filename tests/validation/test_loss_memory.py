"""The loss's memory per token and vocabulary entry (physics/constants.py LOGITS_BYTES_PER_VOCAB) against PyTorch
itself: the peak of live tensors while bf16 logits go through PyTorch's cross-entropy, forward and backward, as
torchtitan's ``cross_entropy_loss`` and transformers' ``ForCausalLMLoss`` run it (the logits upcast to fp32). The
peak is at the loss's backward, while every layer's activations are still held, so it adds to them whole."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from live_tensors import LiveBytes  # noqa: E402

from optimizer.physics.constants import LOGITS_BYTES_PER_VOCAB  # noqa: E402

TOKENS, VOCAB, HIDDEN = 2048, 32768, 64


def peak_bytes_per_vocab_entry(keep_logits: bool, upcast: bool = True) -> float:
    """Peak live bytes beyond the inputs, per token and vocabulary entry, less the LM head's own gradient; ``upcast``
    False runs the cross-entropy on the bf16 logits as they are (KempnerForge's scripts/train.py, universal-llm-trainer:
    job.loss bf16)."""
    torch.manual_seed(0)
    hidden = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    head = (torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16) * 0.02).requires_grad_()
    labels = torch.randint(0, VOCAB, (TOKENS,))
    mode = LiveBytes()
    with mode:
        logits = hidden @ head.t()
        loss = F.cross_entropy(logits.float() if upcast else logits, labels)
        if not keep_logits:
            del logits  # torchtitan's train step drops its reference before backward
        loss.backward()
    head_grad = VOCAB * HIDDEN * 2
    return (mode.peak - head_grad) / (TOKENS * VOCAB)


def test_standard_cross_entropy_peaks_at_twelve_bytes_per_vocab_entry():
    # log_softmax's fp32 output (saved), nll_loss's fp32 gradient and log_softmax backward's: 4 + 4 + 4
    assert peak_bytes_per_vocab_entry(keep_logits=False) == pytest.approx(LOGITS_BYTES_PER_VOCAB["standard"], abs=0.1)
    # with the bf16 logits still referenced (a model output kept through backward) two more
    assert peak_bytes_per_vocab_entry(keep_logits=True) == pytest.approx(
        LOGITS_BYTES_PER_VOCAB["standard"] + 2, abs=0.1
    )


def test_bf16_cross_entropy_peaks_at_six_bytes_per_vocab_entry():
    # no .float(): log_softmax's bf16 output (saved), nll_loss's bf16 gradient and log_softmax backward's: 2 + 2 + 2
    assert peak_bytes_per_vocab_entry(keep_logits=False, upcast=False) == pytest.approx(
        LOGITS_BYTES_PER_VOCAB["bf16"], abs=0.1
    )
    # a loop that keeps the model's logits referenced through backward (KempnerForge's) holds two more
    assert peak_bytes_per_vocab_entry(keep_logits=True, upcast=False) == pytest.approx(
        LOGITS_BYTES_PER_VOCAB["bf16"] + 2, abs=0.1
    )
