"""Parameters every TP rank holds whole (job.embedding_parallel false: KempnerForge's token embedding,
physics/memory_terms.py tp_replicated_state_bytes) against the arithmetic of their state: a V x h matrix of bf16
weights, bf16 gradients and two bf16 AdamW moments (pure bf16), split over FSDP's ranks but not over TP."""

from __future__ import annotations

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem

GIB = 2.0**30
EMBEDDING = 128256 * 4096  # Llama 3.1 8B's token embedding


def state_gib(tp: int, gpus: int, embedding_parallel: bool) -> float:
    job = {
        "model": "llama-3.1-8b",
        "tokens": "10M",
        "global_batch": 8,
        "seq_len": 4096,
        "master_weights": False,
        "framework": "torchtitan",
        "embedding_parallel": embedding_parallel,
    }
    layout = {"tp": tp, "pp": 1, "micro_batch": 1, "recompute": "full"}
    if gpus > tp:
        layout["zero"] = 3
    plan = check(
        Problem.model_validate(expand_models({"job": job})), CheckRequest("H100", gpus, compare=False, **layout)
    ).plan
    m = plan.memory_gib
    return m.weights + m.gradients + m.optimizer


@pytest.mark.parametrize(("tp", "gpus"), [(4, 4), (2, 2), (4, 8)])
def test_a_replicated_embedding_keeps_its_whole_state_on_each_tp_rank(tp, gpus):
    fsdp = gpus // tp
    # 2 (weights) + 2 (gradients) + 4 (two bf16 moments) bytes, (1 - 1/t) of the matrix more, over the FSDP ranks
    more = 8.0 * EMBEDDING * (1.0 - 1.0 / tp) / fsdp / GIB
    assert state_gib(tp, gpus, False) - state_gib(tp, gpus, True) == pytest.approx(more, rel=1e-6)


def test_without_tp_nothing_changes():
    assert state_gib(1, 2, False) == pytest.approx(state_gib(1, 2, True))
