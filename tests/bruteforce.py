"""The test oracle: brute-force enumeration over the same candidate table CP-SAT reads.

It shares nothing with the CP-SAT model but the table (``solver_rows``/``scaled``): the optimum is a
plain minimum over the rows that pass every constraint, the frontier a sort and a sweep.
"""

from optimizer.solver.model import scaled, solver_rows


def rows(table):
    return [scaled(c, table) for c in solver_rows(table)]


def allowed(d, table, *, deadline=True, budget=True):
    c = table.ctx.constraints
    if d["memory_mib"] > d["capacity_mib"] or d["filtered"] or d["over_supply"]:
        return False
    if deadline and c.deadline_s is not None and d["deadline_time_s"] > int(c.deadline_s // 1):
        return False
    return not (budget and c.budget_usd is not None and d["cost_cents"] > round(c.budget_usd * 100))


def best(table, objective):
    """(cost_cents, time_s) of the optimum, or None when nothing passes."""
    feasible = [d for d in rows(table) if allowed(d, table)]
    if not feasible:
        return None
    key = (
        (lambda d: (d["cost_cents"], d["time_s"]))
        if objective == "cost"
        else (lambda d: (d["time_s"], d["cost_cents"]))
    )
    d = min(feasible, key=key)
    return d["cost_cents"], d["time_s"]


def frontier(table):
    """[(time_s, cost_cents)] fastest first, each strictly cheaper: the non-dominated set."""
    pts, cheapest = [], None
    for d in sorted(
        (d for d in rows(table) if allowed(d, table, deadline=False, budget=False)),
        key=lambda d: (d["time_s"], d["cost_cents"]),
    ):
        if cheapest is None or d["cost_cents"] < cheapest:
            pts.append((d["time_s"], d["cost_cents"]))
            cheapest = d["cost_cents"]
    return pts
