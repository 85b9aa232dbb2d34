"""What PyTorch FSDP2 (``fully_shard``) holds at a step's peak beyond the sharded state, term by term (issue 48).

``memory.state_bytes`` counts FSDP2's sharded weights, gradients and optimizer state and one gathered block. A loop
that skips the gradient reduction on every micro-batch but the last (``FSDPModule.set_requires_gradient_sync(False)``)
holds more: each unit's gradient, unsharded, from the micro-batch that made it to the last one's reduce-scatter
(``unsharded_accumulated_grad_bytes``). Sources: pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
(``FSDPParamGroup.post_backward``) and _fsdp_param.py (``FSDPParam.to_accumulated_grad_if_needed``,
``accumulate_unsharded_grad_if_needed``), quoted in each function's docstring.
"""

from __future__ import annotations

import numpy as np

from .constants import FSDP_UNSHARDED_GRAD_BYTES
from .layout import Layout
from .pipeline import heaviest_stage_share
from .shapes import ModelShape, TrainingState

# job.gradient_accumulator for a loop that calls ``set_requires_gradient_sync(False)`` on every micro-batch but the
# last (KempnerForge kempnerforge/training/grad.py ``maybe_no_sync`` @ 01b461a, its scripts/train.py's step loop)
UNSHARDED_ACCUMULATOR = "unsharded"


def skips_gradient_sync(train: TrainingState, layout: Layout) -> np.ndarray:
    """Per layout, whether FSDP2 skips the gradient reduction on every micro-batch but the last: the job's loop says
    so (``train.gradient_accumulator`` "unsharded"), FSDP shards (ZeRO-3 over more than one rank: ``fully_shard``)
    and a step has more than one micro-batch (with one, its only micro-batch is the last and reduces)."""
    zero, shard = np.asarray(layout.zero), np.asarray(layout.shard, float)
    applies = (zero >= 3) & (shard > 1) & (np.asarray(layout.grad_accum, float) > 1)
    return applies & (train.gradient_accumulator == UNSHARDED_ACCUMULATOR)


def unsharded_accumulated_grad_bytes(shape: ModelShape, train: TrainingState, layout: Layout) -> np.ndarray:
    """Per GPU, the unsharded gradients FSDP2 keeps between micro-batches where the loop skips the gradient sync
    (``train.gradient_accumulator`` "unsharded"), at the peak of any micro-batch after the first: every trainable
    parameter of the stage, unsharded, in the reduce dtype (``FSDP_UNSHARDED_GRAD_BYTES``: fp32).

    torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py, ``FSDPParamGroup.post_backward``: ``if not
    self.reduce_grads: if self.reshard_after_backward: self.reshard(); for fsdp_param in self.fsdp_params:
    fsdp_param.to_accumulated_grad_if_needed(); return``: the weights are resharded, the gradient is not reduced;
    _fsdp_param.py ``to_accumulated_grad_if_needed`` moves the unsharded ``.grad`` to ``unsharded_accumulated_grad =
    unsharded_grad.to(self.reduce_dtype)`` when the reduce dtype differs from the parameters' (bf16 compute, fp32
    reduce: KempnerForge's ``default_mp_policy``, ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=float32)``),
    and ``accumulate_unsharded_grad_if_needed`` adds each later micro-batch's into it. Only the last micro-batch's
    ``post_backward`` reduce-scatters them (``unsharded_grads.append(fsdp_param.unsharded_accumulated_grad_data)``)
    and frees them unit by unit, so from the second micro-batch's forward on every unit's fp32 gradient is whole on
    the GPU beside the activations. TP (and PP) still divide it; FSDP does not. None where FSDP shards nothing
    (ZeRO below 3 or one shard: no ``fully_shard``, plain ``.grad`` accumulation) or with one micro-batch a step.

    Published: KempnerForge's mfu_scaling benchmark (validation/unseen_families_6.yaml, family kempnerforge,
    torch.cuda.max_memory_allocated) keeps 25-32 GiB at FSDP 2-8 x TP 4 whatever the FSDP degree: Llama 3.1 8B
    at TP 4, 7.5 GiB of it this term."""
    applies = skips_gradient_sync(train, layout)
    if not np.any(applies):
        return np.zeros(np.shape(applies))
    tp, pp = np.asarray(layout.tp, float), np.asarray(layout.pp, float)
    expert_split = np.asarray(layout.ep, float) * layout.expert_tp
    trainable_share = 0.0 if train.lora else shape.expert_share  # routed experts are not LoRA-adapted
    total = FSDP_UNSHARDED_GRAD_BYTES * train.trainable_params
    stage = heaviest_stage_share(shape, pp, layout.virtual_stages)
    dense = total * (1.0 - trainable_share) * stage / tp
    if not train.lora:  # parameters whole on every TP rank (memory_terms.tp_replicated_state_bytes): (1 - 1/t) more
        dense = dense + FSDP_UNSHARDED_GRAD_BYTES * train.tp_replicated_params * (1.0 - 1.0 / tp)
    experts = total * trainable_share / expert_split / pp
    return np.where(applies, dense + experts, 0.0)


def gradients_at_peak_bytes(grad_bytes, accumulated_bytes, frees_gradients) -> np.ndarray:
    """Per GPU, the gradients alive at the peak given FSDP2's unsharded accumulation (``accumulated_bytes``,
    ``unsharded_accumulated_grad_bytes``) and the sharded gradients ``grad_bytes``. The sharded gradient is made by
    the last micro-batch's reduce-scatter, which frees the unsharded one unit by unit, so where the loop frees the
    gradients after each step (``zero_grad()``, ``set_to_none=True`` by default since PyTorch 2.0: KempnerForge's
    ``optimizer.zero_grad()``) the two never coexist whole; where they persist, the sharded ones add."""
    grads = np.asarray(grad_bytes, float)
    accumulated = np.asarray(accumulated_bytes, float)
    kept = np.where(np.asarray(frees_gradients, bool), 0.0, grads)
    return np.where(accumulated > 0.0, np.maximum(accumulated + kept, grads), grads)
