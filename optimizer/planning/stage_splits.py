"""How frameworks split a model's layers into pipeline stages and partial recompute counts (planning/frameworks.py's
rules read them; the torchtitan export writes its split): pure functions over layer and stage counts."""

from __future__ import annotations

import numpy as np


def layers_per_stage_chunks(layers: int, chunks) -> np.ndarray:
    """Whether torchtitan splits ``layers`` into exactly ``chunks`` pipeline stages (``torchtitan_stage_split``)."""
    return torchtitan_stage_split(layers, chunks)[0]


def torchtitan_stage_split(layers: int, chunks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How torchtitan makes exactly ``chunks`` pipeline stages of ``layers``: (whether it can, its
    pipeline_parallel_layers_per_stage N, the embedding's and the output's weight in layers). N makes
    ceil(E / N) stages, E the layers plus the embedding and the output counted as a layer each
    (first/last_stage_less_layers 1, the defaults; tried first) or not at all (0), and every stage holds at least
    one (torchtitan/distributed/pipeline_parallel.py pipeline_module_split_config and
    generate_llm_fqn_per_model_part, v0.2.2 and b5bcd76c)."""
    c = np.maximum(np.asarray(chunks, np.int64), 1)
    ok, per, weight = (
        np.zeros(np.shape(c), dtype=bool),
        np.zeros(np.shape(c), np.int64),
        np.zeros(np.shape(c), np.int64),
    )
    for extra in (2, 0):
        e = layers + extra
        n = -(-e // c)
        fits = (e >= c) & (-(-e // n) == c) & ~ok
        per, weight, ok = np.where(fits, n, per), np.where(fits, extra // 2, weight), ok | fits
    return ok, per, weight


def recompute_count(kind: str, wanted, layers: float, pp, chunks) -> np.ndarray:
    """The fewest layers per pipeline stage, at least ``wanted``, that a framework's partial recompute
    (``Framework.partial_recompute``) runs: a multiple of the chunks per rank ("block"), floor(L / k) for some k
    ("every_k"); the stage's L layers at most."""
    stage = np.ceil(max(layers, 1) / np.maximum(np.asarray(pp, float), 1.0))
    n = np.minimum(np.maximum(np.asarray(wanted, float), 1.0), stage)
    if kind == "every_k":
        n = np.floor(stage / np.floor(stage / n))
    elif kind == "block":
        step = np.maximum(np.asarray(chunks, float), 1.0)
        n = np.minimum(np.ceil(n / step) * step, stage)
    return n.astype(np.int64)
