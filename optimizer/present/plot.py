"""Pictures (optional, needs matplotlib: ``pip install 'gpuplan[plot]'``): the portfolio Gantt chart
with pool utilisation, and the solve frontier."""

from __future__ import annotations

from pathlib import Path

from ..errors import ArgumentError
from ..results import MEMORY_SHOWN_MIN_GIB


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        # names are text, never TeX: a job called "a$\frac{1}$b" made mathtext raise, and a pair of "$"
        # would have typeset the name between them as maths
        matplotlib.rcParams["text.parse_math"] = False
        import matplotlib.pyplot as plt
    except ImportError:
        raise ArgumentError("plots need matplotlib: pip install 'gpuplan[plot]'", field="plot") from None
    return plt


def require_plotting() -> None:
    """Fail fast (ArgumentError on 'plot') where matplotlib is not installed."""
    _pyplot()


# Up to this many jobs the Gantt chart has a named row per job; past it, each pool's jobs are packed into
# lanes (a job in the first lane free at its start), unnamed. A row per job made a 1,100 x 174,765-pixel
# PNG of a 5,000-job schedule, in 60 s.
NAMED_ROWS = 60


def pack_lanes(jobs) -> dict[str, list[list[tuple[float, float]]]]:
    """Per pool, its jobs (sorted by start) as lanes of (start_h, hours) bars: each job in the first lane
    whose last job has ended, so a pool has as many lanes as the most of its jobs running at once."""
    lanes: dict[str, list[list[tuple[float, float]]]] = {}
    for j in jobs:
        pool = lanes.setdefault(j.offer, [])
        lane = next((lane for lane in pool if lane[-1][0] + lane[-1][1] <= j.start_h), None)
        if lane is None:
            lane = []
            pool.append(lane)
        lane.append((j.start_h, j.end_h - j.start_h))
    return lanes


def portfolio_plot(result, path: str | Path) -> None:
    """The schedule as a Gantt chart (a row per job, or lanes per pool past ``NAMED_ROWS`` jobs) over
    each pool's utilisation."""
    plt = _pyplot()
    jobs = sorted(result.schedule, key=lambda j: (j.start_h, j.job))
    pools = [p for p in result.pools if p.timeline]
    colors: dict[str, str] = {}
    for j in jobs:
        colors.setdefault(j.offer, f"C{len(colors) % 10}")
    named = len(jobs) <= NAMED_ROWS
    lanes = {} if named else pack_lanes(jobs)
    rows = len(jobs) if named else sum(len(pool) for pool in lanes.values())
    height = 0.35 * rows if named else min(12.0, 2 + 0.08 * rows)  # inches of bars
    ratios = [max(2.0, rows), 3] if named else [2 + height, 3]
    fig, axes = plt.subplots(2, 1, figsize=(11, 5 + height), height_ratios=ratios, sharex=True)
    if named:
        for k, j in enumerate(jobs):
            axes[0].barh(k, j.end_h - j.start_h, left=j.start_h, color=colors[j.offer])
            axes[0].text(j.start_h, k, f" {j.plan.gpus}x {j.plan.sku}", va="center", fontsize=8)
        axes[0].set_yticks(range(len(jobs)), [j.job for j in jobs])
    else:
        ticks, labels, y = [], [], 0
        for offer, pool in lanes.items():
            for k, lane in enumerate(pool):
                axes[0].broken_barh(lane, (y + k - 0.4, 0.8), color=colors[offer])
            ticks.append(y + (len(pool) - 1) / 2)
            labels.append(f"{offer}\n{sum(len(lane) for lane in pool)} jobs")
            y += len(pool)
        axes[0].set_yticks(ticks, labels)
    axes[0].invert_yaxis()
    axes[0].set_title(f"Schedule: {len(jobs)} jobs, ${result.total_cost_usd:,.0f}")
    for p in pools:
        # in use over what the pool has then (a window changes it), at every change of either
        xs = sorted({t for t, _ in p.timeline} | {t for t, _ in p.capacity if t < result.makespan_h})
        ys = [_utilisation(_at(p.timeline, t), _at(p.capacity, t) if p.capacity else p.gpus) for t in xs]
        axes[1].step(xs + [result.makespan_h], ys + ys[-1:], where="post", label=p.offer, color=colors.get(p.offer))
    axes[1].set_ylabel("pool utilisation")
    axes[1].set_xlabel("hours from start")
    axes[1].set_ylim(0, 1.05)
    if pools:
        axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _at(steps: list[tuple[float, int]], t: float) -> int:
    """The value of a step function, given as (hour, value) at each change, at hour ``t`` (0 before)."""
    value = 0
    for at, v in steps:
        if at > t:
            break
        value = v
    return value


def _utilisation(used: int, gpus: int) -> float:
    return used / gpus if gpus else 0.0


def frontier_plot(result, path: str | Path) -> None:
    plt = _pyplot()
    pts = [p for p in result.frontier if p.cost_usd]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot([p.hours.p50 for p in pts], [p.cost_usd.p50 for p in pts], "o-", color="C0", label="frontier")
    for p in pts:
        ax.annotate(
            f"{p.nodes}x{p.gpus_per_node} {p.sku}",
            (p.hours.p50, p.cost_usd.p50),
            fontsize=8,
            xytext=(4, 4),
            textcoords="offset points",
        )
    if result.best and result.best.cost_usd:
        ax.plot([result.best.hours.p50], [result.best.cost_usd.p50], "*", ms=16, color="C3", label="chosen")
    if result.deadline_h:
        ax.axvline(result.deadline_h, color="grey", ls="--", label="deadline")
    if result.budget_usd:
        ax.axhline(result.budget_usd, color="grey", ls=":", label="budget")
    ax.set_xlabel("hours (p50)")
    ax.set_ylabel("cost, USD (p50)")
    ax.set_title("Cost/time frontier")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def memory_plot(plan, path: str | Path) -> None:
    """Stacked memory per GPU against usable capacity."""
    plt = _pyplot()
    m = plan.memory_gib
    parts = ["weights", "gradients", "optimizer", "activations", "optimizer_step", "reserve"]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    left = 0.0
    for k, name in enumerate(parts):
        value = getattr(m, name)
        if name == "optimizer_step" and value <= 0:
            continue  # a fused step's: none
        ax.barh(0, value, left=left, color=f"C{k}", label=f"{name} {value:,.1f} GiB")
        left += value
    ax.axvline(m.capacity, color="black", ls="--", label=f"capacity {m.capacity:,.1f} GiB ({m.basis})")
    ax.set_yticks([])
    ax.set_xlabel("GiB per GPU")
    apart = f" ({m.not_concurrent:,.1f} GiB never held at once)" if m.not_concurrent >= MEMORY_SHOWN_MIN_GIB else ""
    ax.set_title(f"{plan.label()}: {'fits' if plan.fits else 'does not fit'}{apart}")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
