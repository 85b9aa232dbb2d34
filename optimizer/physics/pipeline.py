"""The pipeline's schedule, as the memory and time formulas read it: the micro-batch slots a step takes, the
micro-batches a stage holds in flight, and the share of the model on its heaviest stage. Pure functions over
numpy arrays of pipeline degrees p, interleaved chunks per GPU v and micro-batches per step m."""

from __future__ import annotations

import numpy as np

from .shapes import ModelShape


def bubble_slots(pp, virtual_stages) -> np.ndarray:
    """Micro-batch slots a step spends filling and draining the pipeline: 1F1B takes m + (p - 1) slots of one
    micro-batch each, and interleaving v chunks per GPU shrinks the bubble to (p - 1) / v (Narayanan et al. 2021,
    section 2.2)."""
    return (np.asarray(pp, float) - 1.0) / np.asarray(virtual_stages, float)


def in_flight(pp, micro_batches) -> np.ndarray:
    """Micro-batches whose activations the first stage holds at once under 1F1B: min(p, m) (Narayanan et al.
    2021, section 2.2: p in flight in the steady state, all of them when the step has fewer)."""
    return np.minimum(np.asarray(pp, float), np.asarray(micro_batches, float))


def interleaved_in_flight_factor(pp, virtual_stages) -> np.ndarray:
    """The first stage's activations under interleaving over 1F1B's: 1 + (p - 1) / (p v) with v > 1 chunks per GPU
    (Korthikanti et al. 2022, section 4.2.3; Megatron-LM's interleaved-schedule memory penalty), 1 without."""
    pp, v = np.asarray(pp, float), np.asarray(virtual_stages, float)
    return np.where(v > 1, 1.0 + (pp - 1.0) / (pp * v), 1.0)


def heaviest_stage_share(shape: ModelShape, pp, virtual_stages=1.0) -> np.ndarray:
    """Share of the model's parameters outside the routed experts on its heaviest pipeline stage. Where the pp x v
    chunks split the layers evenly (Megatron-Core's default: no layout of its own), the input embedding sits on the
    first stage beside its layers and the LM head on the last, a copy of the embedding there where the two are tied
    (Megatron-Core's GPTModel: pre_process builds the embedding, post_process the output layer, tied weights kept in
    sync across the two), so each end stage holds (P - E) / pp + V h, E the model's embedding parameters. Where they
    do not, the end stages take fewer layers (the Megatron export's first/last stage counts and pipeline layouts,
    with the embedding and the loss as slots of their own: --account-for-embedding/loss-in-pipeline-split), and
    the heaviest stage is the even share. One stage: 1."""
    pp = np.asarray(pp, float)
    dense = shape.params * (1.0 - shape.expert_share)
    if dense <= 0 or not shape.vocab or not shape.hidden or not shape.layers:
        return 1.0 / pp
    blocks = max(dense - shape.embedding_params, 0.0)
    chunks = pp * np.asarray(virtual_stages, float)
    even = np.isclose(np.mod(shape.layers, chunks), 0.0)
    end_stage = (blocks / pp + shape.vocab * shape.hidden) / dense
    return np.where(pp > 1, np.where(even, end_stage, 1.0 / pp), 1.0)
