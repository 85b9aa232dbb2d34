"""Presentation: rich tables and one-line verdicts for the CLI's table format.

Nothing here computes physics or solves anything; it only formats results.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..inputs.catalog import CatalogEntry
from ..inputs.units import fmt_budget, fmt_count, fmt_duration
from ..physics.constants import DEFAULT_COMPUTE_EFFICIENCY, FALLBACK_COMPUTE_EFFICIENCY, GIB
from ..physics.efficiency import REFERENCE_HIDDEN, matmul_efficiency
from ..planning.plans import at_the_edge, headroom_gib, headroom_text
from ..results import MEMORY_SHOWN_MIN_GIB, CapacityResult, CheckResult, OptionsResult, Plan, SolveResult


def usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def _hours(h: float) -> str:
    return fmt_duration(h * 3600.0)


def strategy_text(plan: Plan) -> str:
    """Compact: 'megatron: TP 4, PP 2, DP 8, mb 1x16 (batch 128), full recompute'."""
    s = plan.strategy
    parts = [f"{s.framework}:"]
    if s.tp > 1:
        parts.append(f"TP {s.tp}")
    if s.pp > 1:
        parts.append(f"PP {s.pp}")
    if s.cp > 1:
        parts.append(f"CP {s.cp}")
    if s.ep > 1:
        parts.append(f"EP {s.ep}")
    if s.expert_tp is not None and s.expert_tp != s.tp:
        parts.append(f"expert TP {s.expert_tp}")
    if s.dp > 1:
        if s.zero_stage == 0:
            parts.append(f"DP {s.dp}")
        elif s.shard_degree < s.dp:
            parts.append(f"ZeRO-{s.zero_stage}/{s.shard_degree} hybrid of DP {s.dp}")
        else:
            parts.append(f"ZeRO-{s.zero_stage} DP {s.dp}")
    parts.append(f"mb {s.micro_batch}x{s.grad_accum} (batch {s.global_batch:,})")
    if s.recompute != "none":
        parts.append(s.recompute_text)
    if s.virtual_stages > 1:
        parts.append(f"{s.virtual_stages} chunks/GPU")
    if s.offload != "none":
        parts.append("optimizer offloaded to CPU")
    if s.optimizer_in_backward:
        parts.append("optimizer step in backward")
    if s.activation_offload:
        parts.append("activations offloaded to CPU")
    return parts[0] + " " + ", ".join(parts[1:])


# Wide enough for any table this tool prints; rich pads nothing to it (no table expands, no rules).
PIPED_WIDTH = 100_000


def console() -> Console:
    """Wide enough for the tables when output is piped (rich assumes 80 columns there): no width limit, so
    a line piped to a file or to grep is never wrapped mid-item (a terminal wraps to its own width).

    Markup and emoji codes are off: job, offer and SKU names come from user files, and a name such as
    ``[/bold]`` or ``:x:`` must print as written, not restyle the table or crash it. Styles are given as
    ``Text``/``style=`` arguments instead."""
    probe = Console()
    return Console(highlight=False, markup=False, emoji=False, width=None if probe.is_terminal else PIPED_WIDTH)


def memory_bar(used: float, capacity: float, width: int = 40, headroom: float = 0.0) -> Text:
    """The memory used against the capacity; with a ``headroom`` (GiB) a ``|`` where the headroom begins."""
    share = used / capacity if capacity else 0.0
    filled = min(width, int(round(share * width)))
    over = share > 1 or used > capacity - headroom
    style = "red" if over else ("yellow" if share > 0.9 else "green")
    cells = ["█"] * filled + ["░"] * (width - filled)
    line = min(width - 1, int(round((capacity - headroom) / capacity * width))) if capacity and headroom > 0 else -1
    if line >= 0:
        cells[max(line, 0)] = "|"
    bar = Text("[")
    for i, cell in enumerate(cells):
        bar.append(cell, style=style if i < filled else None)
    bar.append(f"] {share:.0%}")
    if headroom > 0:
        bar.append(f", memory headroom {headroom:,.1f} GiB from the |")
    return bar


# the memory table's rows that are not the field's name
_MEMORY_LABELS = {"optimizer_step": "optimizer step", "not_concurrent": "not held at once"}


def _memory_table(plan: Plan) -> Table:
    m = plan.memory_gib
    table = Table(title="Memory per GPU", title_justify="left")
    table.add_column("part")
    table.add_column("GiB", justify="right")
    table.add_column("GB", justify="right")
    parts = ("weights", "gradients", "optimizer", "activations", "optimizer_step", "not_concurrent", "reserve")
    for name in (*parts, "total", "capacity"):
        value = -m.not_concurrent if name == "not_concurrent" else getattr(m, name)
        if name in ("optimizer_step", "not_concurrent") and abs(value) < MEMORY_SHOWN_MIN_GIB:
            continue  # the step's temporaries and what is never allocated at once, where there are any
        style = "bold" if name in ("total", "capacity") else None
        label = _MEMORY_LABELS.get(name, name)
        label = f"capacity ({m.basis})" if name == "capacity" else label
        table.add_row(label, f"{value:,.1f}", f"{value * GIB / 1e9:,.1f}", style=style)
    return table


def _spare_text(plan: Plan, headroom: str | float | None) -> str:
    """What a plan leaves free per GPU, against the headroom it must keep: 'headroom 3.2 GiB (3.4 GB)' or
    'short by ...', and with a headroom to keep, how it stands against it; 'at the edge' when little is left."""
    m = plan.memory_gib
    spare, keep = m.capacity - m.total, headroom_gib(headroom, m.capacity)
    amount = f"{abs(spare):,.1f} GiB ({abs(spare) * GIB / 1e9:,.1f} GB)"
    if keep <= 0:
        text = f"headroom {amount}" if spare >= 0 else f"short by {amount}"
    elif spare < 0:
        text = f"short by {amount} plus the {keep:,.1f} GiB memory headroom ({headroom_text(headroom)})"
    else:
        left = spare - keep
        text = f"{amount} free, " + (
            f"{keep:,.1f} GiB of it the memory headroom ({headroom_text(headroom)})"
            if left >= 0
            else f"{-left:,.1f} GiB short of the {keep:,.1f} GiB memory headroom ({headroom_text(headroom)})"
        )
    return text + (", at the edge" if at_the_edge(plan, headroom) else "")


def print_check(result: CheckResult, console: Console, headroom: str | float | None = None) -> None:
    """A check's answer; ``headroom`` the job's constraints.memory_headroom (None: the default)."""
    p = result.plan
    m = p.memory_gib
    head = "FITS" if p.fits else "DOES NOT FIT"
    verdict = Text(f"{head}: ", style="bold green" if p.fits else "bold red")
    verdict.append(f"{p.label()}, {strategy_text(p)}: {m.total:,.1f} of {m.capacity:,.1f} GiB per GPU, ")
    verdict.append(_spare_text(p, headroom))
    if p.host_capacity_gib is not None and p.host_memory_gib > p.host_capacity_gib:
        verdict.append(
            f"; the offloaded optimizer state needs {p.host_memory_gib:,.1f} GiB of CPU memory per host, above its "
            f"{p.host_capacity_gib:,.1f} GiB (assumptions.host_memory_per_node)"
        )
    if result.added:
        verdict.append(f"; {result.added}")
    console.print(verdict)
    if not result.runnable:
        console.print(Text("NOT RUNNABLE: " + "; ".join(result.not_runnable_because), style="bold red"), markup=False)
    console.print(memory_bar(m.total, m.capacity, headroom=headroom_gib(headroom, m.capacity)))
    console.print(_memory_table(p))
    perf = Table(title="Time and cost", title_justify="left", show_header=False)
    perf.add_column("what")
    perf.add_column("value", justify="right")
    perf.add_row("throughput", f"{p.tokens_per_s:,.0f} tokens/s")
    perf.add_row("MFU", f"{p.mfu:.1%}")
    perf.add_row("scaling efficiency", f"{p.scaling_efficiency:.1%}")
    perf.add_row("bound by", p.bound)
    perf.add_row("time p50 / p90", f"{_hours(p.hours.p50)} / {_hours(p.hours.p90)}")
    perf.add_row("GPU-hours", f"{p.gpu_hours:,.1f}")
    perf.add_row("price", usd(p.price_usd_per_gpu_hour) + " per GPU-hour")
    perf.add_row("cost p50 / p90", "n/a" if p.cost_usd is None else f"{usd(p.cost_usd.p50)} / {usd(p.cost_usd.p90)}")
    if p.meets_deadline is not None:
        perf.add_row("meets deadline", "yes" if p.meets_deadline else "NO")
    if p.within_budget is not None:
        perf.add_row("within budget", "yes" if p.within_budget else "NO")
    console.print(perf)
    if result.chosen:
        console.print("Chosen for you: " + "; ".join(result.chosen))
    for note in result.notes:
        console.print(f"Note: {note}", style="dim")
    if result.vs_measured:
        console.print(Text("Compared " + result.vs_measured.summary, style="bold"))
    if p.spread_source:
        console.print(f"p90 spread from: {p.spread_source}", style="dim")
    if result.optimum is not None:
        o = result.optimum
        line = f"Best plan under the same constraints: {o.label()}, {strategy_text(o)}: {usd(o.cost_usd.p50 if o.cost_usd else None)}, {_hours(o.hours.p50)}"
        console.print(line)
        if result.extra_cost_vs_optimum_usd is not None:
            extra = result.extra_cost_vs_optimum_usd
            console.print(
                f"This configuration costs {usd(abs(extra))} {'more' if extra > 0 else 'less'} than that plan."
                if abs(extra) >= 0.01
                else "This configuration is as cheap as the best plan."
            )
        if result.dominated_by:
            console.print(
                "Dominated by: "
                + "; ".join(
                    f"{d.label()} {usd(d.cost_p50_usd)} {_hours(d.hours.p50)} ({_dominance(d, result.plan)})"
                    for d in result.dominated_by
                )
            )


def _dominance(other: Plan, mine: Plan) -> str:
    """'faster and cheaper' only when both hold; 'as cheap and faster' or 'as fast and cheaper' otherwise."""
    faster = other.hours.p50 < mine.hours.p50
    cheaper = other.cost_p50_usd < mine.cost_p50_usd
    if faster and cheaper:
        return "faster and cheaper"
    return "as cheap and faster" if faster else "as fast and cheaper"


def headline(result: SolveResult) -> str:
    if result.best is None and result.status == "unknown":
        return "The solver stopped before it found a plan or proved there is none (raise --time-limit)."
    if result.best is None:
        # the binding constraints in the headline, which --quiet prints alone
        binding = list(dict.fromkeys(i.constraint for i in result.infeasible))
        verb = "binds" if len(binding) == 1 else "bind"
        return "No plan satisfies every constraint" + (f" ({', '.join(binding)} {verb})." if binding else ".")
    b = result.best
    goal = "Cheapest plan" if result.objective == "cost" else "Fastest plan"
    if result.passed_over is not None:  # a near-tie went to the faster plan: not the cheapest by a hair
        cheapest = result.passed_over
        extra = (result.best.cost_usd.p50 if result.best.cost_usd else 0.0) - (
            cheapest.cost_usd.p50 if cheapest.cost_usd else 0.0
        )
        faster = cheapest.hours.p50 / result.best.hours.p50
        goal = f"Best plan ({usd(extra)} above the cheapest, {faster:.2g}x faster)"
    limits = []
    if result.deadline_h is not None:
        limits.append(f"finishing within {_hours(result.deadline_h)}")
    if result.budget_usd is not None:
        limits.append(f"within {fmt_budget(result.budget_usd)}")
    cost = usd(b.cost_usd.p50) if b.cost_usd else "n/a"
    return (
        f"{goal}{' ' + ' and '.join(limits) if limits else ''}: {b.label()}, {strategy_text(b)}: "
        f"{cost}, {_hours(b.hours.p50)} (p90 {_hours(b.hours.p90)})"
    )


def _plan_row(p: Plan) -> list[str]:
    return [
        p.label(),
        strategy_text(p),
        _hours(p.hours.p50),
        usd(p.cost_usd.p50 if p.cost_usd else None),
        f"{p.tokens_per_s:,.0f}",
        f"{p.mfu:.0%}",
        p.bound,
    ]


def frontier_chart(result: SolveResult, width: int = 60, height: int = 12) -> str | None:
    """Hours (x) against cost (y) as text; '*' frontier, '@' chosen, '|' deadline."""
    pts = [(p.hours.p50, p.cost_usd.p50) for p in result.frontier if p.cost_usd]
    if len(pts) < 2:
        return None
    # the chosen plan on the axes too: a frontier the time limit cut short need not reach it
    best = [(result.best.hours.p50, result.best.cost_usd.p50)] if result.best and result.best.cost_usd else []
    xs, ys = [x for x, _ in pts + best], [y for _, y in pts + best]
    deadline = [result.deadline_h] if result.deadline_h else []  # on the axis even left of every plan
    x0, x1 = min(xs + deadline), max(xs + deadline)
    y0, y1 = min(ys), max(ys)
    if x1 <= x0 or y1 <= y0:
        return None
    grid = [[" "] * width for _ in range(height)]

    def cell(x, y):
        return (
            min(width - 1, int((x - x0) / (x1 - x0) * (width - 1))),
            height - 1 - min(height - 1, int((y - y0) / (y1 - y0) * (height - 1))),
        )

    if result.deadline_h:
        cx, _ = cell(result.deadline_h, y0)
        for row in grid:
            row[cx] = "|"
    for x, y in pts:
        cx, cy = cell(x, y)
        grid[cy][cx] = "*"
    if result.best and result.best.cost_usd:
        cx, cy = cell(result.best.hours.p50, result.best.cost_usd.p50)
        grid[cy][cx] = "@"
    lines = [f"{usd(y1):>12} ┤" + "".join(grid[0])]
    lines += [" " * 13 + "│" + "".join(r) for r in grid[1:-1]]
    lines.append(f"{usd(y0):>12} ┤" + "".join(grid[-1]))
    lines.append(" " * 13 + "└" + "─" * width)
    lines.append(" " * 14 + f"{_hours(x0)}".ljust(width - 12) + f"{_hours(x1)}")
    lines.append(" " * 14 + "* frontier   @ chosen" + ("   | deadline" if result.deadline_h else ""))
    return "\n".join(lines)


def _kept(plan: Plan, headroom: str | float | None) -> str:
    """' (+ 8.4 GiB headroom, at the edge)' beside a plan's memory: the headroom it keeps, and 'at the edge'."""
    keep = headroom_gib(headroom, plan.memory_gib.capacity)
    parts = ([f"+ {keep:,.1f} GiB headroom"] if keep > 0 else []) + (
        ["at the edge"] if at_the_edge(plan, headroom) else []
    )
    return f" ({', '.join(parts)})" if parts else ""


