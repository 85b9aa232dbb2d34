"""Measured configurations as anchors: each predicts its own measurement, and the rows between and beyond
them lean on the nearest (issue 46; docs/design.md section 8).

``calibration`` fits one factor per bound (compute efficiency, HBM bandwidth, link efficiency) over all
measurements: that carries a measurement to GPUs never measured, by the ratio of their peaks. Where two
measurements disagree with the physics in different directions (8 B200 at 4,444 tokens/s and 8 B300 at 6,667,
where the physics calls the two cards equal) one shared factor reproduces neither, and the answer picked
the card the measurements say is slower. So each measurement also keeps what the shared fit still misses at
its configuration, as an anchor, and every row takes a correction from the anchors it is nearest to:

- the same GPU: the anchor at its GPU count exactly (and node count, where several share the count); between
  two measured counts, interpolated in log GPUs (log speed for throughput, bytes for memory); beyond the
  measured counts, the nearest one's;
- else the same architecture (a B300 leans on a measured B200): the same, over that architecture's anchors;
- else none: the shared factors alone (memory: the mean of the measured deltas, a framework's own reserve).

At a measured configuration the prediction is then the measurement (tokens/s, and the peak where given),
whatever else was measured; a third measurement never moves the first two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Anchor:
    """One measured configuration and what the shared calibration still misses there."""

    sku: str
    architecture: str
    gpus: int
    nodes: int
    speed: float  # measured tokens/s over the shared calibration's prediction (1: the shared fit hits it)
    reserve_delta_bytes: float | None  # measured peak minus predicted (None: no peak measured)


@dataclass(frozen=True)
class Leaning:
    """Which anchors a row's correction comes from, in the answer's words."""

    anchors: tuple[Anchor, ...]
    basis: str  # "measured", "same GPU", "same architecture"

    def describe(self, gpus: int) -> str:
        a = self.anchors
        measured = " and ".join(f"{x.gpus} x {x.sku}" for x in a)
        if self.basis == "measured":
            return f"measured on this configuration ({measured})"
        counts = sorted({x.gpus for x in a})
        if gpus < counts[0] or gpus > counts[-1]:
            nearest = min(counts, key=lambda n: abs(math.log(gpus / n)))
            how = f"extrapolated from {nearest} to {gpus} GPUs ({max(gpus, nearest) / min(gpus, nearest):.3g}x)"
        elif len(counts) > 1:
            how = f"interpolated between {counts[0]} and {counts[-1]} GPUs"
        else:
            how = f"at the measured {counts[0]} GPUs"
        kind = "" if self.basis == "same GPU" else f", the {a[0].architecture} architecture's"
        return f"leans on the measurement of {measured}{kind}, {how}"


def _interpolate(points: list[tuple[int, float]], gpus: int) -> float:
    """A value at ``gpus`` from (gpus, value) points: exact at a point (the mean of equal counts), linear in
    log GPUs between two, the nearest one's beyond them."""
    by_count: dict[int, list[float]] = {}
    for n, v in points:
        by_count.setdefault(n, []).append(v)
    counts = sorted(by_count)
    value = {n: sum(vs) / len(vs) for n, vs in by_count.items()}
    if gpus <= counts[0]:
        return value[counts[0]]
    if gpus >= counts[-1]:
        return value[counts[-1]]
    hi = next(n for n in counts if n >= gpus)
    lo = max(n for n in counts if n <= gpus)
    if lo == hi:
        return value[lo]
    t = math.log(gpus / lo) / math.log(hi / lo)
    return value[lo] + t * (value[hi] - value[lo])


def leaning(anchors: tuple[Anchor, ...], sku: str, architecture: str, gpus: int, nodes: int) -> Leaning | None:
    """The anchors a row (``sku`` on ``gpus`` GPUs over ``nodes`` nodes) takes its correction from, or None."""
    exact = tuple(a for a in anchors if (a.sku, a.gpus, a.nodes) == (sku, gpus, nodes))
    if exact:
        return Leaning(exact, "measured")
    same = tuple(a for a in anchors if a.sku == sku)
    if same:
        return Leaning(same, "same GPU")
    kin = tuple(a for a in anchors if a.architecture and a.architecture == architecture)
    return Leaning(kin, "same architecture") if kin else None


def speed_factor(anchors: tuple[Anchor, ...], sku: str, architecture: str, gpus: int, nodes: int) -> float:
    """The throughput correction of a row: the measured over the shared prediction at the anchors it leans
    on, interpolated in log speed (1 where it leans on none)."""
    lean = leaning(anchors, sku, architecture, gpus, nodes)
    if lean is None:
        return 1.0
    return math.exp(_interpolate([(a.gpus, math.log(a.speed)) for a in lean.anchors], gpus))


def reserve_delta(
    anchors: tuple[Anchor, ...], shared_bytes: float, sku: str, architecture: str, gpus: int, nodes: int
) -> float:
    """The framework reserve's correction of a row: the measured peaks' deltas it leans on, interpolated;
    ``shared_bytes`` (the mean of all measured deltas) where it leans on no measured peak."""
    with_peak = tuple(a for a in anchors if a.reserve_delta_bytes is not None)
    lean = leaning(with_peak, sku, architecture, gpus, nodes)
    if lean is None:
        return shared_bytes
    return _interpolate([(a.gpus, float(a.reserve_delta_bytes or 0.0)) for a in lean.anchors], gpus)
