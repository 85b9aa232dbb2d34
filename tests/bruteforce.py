"""The test oracle: brute-force enumeration over the same candidate table CP-SAT reads.

It shares nothing with the CP-SAT model but the table (``solver_rows``/``scaled`` for the integer cost):
whether a row fits and meets the deadline, and its hours, are what ``check`` says of its plan
(``plan_from``), the optimum a plain minimum over the rows that pass every constraint (under cost, the fastest of those
within the cost tolerance of that minimum), the frontier a sort
and a sweep.
"""

from optimizer.inputs import units
from optimizer.planning.plans import plan_from
from optimizer.solver.model import scaled, solver_rows


def rows(table):
    out = []
    for c in solver_rows(table):
        d = scaled(c, table)
        verdict = plan_from(table.ctx, c.row, table.evaluation, c.index)
        out.append({**d, "fits": verdict.fits, "meets_deadline": verdict.meets_deadline, "hours": verdict.hours.p50})
    return out


def allowed(d, table, *, deadline=True, budget=True):
    c = table.ctx.constraints
    if not d["fits"] or d["filtered"] or d["over_supply"] or d["hours"] * 3600 > units.LIMITS["duration"].high:
        return False
    if deadline and d["meets_deadline"] is False:
        return False
    return not (budget and c.budget_usd is not None and d["cost_cents"] > round(c.budget_usd * 100))


def best(table, objective):
    """(cost_cents, time_s) of the optimum, or None when nothing passes."""
    feasible = [d for d in rows(table) if allowed(d, table)]
    if not feasible:
        return None
    key = (
        (lambda d: (d["cost_cents"], d["hours"])) if objective == "cost" else (lambda d: (d["hours"], d["cost_cents"]))
    )
    d = min(feasible, key=key)
    if objective == "cost":
        # a near-tie goes to the faster plan: the fastest costing at most the tolerance above the cheapest
        within = d["cost_cents"] + table.ctx.constraints.cost_tolerance_cents(d["cost_cents"])
        d = min((e for e in feasible if e["cost_cents"] <= within), key=lambda e: (e["hours"], e["cost_cents"]))
    return d["cost_cents"], d["time_s"]


def frontier(table):
    """[(time_s, cost_cents)] fastest first, each strictly cheaper: the non-dominated set."""
    pts, cheapest = [], None
    for d in sorted(
        (d for d in rows(table) if allowed(d, table, deadline=False, budget=False)),
        key=lambda d: (d["hours"], d["cost_cents"]),
    ):
        if cheapest is None or d["cost_cents"] < cheapest:
            pts.append((d["time_s"], d["cost_cents"]))
            cheapest = d["cost_cents"]
    return pts