def print_solve(result: SolveResult, console: Console, headroom: str | float | None = None) -> None:
    """A solve's answer; ``headroom`` the job's constraints.memory_headroom (None: the default)."""
    console.print(Text(headline(result), style="bold"))
    if result.status == "feasible":
        console.print(f"(time limit hit: best found, gap {result.gap:.2%} to the bound)")
    for item in result.infeasible:
        console.print(Text(f"Infeasible ({item.constraint}): {item.detail}", style="red"))
    if result.best is not None:
        b = result.best
        console.print(
            f"  memory {b.memory_gib.total:,.1f} of {b.memory_gib.capacity:,.1f} GiB per GPU{_kept(b, headroom)}; "
            f"{b.tokens_per_s:,.0f} tokens/s, MFU {b.mfu:.0%}, scaling {b.scaling_efficiency:.0%}, {b.bound}-bound; "
            f"{b.gpu_hours:,.0f} GPU-hours"
        )
    if result.frontier:
        table = Table(title="Cost/time frontier (fastest first; each next plan strictly cheaper)", title_justify="left")
        for col in ("plan", "strategy", "time", "cost", "tokens/s", "MFU", "bound"):
            table.add_column(col, justify="right" if col in ("time", "cost", "tokens/s", "MFU") else "left")
        for p in result.frontier:
            row = _plan_row(p)
            marks = []
            if p.same_layout(result.best):
                marks.append("chosen")
            if p.meets_deadline is False:
                marks.append("late")
            if p.within_budget is False:
                marks.append("over budget")
            row[0] += f" [{', '.join(marks)}]" if marks else ""
            table.add_row(*row)
        console.print(table)
        chart = frontier_chart(result)
        if chart:
            console.print(chart, highlight=False)
    if result.runners_up:
        table = Table(title="Runners-up: best plan per other GPU and why it lost", title_justify="left")
        for col in ("plan", "time", "cost", "lost on", "wins below $/GPU-h", "wins above efficiency"):
            table.add_column(col)
        for r in result.runners_up:
            does_not_fit = r.lost_on == "memory"  # no time or cost for a plan that cannot run
            m = r.memory_gib
            table.add_row(
                r.label(),
                "-" if does_not_fit else _hours(r.hours.p50),
                "-" if does_not_fit else usd(r.cost_usd.p50 if r.cost_usd else None),
                f"memory: needs {m.total:,.1f} of {m.capacity:,.1f} GiB" if does_not_fit else r.lost_on,
                usd(r.breakeven_price_usd_per_gpu_hour) if r.breakeven_price_usd_per_gpu_hour else "-",
                f"{r.breakeven_scaling_efficiency:.1%}" if r.breakeven_scaling_efficiency else "-",
            )
        console.print(table)
    for note in result.notes:
        console.print(f"Note: {note}", style="dim")
    console.print(f"{result.candidates} hardware candidates, solved in {result.solve_s:.2f} s", style="dim")


