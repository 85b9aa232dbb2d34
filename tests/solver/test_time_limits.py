"""The time limit ends in the best answer known, never in nothing, and never in a claim of infeasibility it
did not prove (issue 40): a solve CP-SAT stopped answers the table's best row by a scan; a table the limit cut
short answers from the rows evaluated and says how many; an offer of 1,024 nodes builds only the rows its
global batch fits. Behaviour only: how long these take is in BENCHMARKS.md (bench/solver_bench.py)."""

import time

import bruteforce
import pytest
from ortools.sat.python import cp_model

from optimizer import load_catalog, load_job, plan, portfolio
from optimizer.api import candidate_table, options
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Catalog, Offer, Portfolio, Problem
from optimizer.planning.calibration import job_context
from optimizer.planning.candidates import SHOWN_UNBATCHED_LAYOUTS, build_table
from optimizer.solver.model import PlanModel, scaled
from optimizer.solver.portfolio.solve import _extract_reserve
from optimizer.solver.single import best_known

HARDWARE = load_catalog("hardware").skus
QLORA_70B = {
    "name": "qlora",
    "model": {"preset": "llama-3.1-70b"},
    "method": "qlora",
    "lora_rank": 64,
    "tokens": "200M",
    "seq_len": 2048,
    "global_batch": 32,
}


def _offers(n: int, *, distinct: bool = False, **fields) -> Catalog:
    """``n`` one-node offers of 8 H100s at ``n`` prices (``distinct``: each with its own delivered memory, so
    that no two share an evaluation)."""
    offers = [
        Offer(
            name=f"h100-{i}",
            sku="H100-SXM",
            price=2.0 + 0.001 * i,
            gpus_per_node=8,
            max_nodes=1,
            **({"memory_delivered": f"{79 - 0.001 * i:.3f}GB"} if distinct else {}),
            **fields,
        )
        for i in range(n)
    ]
    return Catalog(name="many", skus=HARDWARE, offers=offers)


def _problem(job: dict, **constraints) -> Problem:
    return Problem.model_validate(expand_models({"job": job, "constraints": constraints}))


def _stopped(monkeypatch) -> None:
    """Every CP-SAT solve ends as a time limit ends it before any solution: UNKNOWN."""
    real = PlanModel.solve

    def unknown(self, *args, **kwargs):
        solver, _ = real(self, 0.0, *args[1:], **kwargs)
        return solver, cp_model.UNKNOWN

    monkeypatch.setattr(PlanModel, "solve", unknown)


def test_a_thousand_one_node_offers_answer_a_plan_within_a_short_time_limit():
    """1,000 offers (4,000 rows, all feasible) at --time-limit 5: CP-SAT may find no solution of the 4,000-row
    model in time, and the answer is still a plan, whatever CP-SAT got to, never "stopped before it found a plan"."""
    catalog = _offers(1000)
    answer = plan(_problem(QLORA_70B), catalog=catalog, time_limit_s=3)
    assert answer.best is not None and answer.status in ("optimal", "feasible"), answer.notes
    # the cheapest of identical offers, and the plan one such offer alone gets
    alone = plan(_problem(QLORA_70B), catalog=_offers(1)).best
    assert alone is not None and answer.best.offer == "h100-0" and answer.best.gpus == alone.gpus
    assert not answer.infeasible


def test_a_table_of_4000_rows_is_solved_to_optimality():
    """Where the time went: CP-SAT's presolve of the 4,000-row model (probing added 200,000 clauses) found no
    solution in 6-10 s; without presolve (past ``PRESOLVE_ROWS`` rows) the same model is optimal in about a
    second, frontier included."""
    answer = plan(_problem(QLORA_70B), catalog=_offers(1000), time_limit_s=6)
    assert answer.status == "optimal" and answer.best is not None and answer.frontier
    assert not any("time limit" in n for n in answer.notes), answer.notes


