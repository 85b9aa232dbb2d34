"""How many ways a run's loss splits the vocabulary across tensor-parallel ranks (issue 48).

``memory.activation_bytes`` counts the loss's tensors over the vocabulary, s b V x ``logits_bytes_per_vocab``, and
``memory.allocator_fragmentation_bytes`` the largest of them; each TP rank holds 1 / split of them.
"""

from __future__ import annotations

import numpy as np

from .layout import Layout, RunSettings


def loss_vocab_split(settings: RunSettings, layout: Layout) -> np.ndarray:
    """Per layout, the TP ranks the loss's logits are split over: TP where the loss runs on vocabulary-sharded
    logits (``settings.loss_parallel``: Megatron-Core's vocab-parallel cross-entropy, megatron/core/tensor_parallel/
    cross_entropy.py; torchtitan's loss_parallel, on unless ``parallelism.disable_loss_parallel``: its output head
    ``ColwiseParallel(output_layouts=Shard(-1))`` under ``torch.distributed.tensor.parallel.loss_parallel()``), else
    1: the output head gathers the whole vocabulary on every TP rank and the loss runs there (KempnerForge
    kempnerforge/distributed/tensor_parallel.py @ 01b461a: "Output head: ColwiseParallel (split vocab, gather to
    Replicate for loss)", its scripts/train.py then ``F.cross_entropy(logits.view(-1, logits.size(-1)), ...)``), so
    each rank holds s b V entries of every loss tensor, not s b V / t.

    Published: KempnerForge's Llama 3.1 8B at TP 4 (validation/unseen_families_6.yaml, torch.cuda.max_memory_allocated)
    peaks at 39.4 GiB without FSDP and 27.6 GiB at FSDP 8, 25.7 GiB above its sharded state whatever the FSDP degree
    at 16,384 tokens a micro-batch: whole-vocabulary logits (4.0 GB a bf16 copy) on every rank."""
    tp = np.asarray(layout.tp, float)
    return np.where(np.asarray(settings.loss_parallel, bool), tp, 1.0)