def options_headline(result: OptionsResult) -> str:
    """The options' one line: how many, how many feasible, and what rejected the rest."""
    rejected: dict[str, int] = {}
    for o in result.options:
        if not o.feasible:
            rejected[str(o.rejected_by)] = rejected.get(str(o.rejected_by), 0) + 1
    feasible = len(result.options) - sum(rejected.values())
    why = ", ".join(f"{reason} {count}" for reason, count in sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{len(result.options)} hardware options, {feasible} feasible" + (f"; rejected by {why}" if why else "")


def print_options(result: OptionsResult, console: Console, headroom: str | float | None = None) -> None:
    """Every hardware row's best layout; ``headroom`` the job's constraints.memory_headroom (None: the default)."""
    console.print(options_headline(result))
    table = Table(title="Every hardware option with its best strategy", title_justify="left")
    for col in ("plan", "strategy", "GiB/GPU", "time", "cost", "status"):
        table.add_column(col)
    for o in result.options:
        status = "ok" if o.feasible else f"rejected: {o.rejected_by}"
        table.add_row(
            o.label(),
            strategy_text(o),
            f"{o.memory_gib.total:,.0f}/{o.memory_gib.capacity:,.0f}",
            _hours(o.hours.p50) if o.fits else "-",  # no time or cost for a layout that cannot run
            usd(o.cost_usd.p50 if o.cost_usd else None) if o.fits else "-",
            status,
            style=None if o.feasible else "dim",
        )
    console.print(table)
    for note in result.notes:
        console.print(f"Note: {note}", style="dim")


def catalog_rows(entries: list[CatalogEntry]) -> list[dict]:
    """A catalog listing as rows of plain values (the table and the JSON share them)."""
    rows = []
    for entry in entries:
        sku, offer, cap = entry.sku, entry.offer, entry.memory_bytes
        rows.append(
            {
                "sku": sku.name,
                "offer": offer.name if offer else None,
                "provider": offer.provider if offer else None,
                "memory_gb": round(cap / 1e9, 1),
                "memory_gib": round(cap / GIB, 1),
                "memory_reported_gib": round(sku.memory_reported_bytes / GIB, 2) if sku.memory_reported_bytes else None,
                "usable_gib": round(entry.usable_bytes / GIB, 1),
                "spot_price_usd_per_gpu_hour": offer.spot_price_usd_per_gpu_hour if offer else None,
                "dense_bf16_tflops": sku.dense_bf16_tflops,
                "dense_fp8_tflops": sku.dense_fp8_tflops,
                "hbm_bandwidth_gb_per_s": sku.hbm_bandwidth_gb_per_s,
                "intra_node_bandwidth_gb_per_s": sku.intra_node_bandwidth_gb_per_s,
                "interconnect": sku.interconnect,
                "network_gb_per_s_per_gpu": sku.network_gb_per_s_per_gpu,
                "gpus_per_node": offer.gpus_per_node if offer else sku.gpus_per_node,
                "max_nodes": offer.max_nodes if offer else None,
                "price_usd_per_gpu_hour": offer.price_usd_per_gpu_hour if offer else None,
                "price_checked": str(offer.checked) if offer and offer.checked else None,
                "illustrative": offer.illustrative if offer else None,
                "efficiency_bf16": _efficiency(sku, "bf16"),
                "efficiency_fp8": _efficiency(sku, "fp8") if sku.dense_fp8_tflops else None,
            }
        )
    return rows


def _efficiency(sku, precision: str) -> float:
    """The matmul efficiency gpuplan assumes at hidden 8,192: the catalog row's, fitted, or the default."""
    if sku.default_mfu:
        return sku.default_mfu
    fitted = matmul_efficiency(sku.architecture, sku.form_factor, precision, REFERENCE_HIDDEN)
    return (
        fitted if fitted is not None else DEFAULT_COMPUTE_EFFICIENCY.get(sku.form_factor, FALLBACK_COMPUTE_EFFICIENCY)
    )


def check_data(result: CheckResult) -> dict:
    """A check as JSON: the plan's keys at the top level, beside the verdict's own."""
    return {**result.plan.model_dump(mode="json"), **result.model_dump(mode="json", exclude={"plan"})}


# A catalog listing's name columns are as wide as the longest name, up to this.
NAME_WIDTH_MAX = 40


def catalog_headline(name: str, rows: list[dict]) -> str:
    """A catalog listing in one line: how many GPU types and offers, and the range of prices."""
    skus = len({r["sku"] for r in rows})
    prices = [r["price_usd_per_gpu_hour"] for r in rows if r["price_usd_per_gpu_hour"] is not None]
    priced = ""
    if prices:
        low, high = min(prices), max(prices)
        priced = f", ${low:.2f}" + (f"-${high:.2f}" if high > low else "") + " per GPU-hour"
    offers = sum(1 for r in rows if r["offer"])
    return (
        f"Catalog {name}: {skus} GPU type{'s' if skus != 1 else ''}, {offers} offer{'s' if offers != 1 else ''}{priced}"
    )


def print_catalog(name: str, rows: list[dict], console: Console) -> None:
    table = Table(title=f"Catalog {name}", title_justify="left")
    for col in (
        "SKU",
        "offer",
        "memory GB",
        "GiB",
        "usable GiB",
        "BF16 TFLOPS",
        "HBM GB/s",
        "intra-node GB/s",
        "net GB/s/GPU",
        "matmul eff. bf16/fp8",
        "$/GPU-h (spot)",
    ):
        if col in ("SKU", "offer"):  # names whole (they are what --sku takes): the numbers' headers wrap instead
            longest = max((len(r["sku" if col == "SKU" else "offer"] or "-") for r in rows), default=1)
            table.add_column(col, justify="left", no_wrap=True, min_width=min(longest, NAME_WIDTH_MAX))
        else:
            table.add_column(col, justify="right")
    for r in rows:
        price = (
            "-"
            if r["price_usd_per_gpu_hour"] is None
            else f"${r['price_usd_per_gpu_hour']:.3f}" + ("*" if r["illustrative"] else "")
        )
        table.add_row(
            r["sku"],
            r["offer"] or "-",
            f"{r['memory_gb']:,.0f}",
            f"{r['memory_gib']:,.1f}",
            f"{r['usable_gib']:,.1f}",
            f"{r['dense_bf16_tflops']:,.0f}",
            f"{r['hbm_bandwidth_gb_per_s']:,.0f}",
            f"{r['intra_node_bandwidth_gb_per_s']:,.0f}",
            "-" if r["network_gb_per_s_per_gpu"] is None else f"{r['network_gb_per_s_per_gpu']:g}",
            f"{r['efficiency_bf16']:.2f}/" + ("-" if r["efficiency_fp8"] is None else f"{r['efficiency_fp8']:.2f}"),
            price + ("" if r["spot_price_usd_per_gpu_hour"] is None else f" (${r['spot_price_usd_per_gpu_hour']:.3f})"),
        )
    console.print(table)
    if any(r["illustrative"] for r in rows):
        console.print("* illustrative public price: check the provider before you rent", style="dim")
    console.print(
        "usable GiB: what plans count on per GPU (the offer's delivered memory, else the device's reported, else "
        "the label), and what --min-memory filters on",
        style="dim",
    )


def print_capacity(result: CapacityResult, console: Console) -> None:
    console.print(
        f"{result.gpus} x {result.sku} ({result.memory_per_gpu_gb:,.1f} GB = {result.memory_per_gpu_gib:,.1f} GiB each, "
        f"{result.memory_basis}), {result.method}, ZeRO-{result.zero_stage}, {result.bytes_per_param:g} bytes/param, "
        f"reserve {result.reserve_gb:,.1f} GB per GPU: up to {fmt_count(result.max_params)} parameters"
        + (
            f" ({result.max_layers} layers of this model, activations included: the job itself "
            f"{'fits' if result.job_fits else 'does not fit'})"
            if result.includes_activations
            else " (training state only: give a job file to include activations"
            + (", and the embeddings and LM head QLoRA keeps in 16 bits" if result.method == "qlora" else "")
            + ", as check does)"
        )
    )


def gantt(result, width: int = 60) -> str:
    """Text Gantt: one row per scheduled job over the horizon, '█' while it runs."""
    horizon = max(result.horizon_h, result.makespan_h, 1e-9)
    name_w = max((len(j.job) for j in result.schedule), default=4)
    lines = []
    for j in sorted(result.schedule, key=lambda j: (j.start_h, j.job)):
        a = int(j.start_h / horizon * width)
        b = max(a + 1, int(round(j.end_h / horizon * width)))
        lines.append(f"{j.job:<{name_w}} │{' ' * a}{'█' * (b - a)}{' ' * (width - b)}│ {j.plan.gpus:>3} {j.plan.sku}")
    lines.append(f"{'':<{name_w}} └{'─' * width}┘")
    lines.append(f"{'':<{name_w}}  0 h{' ' * (width - 10)}{horizon:,.0f} h")
    return "\n".join(lines)


def print_portfolio(result, console: Console) -> None:
    head = {
        "optimal": "Optimal schedule",
        "feasible": f"Feasible schedule (gap {result.gap:.2%} to the bound)",
        "infeasible": "No schedule satisfies every constraint",
        "unknown": "No complete schedule found" if result.schedule else "No schedule found",
    }[result.status]
    console.print(
        Text(
            f"{head}: {len(result.schedule)} job{'' if len(result.schedule) == 1 else 's'}"
            f"{' placed' if result.status == 'unknown' else ''}, "
            f"total {usd(result.total_cost_usd)}"
            + (f" of {fmt_budget(result.budget_usd)}" if result.budget_usd else "")
            + (f", all done by {result.makespan_h:,.0f} h" if result.schedule else ""),
            style="bold",
        )
    )
    for item in result.infeasible:
        # a stopped search proves nothing: its entry must not read as a proof
        label = "Stopped by the time limit" if item.constraint == "time_limit" else f"Infeasible ({item.constraint})"
        console.print(Text(f"{label}: {item.detail}", style="red"))
    if result.schedule:
        table = Table(title="Schedule", title_justify="left")
        for col in ("job", "plan", "strategy", "start", "end", "cost", "late"):
            table.add_column(col)
        for j in sorted(result.schedule, key=lambda j: (j.start_h, j.job)):
            table.add_row(
                j.job,
                j.plan.label(),
                strategy_text(j.plan),
                j.start_date or f"{j.start_h:,.0f} h",
                j.end_date or f"{j.end_h:,.0f} h",
                usd(j.cost_usd),
                f"{j.late_h:,.0f} h" if j.late_h else "",
            )
        console.print(table)
        console.print(gantt(result), highlight=False)
    if result.pools:
        table = Table(title="GPU pools", title_justify="left")
        for col in ("pool", "GPUs", "peak used"):
            table.add_column(col)
        for p in result.pools:
            least = min((g for _, g in p.capacity), default=p.gpus)
            table.add_row(p.offer, str(p.gpus) if least == p.gpus else f"{least}-{p.gpus}", str(p.peak_used))
        console.print(table)
    for d in result.dropped:
        console.print(f"Dropped {d.job}: {d.reason}")
    if result.bound_usd is not None:
        how = {"cp_sat": "CP-SAT", "lp_lns": "greedy + LP relaxation + neighbourhood search", "greedy": "greedy"}
        console.print(
            f"Bound {usd(result.bound_usd)} ({result.bound_source.replace('_', ' ')}), gap {result.gap:.2%}; "
            f"schedule by {how.get(result.method, result.method)}",
            style="dim",
        )
    for note in result.notes:
        console.print(f"Note: {note}", style="dim")
    console.print(f"solved in {result.solve_s:.2f} s", style="dim")
