"""Typed requests: what a caller asks of the API beyond the job itself (docs/design.md section 13).

The CLI and the server build these from flags and request bodies; ``api.check`` takes one instead of a long list
of keyword arguments. ``CheckRequest``'s layout fields are the dimensions declared in inputs/layout_fields.py, by
the same names (tests/cli/test_layout_vocabulary.py holds them equal): a new one is a declaration there and a field
here, which the faces fill by name.
"""

from __future__ import annotations

from dataclasses import dataclass

# A plan's offer on its spot price is named "<offer> (spot)" (``Plan.offer``); a request naming it so asks for that
# offer's spot price (``CheckRequest``).
SPOT_SUFFIX = " (spot)"


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

    def __post_init__(self) -> None:
        # a plan's offer as printed ("nodus-b200 (spot)"), fed back: that offer at its spot price
        if self.sku.endswith(SPOT_SUFFIX):
            object.__setattr__(self, "sku", self.sku.removesuffix(SPOT_SUFFIX).strip())
            object.__setattr__(self, "spot", True)
