"""DeepSpeed's ZeRO terms of the memory per GPU: its estimators' model states (``memory.state_bytes`` counts them) and
when its ZeRO-1/2 optimizer (deepspeed/runtime/zero/stage_1_and_2.py) holds its gradient partitions over a step.

Pure functions over floats or numpy arrays, as ``physics/memory.py``, which calls them.
"""

from __future__ import annotations

import numpy as np

from .layout import Layout
from .memory_terms import deepspeed_held_block_params
from .shapes import ModelShape, TrainingState

# DeepSpeed's estimators (deepspeedai/DeepSpeed@edaa7221267243c7be7fb49c5d5f5c4fb97b4641), per trainable
# parameter, sharded over the ZeRO group, with mixed-precision Adam: deepspeed/runtime/zero/stage_1_and_2.py
# estimate_zero2_model_states_mem_needs, 2 N + 18 N / G ("18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit +
# 8_optimizer_states_32bit"), and stage3.py estimate_zero3_model_states_mem_needs, 4 x largest layer + 18 N / G.
# Against the ZeRO paper's 16 (2 + 2 + 12), ZeRO-2 adds the 4-byte fp32 gradient partition the optimizer steps
# on, ZeRO-3 2 bytes (stage3.py initialize_optimizer_states: one fp32 gradient buffer of the largest sub-group).
# Per byte of 16-bit gradient, so a stated bytes_per_param scales them too.
DEEPSPEED_FP32_GRAD_BYTES_PER_GRAD_BYTE = {2: 2.0, 3: 1.0}


def deepspeed_fp32_grad_bytes(train: TrainingState, zero) -> np.ndarray:
    """Bytes per trainable parameter, unsharded, of DeepSpeed's fp32 gradient partition (4 ZeRO-2, 2 ZeRO-3)."""
    per_grad_byte = np.where(np.asarray(zero) >= 3, DEEPSPEED_FP32_GRAD_BYTES_PER_GRAD_BYTE[3], 0.0)
    per_grad_byte = np.where(np.asarray(zero) == 2, DEEPSPEED_FP32_GRAD_BYTES_PER_GRAD_BYTE[2], per_grad_byte)
    return per_grad_byte * train.grad_bytes


def deepspeed_gathered_params(shape: ModelShape, tp, expert_split) -> np.ndarray:
    """Parameters of the largest single module, DeepSpeed's "largest layer" (stage3.py model_to_params: the most
    parameters any module holds itself, ``m.parameters(recurse=False)``): the embedding or LM head (V x h), else an
    attention or MLP projection, or one MoE layer's routed experts, which Hugging Face transformers holds as one
    module of 3-D tensors (MixtralExperts: gate_up_proj and down_proj). Split by TP (the experts by EP x ETP)."""
    experts = shape.expert_params / shape.moe_layers if shape.moe_layers > 0 else 0.0
    return np.maximum(shape.largest_tensor_params / np.asarray(tp, float), experts / np.asarray(expert_split, float))


def deepspeed_held_block_bytes(shape: ModelShape, train: TrainingState, layout: Layout) -> np.ndarray:
    """Per GPU under DeepSpeed ZeRO-3, the stored bytes of the block kept gathered through its backward beyond the
    largest module DeepSpeed's estimator counts (``memory_terms.deepspeed_held_block_params``): memory of the run,
    not of the model states the estimators give, so ``state_bytes`` leaves it out."""
    tp = np.asarray(layout.tp, float)
    expert_split = np.asarray(layout.ep, float) * layout.expert_tp
    share = shape.expert_share
    block = shape.layer_params * ((1.0 - share) / tp + share / expert_split)
    held = deepspeed_held_block_params(block, deepspeed_gathered_params(shape, tp, expert_split))
    return np.where(np.asarray(layout.zero) >= 3, train.weight_bytes * held, 0.0)


# The bf16 flat copy ZeRO-2's step makes of its 16-bit gradient partition on the way to the fp32 one, per byte of
# that fp32 partition (2 bytes of bf16 per 4 of fp32): deepspeedai/DeepSpeed @ v0.14.2
# deepspeed/runtime/zero/stage_1_and_2.py L1880-1886, ``single_grad_partition = self.flatten(self.averaged_gradients
# [i]).to(self.single_partition_of_fp32_groups[i].dtype)``: ``flatten`` (torch's _flatten_dense_tensors, a cat) writes
# a new 16-bit tensor of the partition, which lives until ``.to`` has written the fp32 one.
DEEPSPEED_STEP_FLAT_COPY_PER_FP32_BYTE = 0.5


