"""Which of a framework's rules one plan's layout breaks (``why_not_runnable``): the rules are
``frameworks.FRAMEWORKS``' (docs/design.md section 3.5); check names them, and the exports refuse a layout their
framework does not run."""

from __future__ import annotations

import numpy as np

from ..inputs.schema import Strategy
from ..physics.layout import Offload, Recompute
from .frameworks import EXCHANGE_CODES, FRAMEWORKS, METHOD_CODES, OPTIMIZER_CODES, PRECISION_CODES


def why_not_runnable(
    framework: str,
    strategy: Strategy,
    layers: int,
    method: str = "full",
    optimizer: str = "adamw",
    seq_len: int | None = None,
    precision: str = "bf16",
    context_parallel: str = "ring",
) -> list[str]:
    """The rules of ``framework`` that a plan's layout (for a job of ``method``, ``optimizer``, ``precision`` and
    ``seq_len``, where given) breaks (empty when it runs)."""
    s = strategy
    layout = {
        "tp": s.tp,
        "pp": s.pp,
        "dp": s.dp,
        "zero": s.zero_stage,
        "shard": s.shard_degree,
        "cp": s.cp,
        "ep": s.ep,
        "etp": s.expert_tp or 0,
        "virtual_stages": s.virtual_stages,
        "offload": int(Offload.from_label(s.offload)),
        "recompute": int(Recompute.from_label(s.recompute)),
        "recompute_layers": s.recompute_layers or 0,
        "optimizer_in_backward": int(s.optimizer_in_backward),
        "activation_offload": int(s.activation_offload),
        "method": METHOD_CODES[method],
        "optimizer": OPTIMIZER_CODES[optimizer],
        "precision": PRECISION_CODES[precision],
        "context_parallel": EXCHANGE_CODES[context_parallel],
        "grad_accum": s.grad_accum,
        **({"seq_len": seq_len} if seq_len else {}),
    }
    grid = {k: np.array([v]) for k, v in layout.items()}
    return [rule for rule, broken in FRAMEWORKS[framework].violations(grid, layers).items() if bool(broken[0])]
