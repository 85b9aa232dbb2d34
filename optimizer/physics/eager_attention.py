"""Unfused ("eager") attention's element-wise kernels: the HBM traffic of the materialised score matrix (issue 48).

FlashAttention keeps the s x s scores of each head in on-chip memory; the eager path (transformers'
``eager_attention_forward``, job.attention eager: models or stacks without SDPA/FlashAttention, GPT-2 with
dropout, Gemma 2's soft-capped scores) writes them to HBM and runs each step over them as a kernel of its own.
The two batched matmuls (q k^T and the probabilities times v) are counted with the attention FLOPs
(physics/time.py); what this module adds is the element-wise kernels between them, per query, key and head, in
the bytes each reads and writes (16-bit scores, the softmax in fp32 as transformers runs it:
``nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)``), huggingface/transformers
src/transformers/models/llama/modeling_llama.py ``eager_attention_forward`` (v4.48 on):

- forward: ``* scaling`` reads and writes the scores (2 + 2), ``+ causal_mask`` reads them and the mask and
  writes them (2 + 2 + 2), the softmax reads 16-bit and writes fp32 (2 + 4), ``.to(query.dtype)`` reads fp32 and
  writes 16-bit (4 + 2): 22 bytes;
- backward (autograd, in reverse): the cast's gradient to fp32 (2 + 4), the softmax's backward reads its saved
  fp32 output and the gradient and writes a 16-bit input gradient (4 + 4 + 2), the mask's add passes the
  gradient through, the scaling's reads and writes it (2 + 2): 20 bytes;
- a recomputed layer runs the forward again.

Dropout on the probabilities (``attention_dropout``, 0 in Llama-family configs) is not counted. The kernels run
at the element-wise HBM efficiency (constants.CAST_HBM_EFFICIENCY). The published size of the effect: switching
GPT-2 124M's hand-written attention to PyTorch's fused SDPA ran 66 % more tokens a second on one A100
(rasbt/LLMs-from-scratch ch05/10, validation/unseen_families_4.yaml).
"""

from __future__ import annotations

import numpy as np

from .constants import CAST_HBM_EFFICIENCY
from .layout import Layout
from .shapes import ModelShape

EAGER_SCORE_BYTES_FORWARD = 22.0  # per score (query x key x head): the module's forward list
EAGER_SCORE_BYTES_BACKWARD = 20.0  # per score: the module's backward list


def eager_attention_bytes_per_token(shape: ModelShape, seq_len: float, recomputed_share) -> np.ndarray:
    """HBM bytes of the eager attention's element-wise kernels per token (a query) over all layers, forward,
    backward and the recomputed share's second forward: every query meets all ``seq_len`` keys (the causal and
    sliding-window masks are added to the full score matrix, not skipped) in every head. 0 without the model's
    shapes."""
    if not shape.has_shapes or shape.heads <= 0:
        return np.zeros_like(np.asarray(recomputed_share, float))
    per_score = EAGER_SCORE_BYTES_FORWARD * (1.0 + np.asarray(recomputed_share, float)) + EAGER_SCORE_BYTES_BACKWARD
    return shape.layers * shape.heads * float(seq_len) * per_score


def eager_attention_s(shape: ModelShape, hbm_bytes_per_s, layout: Layout, seq_len: float, stage_share) -> np.ndarray:
    """The score kernels of one micro-batch on one rank of the slowest stage (``stage_share`` of the layers), at the
    element-wise HBM efficiency: its queries, split by TP's heads and CP's chunks, x ``eager_attention_bytes_per_token``."""
    tokens = np.asarray(layout.micro_batch, float) * seq_len * stage_share / np.asarray(layout.tp * layout.cp, float)
    score_bytes = eager_attention_bytes_per_token(shape, seq_len, layout.recomputed_share(shape.layers))
    return tokens * score_bytes / (np.asarray(hbm_bytes_per_s, float) * CAST_HBM_EFFICIENCY)
