"""PyTorch's cross-entropy on the model's bf16 logits without an fp32 upcast (job.loss bf16: KempnerForge's
scripts/train.py, universal-llm-trainer) against PyTorch itself: the peak of live tensors beyond the inputs, per token
and vocabulary entry, while the logits go through ``F.cross_entropy`` forward and backward, as
tests/validation/test_loss_memory.py counts the upcast one (physics/constants.py LOGITS_BYTES_PER_VOCAB)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from live_tensors import LiveBytes  # noqa: E402

from optimizer.physics.constants import LOGITS_BYTES_PER_VOCAB  # noqa: E402

TOKENS, VOCAB, HIDDEN = 2048, 32768, 64


def peak_bytes_per_vocab_entry(keep_logits: bool) -> float:
    """Peak live bytes beyond the inputs, per token and vocabulary entry, less the LM head's own gradient."""
    torch.manual_seed(0)
    hidden = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    head = (torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16) * 0.02).requires_grad_()
    labels = torch.randint(0, VOCAB, (TOKENS,))
    mode = LiveBytes()
    with mode:
        logits = hidden @ head.t()
        loss = F.cross_entropy(logits, labels)  # no .float(): log_softmax keeps the input's bf16
        if not keep_logits:
            del logits
        loss.backward()
    head_grad = VOCAB * HIDDEN * 2
    return (mode.peak - head_grad) / (TOKENS * VOCAB)


def test_bf16_cross_entropy_peaks_at_six_bytes_per_vocab_entry():
    # log_softmax's bf16 output (saved), nll_loss's bf16 gradient and log_softmax backward's: 2 + 2 + 2
    assert peak_bytes_per_vocab_entry(keep_logits=False) == pytest.approx(LOGITS_BYTES_PER_VOCAB["bf16"], abs=0.1)
    # a loop that keeps the model's logits referenced through backward (KempnerForge's) holds two more
    assert peak_bytes_per_vocab_entry(keep_logits=True) == pytest.approx(LOGITS_BYTES_PER_VOCAB["bf16"] + 2, abs=0.1)
