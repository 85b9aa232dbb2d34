"""Golden tests: every number of seed 000 ("B300 vs B200") that gpuplan can reproduce.

Seed 000 ("B300 vs B200: compute memory and cost first") works with training state alone:
16 bytes per parameter, no activations, no framework reserve. The problem files state exactly that.
"""

import pytest

from optimizer import CheckRequest, capacity, check, load_catalog, load_job, plan
from optimizer.physics.cost import run_cost_usd

GB = 1e9
GIB = 2**30


def test_capacity_per_gpu_and_per_node():
    # 180 / 16 = 11.25B per B200, 288 / 16 = 18B per B300; x8 fully sharded: 90B and 144B.
    assert capacity("B200", 1).max_params == pytest.approx(11.25e9)
    assert capacity("B300", 1).max_params == pytest.approx(18e9)
    assert capacity("B200", 8, zero=3).max_params == pytest.approx(90e9)
    assert capacity("B300", 8, zero=3).max_params == pytest.approx(144e9)
    # 144 - 90 = 54B more per node
    assert (capacity("B300", 8).max_params - capacity("B200", 8).max_params) == pytest.approx(54e9)


def test_capacity_with_the_hgx_board_figure():
    # NVIDIA's HGX table lists 2.1 TB per B300 board: 2.1e12 / 16 = 131B (the seed's figure).
    assert capacity("B300", 8, memory_basis="board").max_params == pytest.approx(131.25e9)


def test_fourteen_b_state_fits_one_b300_not_one_b200(problems):
    job = load_job(problems / "seed-14b-full-finetune.yaml")
    b300 = check(job, CheckRequest("B300", 1, compare=False))
    # 14B x 16 bytes = 224 GB = 208.6 GiB of state; 288 - 224 = 64 GB left for activations.
    assert b300.plan.memory_gib.total * GIB == pytest.approx(224 * GB)
    assert b300.plan.memory_gib.total == pytest.approx(208.6, abs=0.05)
    assert b300.fits
    assert (b300.plan.memory_gib.capacity - b300.plan.memory_gib.total) * GIB == pytest.approx(64 * GB)
    assert not check(job, CheckRequest("B200", 1, compare=False)).fits


def test_fourteen_b_fits_two_b200_with_zero3_at_112_gb_each(problems):
    job = load_job(problems / "seed-14b-full-finetune.yaml")
    two = check(job, CheckRequest("B200", 2, zero=3, compare=False))
    assert two.fits
    assert two.plan.memory_gib.total * GIB == pytest.approx(112 * GB)
    assert two.plan.strategy.shard_degree == 2


def test_hundred_b_does_not_fit_one_b200_node_and_fits_one_b300_node(problems):
    job = load_job(problems / "seed-100b-one-node.yaml")
    # 1,600 GB of state > 1,440 GB on a B200 node
    b200 = check(job, CheckRequest("B200", 8, zero=3, compare=False))
    assert not b200.fits
    assert b200.plan.memory_gib.total * GIB * 8 == pytest.approx(1600 * GB)
    assert b200.plan.memory_gib.capacity * GIB * 8 == pytest.approx(1440 * GB)
    # inside a B300 node (2,304 GB): 704 GB left, 88 GB per GPU
    b300 = check(job, CheckRequest("B300", 8, compare=False))
    assert b300.fits
    left = (b300.plan.memory_gib.capacity - b300.plan.memory_gib.total) * GIB
    assert left == pytest.approx(88 * GB)
    assert left * 8 == pytest.approx(704 * GB)


def test_seventy_b_leaves_40_gb_per_gpu_on_a_b200_node(problems):
    job = load_job(problems / "seed-70b-one-b200-node.yaml")
    node = check(job, CheckRequest("B200", 8, compare=False))
    assert node.fits
    assert node.plan.memory_gib.total * GIB * 8 == pytest.approx(1120 * GB)
    assert (node.plan.memory_gib.capacity - node.plan.memory_gib.total) * GIB == pytest.approx(40 * GB)


def test_seed_prices_in_the_nodus_catalog():
    cat = load_catalog("nodus-2026-11")
    prices = {o.sku: o.price_usd_per_gpu_hour for o in cat.offers}
    assert prices == {"B200": 5.50, "B300": 6.943, "H200": 3.593}
    assert round(prices["B300"] / prices["B200"], 3) == 1.262  # B300 must be 1.262x faster
    # one B300 node $55.54/h vs two B200 nodes $88.00/h: 1.584x
    assert round(8 * prices["B300"], 2) == 55.54
    assert 16 * prices["B200"] == pytest.approx(88.00)
    assert round(16 * prices["B200"] / (8 * prices["B300"]), 3) == 1.584
    # B300 is about twice the H200's memory at 1.93x its price
    assert round(prices["B300"] / prices["H200"], 2) == 1.93


