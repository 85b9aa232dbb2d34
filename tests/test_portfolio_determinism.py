"""Issue 53: the same portfolio and flags give the same answer on two runs, with the default two workers:
through the whole model in CP-SAT (fixed seed; small portfolios) and through the search (more than
``solve.SEARCH_JOBS`` jobs). What the answer says is the schedule's, not the machine's pace: how many neighbourhood
steps ran is a progress line. A search its time limit cuts short: tests/test_portfolio_work.py."""

from __future__ import annotations

from test_portfolio_drops import _with_waits
from test_portfolio_scale import _constructed

from optimizer import load_portfolio, portfolio


def _answer(result) -> dict:
    return result.model_dump(exclude={"solve_s"})


def test_two_runs_of_the_whole_model_on_two_workers_give_the_same_answer(problems):
    pf = load_portfolio(problems / "portfolio-q1-finetunes.yaml")
    first = portfolio(pf, workers=2, time_limit_s=20)
    assert first.method == "cp_sat" and first.status == "optimal"
    assert _answer(portfolio(pf, workers=2, time_limit_s=20)) == _answer(first)


def test_two_runs_of_the_search_on_two_workers_give_the_same_answer():
    pf, catalog = _constructed(45, 0)
    pf = _with_waits(pf, 0)
    lines: list[str] = []
    first = portfolio(pf, catalog=catalog, time_limit_s=10, workers=2, progress=lines.append)
    assert first.method == "lp_lns" and first.status == "optimal" and any(" improving steps of " in x for x in lines)
    assert not any("steps" in note for note in first.notes)
    assert _answer(portfolio(pf, catalog=catalog, time_limit_s=10, workers=2)) == _answer(first)