def test_a_solve_stopped_before_any_plan_answers_the_best_row_of_the_table(problems, monkeypatch):
    """The time limit stopping CP-SAT before its first solution: the answer is the table's best row by a scan
    (the optimum over the table, as the solver would have found it), labelled feasible, not proved."""
    problem = load_job(problems / "llama-70b-within-5-days.yaml")
    proved = plan(problem, time_limit_s=10)
    _stopped(monkeypatch)
    answer = plan(problem, time_limit_s=10)
    assert answer.status == "feasible" and answer.best is not None
    assert (answer.best.offer, answer.best.gpus, answer.best.cost_usd) == (
        proved.best.offer,
        proved.best.gpus,
        proved.best.cost_usd,
    )
    assert any("by a scan of them all" in n for n in answer.notes), answer.notes
    assert not any("without a plan" in n for n in answer.notes)


@pytest.mark.parametrize("objective", ["cost", "time"])
@pytest.mark.parametrize(
    "name", ["llama-70b-within-5-days", "llama-8b-lora", "seed-b300-breakeven", "llama-70b-p90-deadline"]
)
def test_the_scan_finds_the_optimum_the_oracle_finds(problems, name, objective):
    problem = load_job(problems / f"{name}.yaml")
    problem = problem.model_copy(update={"objective": objective})
    table = candidate_table(problem)
    best, cheapest = best_known(table)
    expected = bruteforce.best(table, objective)
    if cheapest is not None:  # a near-tie went to a faster plan: the cheapest is the oracle's cheapest too
        assert scaled(cheapest, table)["cost_cents"] <= scaled(best, table)["cost_cents"]
    assert (None if best is None else (scaled(best, table)["cost_cents"], scaled(best, table)["time_s"])) == expected


def test_a_stopped_solve_with_no_feasible_row_is_unknown_not_infeasible(problems, monkeypatch):
    problem = load_job(problems / "llama-70b-within-5-days.yaml")
    tight = problem.model_copy(update={"constraints": problem.constraints.model_copy(update={"budget_usd": 1.0})})
    _stopped(monkeypatch)
    answer = plan(tight, time_limit_s=5)
    assert answer.status == "unknown" and answer.best is None and not answer.infeasible


def test_a_table_the_time_limit_cut_short_answers_from_the_rows_evaluated():
    """Evaluation past the limit stops; the table holds the rows evaluated by then and counts the rest, and
    the answer is the best of those, saying how many of how many."""
    catalog = _offers(600, distinct=True)  # no two rows share an evaluation: 2,400 of them, ~1M layouts
    ctx = job_context(_problem(QLORA_70B), catalog)
    table = build_table(ctx, keep_rejected=True, until=time.perf_counter())  # already past: one pass
    assert 0 < len(table.candidates) < 2400 and table.unevaluated == 2400 - len(table.candidates)
    answer = plan(_problem(QLORA_70B), catalog=catalog, table=table, time_limit_s=5)
    assert answer.best is not None and answer.status == "feasible" and answer.gap == 1.0
    assert any(f"{len(table.candidates):,} of 2,400 hardware rows were evaluated" in n for n in answer.notes)
    listed = options(_problem(QLORA_70B), catalog=catalog, table=table)
    assert any("were not evaluated" in n for n in listed.notes)


@pytest.mark.parametrize("name", ["llama-70b-within-5-days", "llama-8b-lora", "seed-k8s-spec"])
def test_a_table_built_in_passes_is_the_table_built_at_once(problems, name):
    """With a time limit the rows are built and evaluated in passes (rows no filter rejects first), rows of
    equal figures sharing one evaluation; with time enough the table is the one built in one pass, row by row."""
    problem = load_job(problems / f"{name}.yaml")
    for catalog in (load_catalog(problem.catalog or "default"), _offers(300, distinct=True)):
        ctx = job_context(problem, catalog)
        once = build_table(ctx, keep_rejected=True)
        passes = build_table(ctx, keep_rejected=True, until=time.perf_counter() + 3600)
        assert passes.unevaluated == 0

        def rows(t):
            ev = t.evaluation
            return [
                (c.row.key, c.fits, c.time_s, c.cost_usd, c.memory_bytes, c.rejected_by)
                + ((float(ev.timing.step_s[c.index]), float(ev.host_bytes[c.index])) if c.index >= 0 else ())
                for c in t.candidates
            ]

        assert rows(passes) == rows(once)