def deepspeed_step_fp32_grad_bytes(grad_bytes, estimator_free_grad_bytes, layout: Layout, deepspeed) -> np.ndarray:
    """Per GPU, the part of DeepSpeed ZeRO-2's gradients (``grad_bytes``, ``memory.state_bytes`` with ``deepspeed``)
    that exists only inside the optimizer step: its fp32 gradient partition, ``grad_bytes`` less the same layout's
    gradients without DeepSpeed's fp32 partition (``estimator_free_grad_bytes``, ``state_bytes`` without
    ``deepspeed``); 0 off ZeRO-2, off DeepSpeed and under optimizer offload (no gradient on the GPU then).

    deepspeedai/DeepSpeed @ v0.14.2 (5f631abc) deepspeed/runtime/zero/stage_1_and_2.py, ``step``: the fp32 partition is made from
    the 16-bit one there (L1880-1886 ``single_grad_partition = self.flatten(self.averaged_gradients[i]).to(...)``),
    handed to the optimizer (L1891 ``self.single_partition_of_fp32_groups[i].grad = single_grad_partition``) and
    freed as soon as it has stepped (L1904-1906 "Step 4:- get rid of the fp32 gradients. Not needed anymore",
    ``...grad = None``, ``del single_grad_partition``). So it is a temporary of the step, never allocated while a
    micro-batch's activations are: the estimators' 4 bytes a parameter (``DEEPSPEED_FP32_GRAD_BYTES_PER_GRAD_BYTE``)
    are the step's peak, not the forward's. ZeRO-3 (stage3.py) keeps its fp32 gradient buffer for the run: left as
    it is."""
    zero2 = np.asarray(deepspeed, bool) & (np.asarray(layout.zero) == 2) & (np.asarray(layout.offload) <= 0)
    fp32 = np.asarray(grad_bytes, float) - np.asarray(estimator_free_grad_bytes, float)
    return np.where(zero2, np.maximum(fp32, 0.0), 0.0)


def deepspeed_step_temporary_bytes(step_fp32_grad_bytes) -> np.ndarray:
    """Per GPU, what ZeRO-2's step allocates beside its 16-bit gradient partition: the fp32 partition
    (``deepspeed_step_fp32_grad_bytes``) and, while that is written, the 16-bit flat copy it is cast from
    (``DEEPSPEED_STEP_FLAT_COPY_PER_FP32_BYTE``)."""
    return np.asarray(step_fp32_grad_bytes, float) * (1.0 + DEEPSPEED_STEP_FLAT_COPY_PER_FP32_BYTE)


def deepspeed_frees_gradients(layout: Layout, deepspeed, frees_gradients) -> np.ndarray:
    """Per layout, whether the loop leaves no gradient allocated between steps (``memory_terms.gradients_freed``,
    ``not_concurrent_bytes``): the framework's loop (``frees_gradients``), or DeepSpeed's ZeRO-2 optimizer itself.

    deepspeedai/DeepSpeed @ v0.14.2 deepspeed/runtime/zero/stage_1_and_2.py: the 16-bit gradient partition is
    allocated in backward, at the first reduced bucket (L1335-1345 ``if self.grads_in_partition is None: ...
    self.grads_in_partition = torch.empty(int(total_size), ...)``); the end of each backward drops the buffer's own
    reference, keeping the partition's views in ``averaged_gradients`` (L752-794 ``independent_gradient_partition_
    epilogue``: ``self._release_ipg_buffers()``, L665-669 ``self.grads_in_partition = None``), and the step drops
    those once the fp32 copy is made (L1893-1895 ``self.free_grad_in_param_list(self.params_in_partition[i])``,
    ``self.averaged_gradients[i] = None``). A forward after a step finds none; under accumulation (grad_accum > 1)
    the partition lives over the later micro-batches, which ``gradients_freed`` already keeps."""
    zero2 = np.asarray(deepspeed, bool) & (np.asarray(layout.zero) == 2)
    return np.asarray(frees_gradients, bool) | zero2
