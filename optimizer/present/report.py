"""A self-contained HTML report of a solve: the answer, the frontier chart, the memory breakdown and
the options table. Inline SVG drawn here, no scripts, no network, no plotting library."""

from __future__ import annotations

import html

from ..results import MEMORY_SHOWN_MIN_GIB, OptionsResult, Plan, SolveResult
from .render import headline, strategy_text, usd

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2433}
h1{font-size:1.4rem;margin-bottom:.2rem} h2{font-size:1.1rem;margin-top:2rem}
.answer{background:#eef6ee;border-left:4px solid #2f8f46;padding:.8rem 1rem;font-size:1.05rem}
.bad{background:#fbeeee;border-left-color:#b33}
table{border-collapse:collapse;width:100%;font-size:.85rem} th,td{padding:.3rem .5rem;border-bottom:1px solid #e3e6ec;text-align:left}
th{background:#f5f6f8} td.num{text-align:right;font-variant-numeric:tabular-nums} tr.rejected{color:#8a8f99}
.muted{color:#6b7280;font-size:.85rem} svg text{font-family:inherit}
"""


def frontier_svg(result: SolveResult, width: int = 760, height: int = 360) -> str:
    pts = [p for p in result.frontier if p.cost_usd]
    if not pts:
        return "<p class='muted'>No frontier to draw.</p>"
    left, right, top, bottom = 80, 20, 20, 50
    xs = [p.hours.p50 for p in pts] + ([result.deadline_h] if result.deadline_h else [])
    ys = [p.cost_p50_usd for p in pts] + ([result.budget_usd] if result.budget_usd else [])
    x0, x1 = 0.0, max(xs) * 1.08
    y0, y1 = min(ys) * 0.9, max(ys) * 1.08

    def sx(x):
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def sy(y):
        return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
        f"aria-label='cost/time frontier'>",
        f"<line x1='{left}' y1='{height - bottom}' x2='{width - right}' y2='{height - bottom}' stroke='#333'/>",
        f"<line x1='{left}' y1='{top}' x2='{left}' y2='{height - bottom}' stroke='#333'/>",
    ]
    for k in range(5):
        xv, yv = x0 + (x1 - x0) * k / 4, y0 + (y1 - y0) * k / 4
        parts.append(
            f"<text x='{sx(xv):.0f}' y='{height - bottom + 18}' font-size='11' text-anchor='middle'>{xv:,.0f} h</text>"
        )
        parts.append(f"<text x='{left - 6}' y='{sy(yv) + 4:.0f}' font-size='11' text-anchor='end'>${yv:,.0f}</text>")
    parts.append(
        f"<text x='{(left + width) / 2:.0f}' y='{height - 8}' font-size='12' text-anchor='middle'>hours (p50)</text>"
    )
    if result.deadline_h:
        parts.append(
            f"<line x1='{sx(result.deadline_h):.1f}' y1='{top}' x2='{sx(result.deadline_h):.1f}' y2='{height - bottom}' "
            "stroke='#b33' stroke-dasharray='5,4'/><text x='{:.0f}' y='{}' font-size='11' fill='#b33'>deadline</text>".format(
                sx(result.deadline_h) + 4, top + 12
            )
        )
    if result.budget_usd:
        parts.append(
            f"<line x1='{left}' y1='{sy(result.budget_usd):.1f}' x2='{width - right}' y2='{sy(result.budget_usd):.1f}' "
            "stroke='#b36b00' stroke-dasharray='2,3'/>"
        )
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{sx(p.hours.p50):.1f},{sy(p.cost_p50_usd):.1f}" for i, p in enumerate(pts)
    )
    parts.append(f"<path d='{path}' fill='none' stroke='#3566b0' stroke-width='2'/>")
    best = result.best
    for p in pts:
        chosen = p.same_layout(best)
        parts.append(
            f"<circle cx='{sx(p.hours.p50):.1f}' cy='{sy(p.cost_p50_usd):.1f}' r='{7 if chosen else 4}' "
            f"fill='{'#2f8f46' if chosen else '#3566b0'}'><title>{html.escape(p.label())}: "
            f"{usd(p.cost_p50_usd)}, {p.hours.p50:,.1f} h</title></circle>"
        )
        parts.append(
            f"<text x='{sx(p.hours.p50) + 8:.1f}' y='{sy(p.cost_p50_usd) - 6:.1f}' font-size='11'>"
            f"{html.escape(f'{p.nodes}x{p.gpus_per_node} {p.sku}')}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def memory_svg(plan: Plan, width: int = 760, height: int = 70) -> str:
    m = plan.memory_gib
    total = max(m.capacity, m.total)
    colors = {
        "weights": "#3566b0",
        "gradients": "#6c8fd1",
        "optimizer": "#b36b00",
        "activations": "#2f8f46",
        "optimizer_step": "#d19a3a",
        "reserve": "#8a8f99",
    }
    x, parts = (
        0.0,
        [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' aria-label='memory'>"],
    )
    for name, color in colors.items():
        w = getattr(m, name) / total * width
        if w > 0:
            parts.append(
                f"<rect x='{x:.1f}' y='10' width='{w:.1f}' height='26' fill='{color}'>"
                f"<title>{name}: {getattr(m, name):,.1f} GiB</title></rect>"
            )
            if w > 60:
                parts.append(f"<text x='{x + 4:.1f}' y='28' font-size='11' fill='white'>{name}</text>")
            x += w
    cap = m.capacity / total * width
    parts.append(f"<line x1='{cap:.1f}' y1='4' x2='{cap:.1f}' y2='42' stroke='#b33' stroke-width='2'/>")
    shown = m.not_concurrent >= MEMORY_SHOWN_MIN_GIB
    apart = f"; {m.not_concurrent:,.1f} GiB of the parts never held at once" if shown else ""
    parts.append(
        f"<text x='0' y='60' font-size='11'>{m.total:,.1f} GiB of {m.capacity:,.1f} GiB ({m.basis} capacity){apart}"
        "</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _row(p: Plan, extra: str = "", cls: str = "") -> str:
    """One plan as a table row; a layout that does not fit in memory has no time, speed or cost."""
    cost = usd(p.cost_p50_usd if p.cost_usd else None)
    timed = [f"{p.hours.p50:,.1f}", f"{p.hours.p90:,.1f}", cost, f"{p.tokens_per_s:,.0f}", f"{p.mfu:.0%}"]
    cells = "".join(f"<td class='num'>{v if p.fits else '-'}</td>" for v in timed)
    return (
        f"<tr class='{cls}'><td>{html.escape(p.label())}</td><td>{html.escape(strategy_text(p))}</td>{cells}"
        f"<td>{p.bound if p.fits else '-'}</td>"
        f"<td class='num'>{p.memory_gib.total:,.0f} / {p.memory_gib.capacity:,.0f}</td><td>{html.escape(extra)}</td></tr>"
    )


HEAD = (
    "<tr><th>plan</th><th>strategy</th><th>hours p50</th><th>hours p90</th><th>cost p50</th><th>tokens/s</th>"
    "<th>MFU</th><th>bound</th><th>GiB/GPU</th><th></th></tr>"
)


def html_report(title: str, result: SolveResult, options: OptionsResult) -> str:
    ok = result.best is not None
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='answer{'' if ok else ' bad'}'>{html.escape(headline(result))}</p>",
    ]
    for item in result.infeasible:
        body.append(f"<p class='answer bad'>{html.escape(item.constraint)}: {html.escape(item.detail)}</p>")
    if ok and result.best is not None:
        b = result.best
        body.append(
            f"<p class='muted'>{b.tokens_per_s:,.0f} tokens/s, MFU {b.mfu:.0%}, scaling efficiency "
            f"{b.scaling_efficiency:.0%}, {b.bound}-bound; {b.gpu_hours:,.0f} GPU-hours; p90 spread from "
            f"{html.escape(b.spread_source)}</p>"
        )
        body += ["<h2>Memory per GPU</h2>", memory_svg(b)]
    body += [
        "<h2>Cost/time frontier</h2>",
        frontier_svg(result),
        "<table>" + HEAD + "".join(_row(p) for p in result.frontier) + "</table>",
    ]
    if result.runners_up:
        body.append(
            "<h2>Runners-up</h2><table>"
            + HEAD
            + "".join(
                _row(
                    r,
                    f"lost on {r.lost_on}"
                    + (
                        f"; wins below ${r.breakeven_price_usd_per_gpu_hour:,.2f}/GPU-h"
                        if r.breakeven_price_usd_per_gpu_hour
                        else ""
                    )
                    + (
                        f"; wins above {r.breakeven_scaling_efficiency:.1%} scaling efficiency"
                        if r.breakeven_scaling_efficiency
                        else ""
                    ),
                )
                for r in result.runners_up
            )
            + "</table>"
        )
    body.append(
        "<h2>Every option considered</h2><table>"
        + HEAD
        + "".join(
            _row(o, "ok" if o.feasible else f"rejected: {o.rejected_by}", "" if o.feasible else "rejected")
            for o in options.options
        )
        + "</table>"
    )
    body += [f"<p class='muted'>Note: {html.escape(note)}</p>" for note in result.notes + options.notes]
    body.append(
        "<p class='muted'>Generated by gpuplan. Prices are the catalog's; check the provider before you rent.</p>"
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )
