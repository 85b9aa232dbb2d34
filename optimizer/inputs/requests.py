"""Typed requests: what a caller asks of the API beyond the job itself (docs/design.md section 13).

The CLI and the server build these from flags and request bodies; ``api.check`` takes one instead of a long list
of keyword arguments, so a new layout option is one field here and one line where it is read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckRequest:
    """A hand-picked configuration to judge: the hardware, and whichever layout options the user pinned.

    ``None`` leaves an option to gpuplan, which picks the fastest layout that fits and says what it added.
    """

    sku: str
    gpus: int
    nodes: int | None = None
    tp: int | None = None
    pp: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None
    offload: str | None = None
    shard_degree: int | None = None
    framework: str | None = None
    cp: int | None = None
    ep: int | None = None
    virtual_stages: int | None = None
    expert_tp: int | None = None
    grad_accum: int | None = None
    spot: bool = False
    compare: bool = True  # also solve for the optimum and report the distance to it