def test_no_plan_among_the_rows_evaluated_is_unknown_not_infeasible():
    catalog = _offers(600, distinct=True)
    problem = _problem(QLORA_70B, deadline="1h")  # no row meets it: CP-SAT proves none of those evaluated does
    table = build_table(job_context(problem, catalog), keep_rejected=True, until=time.perf_counter())
    assert table.unevaluated
    answer = plan(problem, catalog=catalog, table=table, time_limit_s=5)
    assert answer.status == "unknown" and answer.best is None and not answer.infeasible
    assert any("none of them is a plan" in n for n in answer.notes), answer.notes


def test_a_time_limit_counts_from_the_commands_start():
    """``started`` in the past (the files took the time): the solve answers at once, from what it has."""
    catalog = _offers(200)
    answer = plan(_problem(QLORA_70B), catalog=catalog, time_limit_s=2, started=time.perf_counter() - 2)
    assert answer.best is not None and answer.status == "feasible"


def test_an_offer_of_1024_nodes_evaluates_the_rows_its_global_batch_fits():
    """``max_nodes: 1024`` (the documented limit): 997 of its node counts fit no layout of the global batch, and
    evaluating each without it (2.1 million layouts) only to show it rejected costs 26 s and 1.7 GB. Only the
    first of them are, up to SHOWN_UNBATCHED_LAYOUTS; every row is still in the table."""
    offer = Offer(name="big-b200", sku="B200", price=5.5, gpus_per_node=8, max_nodes=1024)
    catalog = Catalog(name="big", skus=HARDWARE, offers=[offer])
    job = {"name": "sft", "model": {"preset": "llama-3.1-70b"}, "tokens": "20B", "seq_len": 4096, "global_batch": 256}
    problem = _problem(job, deadline="5d")
    table = candidate_table(problem, catalog)
    assert len(table.candidates) == 1024 + 3  # 1, 2, 4 GPUs on one node, and 1..1024 nodes of 8
    batch_rows = [c for c in table.candidates if c.rejected_by != "global_batch"]
    assert len(table.evaluation.row) <= SHOWN_UNBATCHED_LAYOUTS + 100_000  # the batch's rows: 16,000 layouts
    unshown = [c for c in table.candidates if c.rejected_by == "global_batch" and c.index < 0]
    assert len(unshown) > 800  # rejected by the batch, listed without numbers
    assert any(c.row.nodes == 1024 for c in batch_rows)  # 1,024 nodes of TP 8 x PP 4 x DP 256 fit the batch
    answer = plan(problem, catalog=catalog, table=table, time_limit_s=10)
    assert answer.status == "optimal" and answer.best is not None
    listed = options(problem, catalog=catalog, table=table)
    assert any("fit no layout of the global batch and are not listed" in n for n in listed.notes)


# --------------------------------------------------------------------------- portfolios

QWEN_8B = {
    "name": "qwen3-8b",
    "params": "8.19B",
    "layers": 36,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 8,
    "ffn_hidden": 12288,
    "vocab": 151936,
}


def _portfolio(n: int, *, shapes: int = 1, required: bool = False) -> Portfolio:
    """``n`` inline jobs of ``shapes`` distinct specs (sequence lengths), in turn, on the default catalog."""
    jobs = [
        {
            "name": f"j{i}",
            "required": required,
            "job": {"model": QWEN_8B, "tokens": "500M", "seq_len": 2048 + 64 * (i % shapes), "global_batch": 128},
        }
        for i in range(n)
    ]
    return Portfolio.model_validate({"catalog": "default", "horizon": "60d", "time_step": "1h", "jobs": jobs})