def test_thousand_gpu_hours_costs():
    # 1,000 B200 GPU-hours (8 GPUs x 125 h) = $5,500; same-speed B300 $6,943 (+$1,443); at 1.5x speed $4,628.67.
    assert run_cost_usd(5.50, 8, 125.0) == pytest.approx(5500.0)
    assert run_cost_usd(6.943, 8, 125.0) == pytest.approx(6943.0)
    assert run_cost_usd(6.943, 8, 125.0) - run_cost_usd(5.50, 8, 125.0) == pytest.approx(1443.0)
    assert run_cost_usd(6.943, 8, 125.0 / 1.5) == pytest.approx(4628.67, abs=0.005)


def test_same_job_on_8_b300_costs_1_262x_more_at_equal_throughput(problems):
    job = load_job(problems / "seed-70b-one-b200-node.yaml")
    b200 = check(job, CheckRequest("B200", 8, compare=False)).plan
    b300 = check(job, CheckRequest("B300", 8, compare=False)).plan
    # Same dense BF16, HBM and NVLink: the physics predicts equal throughput (seed 000) ...
    assert b300.tokens_per_s == pytest.approx(b200.tokens_per_s, rel=1e-9)
    # ... so the B300 run costs the price ratio more.
    assert b300.cost_usd.p50 / b200.cost_usd.p50 == pytest.approx(1.262, abs=0.001)


def test_min_memory_160gi_keeps_b200_and_b300_and_drops_h200(problems):
    job = load_job(problems / "seed-70b-one-b200-node.yaml")
    from optimizer import apply_overrides, options

    filtered = options(apply_overrides(job, min_memory="160Gi"))
    kept = {o.sku for o in filtered.options if o.rejected_by != "filter"}
    assert kept == {"B200", "B300"}  # B200's 180 GB = 167.6 GiB >= 160 GiB; H200's 141 GB is not


@pytest.mark.parametrize("efficiency, winner", [(0.75, "B300"), (0.78, "B300"), (0.80, "B200"), (0.85, "B200")])
def test_two_b200_nodes_beat_one_b300_node_only_above_79_percent(problems, efficiency, winner):
    from optimizer.inputs.files import load_job as load

    job = load(problems / "seed-b300-breakeven.yaml")
    job.assumptions.scaling_efficiency[2] = efficiency
    best = plan(job).best
    assert best.sku == winner
    assert best.nodes == (2 if winner == "B200" else 1)


def test_breakeven_efficiency_reported_for_the_users_job(problems):
    answer = plan(load_job(problems / "seed-b300-breakeven.yaml"))
    b200 = next(r for r in answer.runners_up if r.sku == "B200")
    assert b200.lost_on == "cost"
    assert b200.breakeven_scaling_efficiency == pytest.approx(0.792, abs=0.002)


def test_breakevens_are_claimed_only_where_they_would_win(problems):
    """A breakeven is claimed only where it would win: a runner-up that lost on time or on the deadline gets no
    price at which it would cost what the best plan costs (not "wins below $6.67" beside its price of $5.50), and
    an efficiency only above its own (not "wins above 79 %" beside its 96 %). Under the time objective no price
    wins."""
    job = load_job(problems / "llama-70b-within-5-days.yaml")
    fastest = plan(job.model_copy(update={"objective": "time"}))
    for r in fastest.runners_up:
        assert r.breakeven_price_usd_per_gpu_hour is None, r.label()
        if r.breakeven_scaling_efficiency is not None:
            assert r.lost_on in ("time", "deadline") and r.scaling_efficiency < r.breakeven_scaling_efficiency <= 1
    cheapest = plan(job)
    for r in cheapest.runners_up:
        if r.breakeven_price_usd_per_gpu_hour is not None:
            assert r.lost_on in ("cost", "budget") and r.breakeven_price_usd_per_gpu_hour < r.price_usd_per_gpu_hour
        if r.lost_on == "deadline":
            assert r.breakeven_price_usd_per_gpu_hour is None


def test_a_runner_up_priced_below_its_breakeven_wins(problems):
    """The claim re-solved: the offer of the cheapest runner-up that lost on cost, priced 1 % under its
    breakeven, gives the best plan."""
    from optimizer.inputs.files import problem_catalog

    job = load_job(problems / "llama-70b-within-5-days.yaml")
    runner = next(r for r in plan(job).runners_up if r.lost_on == "cost" and r.breakeven_price_usd_per_gpu_hour)
    catalog = problem_catalog(job)
    offers = [
        o.model_copy(update={"price_usd_per_gpu_hour": 0.99 * runner.breakeven_price_usd_per_gpu_hour})
        if o.name == runner.offer
        else o
        for o in catalog.offers
    ]
    best = plan(job, catalog=catalog.model_copy(update={"offers": offers})).best
    # (at that price another GPU count of the same offer may be as cheap to within the cost tolerance and faster)
    assert best.offer == runner.offer
