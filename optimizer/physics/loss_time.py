"""The loss's kernels as HBM traffic: the cross-entropy over the vocabulary's logits, forward and backward (issue 48:
"the loss ... as HBM traffic").

The LM head's matmul is counted with the model's FLOPs; what follows it runs over tokens x vocabulary entries, a
small model's largest tensor (Qwen2.5 0.5B: 151,936 logits a token against a hidden width of 896), in memory-bound
kernels. Bytes each reads and writes per logit, by job.loss:

- ``standard``: PyTorch's cross-entropy over logits upcast to fp32 (transformers' ForCausalLMLoss, torchtitan's
  cross_entropy_loss): ``logits.float()`` (reads 2, writes 4), ``log_softmax`` over a row too long for one block's
  shared memory (aten/src/ATen/native/cuda/SoftMax.cu: a pass for the maximum, one for the sum of exponentials, one
  writing the output: reads 12, writes 4), the nll gather (per token); backward: ``nll_loss_backward`` fills a
  zero gradient (writes 4), ``_log_softmax_backward_data`` reads the gradient twice (its sum, then the output) and
  the saved output once and writes the input's gradient (reads 12, writes 4), the upcast's gradient back to bf16
  (reads 4, writes 2): 48 bytes.
- ``chunked``: torchtune's CEWithChunkedOutputLoss upcasts and runs the same cross-entropy one chunk at a time: the
  same 48 bytes. Megatron-Core's ``--cross-entropy-fusion-impl te``, which its rows state as chunked for its memory,
  is Transformer Engine's fused cross-entropy: the flash figure (``Framework.fused_chunked_loss``).
- ``bf16``: PyTorch's cross-entropy on bf16 logits: ``log_softmax``'s three passes in bf16 (reads 6, writes 2),
  the zero fill (2) and its backward (reads 6, writes 2): 18 bytes.
- ``flash`` (flash-attn's Triton cross-entropy, flash_attn/losses/cross_entropy.py: one pass reading the bf16
  logits for the log-sum-exp, the backward reading them and writing their gradient) and ``fused`` (Liger's fused
  linear cross-entropy, chunk by chunk: its matmul writes a chunk's logits, one kernel reads them and writes their
  gradient in place, which the weight's and input's gradient matmuls read): 6 bytes.

The kernels run at the element-wise HBM efficiency (constants.CAST_HBM_EFFICIENCY) over the tokens a rank holds
(the micro-batch's, split by CP) and the vocabulary entries it holds (split by TP where the loss is
vocabulary-parallel: physics/vocab_split.py), once a micro-batch: no layer recomputes the loss. Under pipeline
parallelism the loss runs on the last stage, spread over the stages as the LM head's FLOPs are (physics/time.py's
busiest stage holds its share of both): the frameworks balance the last stage's layers against its head and loss
(Megatron-Core's account_for_loss_in_pipeline_split, nanotron's split by compute, torchtitan's
last_stage_less_layers).
"""

from __future__ import annotations

import numpy as np

from .constants import CAST_HBM_EFFICIENCY
from .layout import Layout, RunSettings
from .shapes import ModelShape
from .vocab_split import loss_vocab_split

# HBM bytes per token and vocabulary entry the loss's kernels read and write, forward and backward, by job.loss
LOSS_TRAFFIC_BYTES_PER_LOGIT = {"standard": 48.0, "chunked": 48.0, "bf16": 18.0, "flash": 6.0, "fused": 6.0}


def loss_s(shape: ModelShape, hbm_bytes_per_s, layout: Layout, settings: RunSettings) -> np.ndarray:
    """The loss's kernels in one micro-batch on one rank, at the element-wise HBM efficiency."""
    tokens = np.asarray(layout.micro_batch, float) * float(settings.seq_len) / np.asarray(layout.cp, float)
    logits = tokens * shape.vocab / loss_vocab_split(settings, layout)
    traffic = np.asarray(settings.loss_traffic_bytes_per_logit, float)
    return logits * traffic / (np.asarray(hbm_bytes_per_s, float) * CAST_HBM_EFFICIENCY)
