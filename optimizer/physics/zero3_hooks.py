"""DeepSpeed ZeRO-3's per-module parameter fetches: host time a micro-batch waits for (issue 48).

DeepSpeed ZeRO-3 partitions every parameter and gathers a module's parameters in a hook before the module runs
(forward, the recomputed forward, backward) and releases them after: Python work on the host per module with
partitioned parameters, which the GPU waits for once a module's own kernels are short. DeepSpeed measured it on
a dense model (``ZERO3_MODULE_FETCH_S``, physics/constants.py: bing_bert's forward 270 ms under ZeRO-3 against
60 ms under ZeRO-2, 0.41 ms a module); it is why ZeRO-3 runs slowest at small micro-batches. PyTorch FSDP
gathers one flat parameter per wrapped block (a decoder layer), not per module: it has no such term.

A module's parameters are fetched unless they are below the persistence threshold (``stage3_param_persistence_
threshold``: parameters smaller than it stay whole on every rank), which the Hugging Face integration sets to
``ZERO3_PERSISTENCE_PER_HIDDEN`` x hidden: norms persist, every linear of a block is fetched, and so is each of
LoRA's A and B matrices (PEFT makes them modules of their own) when r x width reaches the threshold.
"""

from __future__ import annotations

import numpy as np

from .constants import ZERO3_MODULE_FETCH_S, ZERO3_PERSISTENCE_PER_HIDDEN
from .layout import Layout
from .shapes import ModelShape, TrainingState

# Linears of a block as transformers' decoders have them unless the model fuses some (ModelShape.linear_modules):
# q, k, v, o; gate, up, down (fc1, fc2 ungated). An MoE layer has its router (an h x E linear) in place of the
# MLP; its routed experts are physics/moe.py's.
ATTENTION_LINEARS = 4.0
ROUTER_LINEARS = 1.0


def block_linears(shape: ModelShape) -> float:
    """Linear modules of a dense block: the model's own count, else the unfused 7 (6 ungated)."""
    return shape.linear_modules or ATTENTION_LINEARS + (3.0 if shape.gated_mlp else 2.0)


def _adapted_linears(shape: ModelShape, targets: str) -> float:
    """LoRA's adapted linears per block by target set (physics/adapters.py's targets)."""
    return {"qkv": 1.0, "attention": ATTENTION_LINEARS, "all_linear": block_linears(shape)}.get(targets, 0.0)


def fetched_modules_per_layer(shape: ModelShape, train: TrainingState) -> float:
    """Modules of one block whose parameters ZeRO-3 fetches in each pass (module docstring)."""
    if not shape.has_shapes or shape.layers <= 0:
        return 0.0
    modules = ATTENTION_LINEARS + ROUTER_LINEARS if shape.experts else block_linears(shape)
    adapted = _adapted_linears(shape, train.lora_targets) if train.lora else 0.0
    if adapted > 0:
        # each adapter matrix holds r x width parameters: the trainable ones split evenly over them
        per_matrix = train.trainable_params / (shape.layers * adapted * 2.0)
        if per_matrix >= ZERO3_PERSISTENCE_PER_HIDDEN * shape.hidden:
            modules += 2.0 * adapted
    return modules


def module_fetch_s(shape: ModelShape, train: TrainingState, layout: Layout, stage_layers, fetch) -> np.ndarray:
    """Host time of a micro-batch's ZeRO-3 fetches where ``fetch`` (per layout: DeepSpeed at ZeRO-3): every
    fetched module of the stage's layers, plus the embedding and (untied) LM head, in forward, backward and the
    recomputed forward, ``ZERO3_MODULE_FETCH_S`` each."""
    layers = np.asarray(stage_layers, float)
    if not np.any(fetch):
        return np.zeros(np.shape(layers))
    passes = 2.0 + layout.recomputed_share(shape.layers)
    ends = 1.0 if shape.tied_embeddings else 2.0
    modules = layers * fetched_modules_per_layer(shape, train) + ends
    return np.where(fetch, passes * modules * ZERO3_MODULE_FETCH_S, 0.0)