def test_identical_jobs_are_scheduled_when_reading_the_files_took_the_time_limit():
    """10,000 identical optional jobs, a 10 s limit spent reading the file: their one table is built and
    greedy's schedule is the answer, said to be greedy's, not "the first 0 of 10,000 jobs" evaluated with
    nothing scheduled and advice to give jobs of one shape the same model, which they have."""
    pf = _portfolio(600)
    started = time.perf_counter() - 5.0  # the files took the whole limit
    result = portfolio(pf, catalog=load_catalog("default"), time_limit_s=5, workers=1, started=started)
    assert result.schedule and result.status == "feasible" and result.method == "greedy"
    assert len(result.schedule) + len(result.dropped) == 600
    assert not result.infeasible
    assert any("no time for the search" in n for n in result.notes), result.notes
    assert not any("same model" in n for n in result.notes)


def test_jobs_the_time_limit_left_unevaluated_are_left_out_and_the_rest_scheduled():
    """Past the limit no new table is begun: the jobs evaluated are scheduled (never optimal: the others are
    out), the others dropped as not evaluated; the advice to share tables only where most jobs have a shape
    of their own."""
    pf = _portfolio(40, shapes=4)
    result = portfolio(pf, catalog=load_catalog("default"), time_limit_s=2, workers=1, started=time.perf_counter() - 2)
    assert result.status == "feasible" and result.schedule and not result.infeasible
    out = [d for d in result.dropped if "before its options were evaluated" in d.reason]
    assert len(out) == 30 and len(result.schedule) + len(result.dropped) == 40  # one shape of four evaluated
    note = next(n for n in result.notes if "ran out while the jobs' options were evaluated" in n)
    assert "10 of 40 jobs (1 of 4 distinct job shapes" in note and "same model" not in note
    distinct = portfolio(
        _portfolio(40, shapes=40), catalog=load_catalog("default"), time_limit_s=2, started=time.perf_counter() - 2
    )
    assert any("same model" in n for n in distinct.notes)


def test_required_jobs_left_unevaluated_make_it_unknown_never_infeasible():
    pf = _portfolio(20, shapes=4, required=True)
    result = portfolio(pf, catalog=load_catalog("default"), time_limit_s=2, workers=1, started=time.perf_counter() - 2)
    assert result.status == "unknown" and result.bound_usd is None
    assert [i.constraint for i in result.infeasible] == ["time_limit"]
    assert "not evaluated within 2 s" in result.infeasible[0].detail


def test_a_slower_machine_keeps_more_of_the_time_limit_for_the_output():
    """The time kept after the search for the plans and the output grows with the pace measured in the run: at a
    fixed 2 ms a job, 5,000 jobs at a 20 s limit ran 29 s with YAML output."""
    floor = _extract_reserve(5000)
    assert _extract_reserve(5000, plan_s=0.0001) == floor  # a fast machine: the measured floor
    assert _extract_reserve(5000, plan_s=0.002) > 2 * floor  # 2 ms a plan: the output takes ~9 ms a job


def test_a_stopped_solve_takes_near_ties_as_the_solver_does(problems, monkeypatch):
    """Seed 003 at the free batch: the scan that answers a stopped solve picks the same faster plan within the
    cost tolerance as CP-SAT's second objective, and names the cheapest it passed over."""
    job = load_job(problems / "seed-rtx-pro-vs-b200.yaml")
    job = job.model_copy(update={"job": job.job.model_copy(update={"global_batch": "free"})})
    proved = plan(job, runners_up=False)
    _stopped(monkeypatch)
    scanned = plan(job, runners_up=False)
    assert proved.passed_over is not None and scanned.passed_over is not None
    assert (scanned.best.offer, scanned.best.gpus) == (proved.best.offer, proved.best.gpus)
    assert (scanned.passed_over.offer, scanned.passed_over.gpus) == (proved.passed_over.offer, proved.passed_over.gpus)
    assert any(n.startswith("near-tie:") for n in scanned.notes)
