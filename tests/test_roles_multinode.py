"""GRPO over several nodes (issue 52: "a GRPO job, a 7-8B policy on 8-64 GPUs, planned colocated and
disaggregated with the split chosen by the solver"): solve weighs whole nodes of a multi-node offer beside the
counts of one node, and a plan over 16 H100 runs at the rate bench/rl_validate.py predicts for NeMo RL's
published 16-H100 row of the same recipe."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizer import load_catalog, load_job
from optimizer.cli import app
from optimizer.errors import JobError
from optimizer.inputs.schema import ModelSpec
from optimizer.planning.role_jobs import offer_hardware, role_job
from optimizer.planning.roles import DoesNotFit, RoleSplit, best_split, evaluate_split
from optimizer.solver.roles import check_roles, solve_roles

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "problems" / "grpo-llama-3.1-8b.yaml"
sys.path.insert(0, str(ROOT / "bench"))
import rl_validate  # noqa: E402

OFFER = "lambda-h100-sxm"


@pytest.fixture(scope="module")
def problem():
    return load_job(JOB)


@pytest.fixture(scope="module")
def catalog(problem):
    return load_catalog((JOB.parent / problem.catalog).resolve())


def _with(problem, **roles):
    r = problem.job.roles.model_copy(update=roles)
    return problem.model_copy(update={"job": problem.job.model_copy(update={"roles": r})})


def _offer(catalog):
    return next(o for o in catalog.offers if o.name == OFFER)


def test_solve_weighs_whole_nodes_beside_one_node(problem, catalog):
    offer = _offer(catalog)
    assert offer.max_nodes >= 2
    result = solve_roles(problem, catalog=catalog)
    counts = sorted(p.plan.split.gpus for p in result.plans if p.offer == OFFER)
    whole = [n * offer.gpus_per_node for n in range(2, offer.max_nodes + 1)]
    assert counts == list(range(2, offer.gpus_per_node + 1)) + whole
    for p in result.plans:
        if p.offer == OFFER and p.plan.split.gpus > offer.gpus_per_node:
            assert p.plan.nodes == p.plan.split.gpus // offer.gpus_per_node
            assert f"({p.plan.nodes} nodes)" in p.where
    one_node = max((p for p in result.plans if p.offer == OFFER and p.plan.nodes == 1), key=lambda p: p.plan.hours)
    assert result.best is not None and result.best.plan.hours <= one_node.plan.hours


def test_sixteen_h100_run_at_the_published_rows_prediction(problem, catalog):
    # NeMo RL v0.4's Llama 3.1 8B row: the same recipe on 16 H100 colocated, published 1,562 tokens/s a GPU
    run, predicted = next((r, p) for r, p in rl_validate.rows() if r["name"] == "nemo-rl-v0.4-llama3.1-8b-on-policy")
    assert run["gpus"] == 16 and run["placement"] == "colocated"
    hw = offer_hardware(catalog, _offer(catalog))
    plan = evaluate_split(role_job(problem, catalog), hw, RoleSplit(16, 16, shared=True))
    assert plan.nodes == 2
    assert plan.tokens_per_s / 16 == pytest.approx(predicted["tokens_per_s_per_gpu"], rel=1e-9)
    assert 1 / 1.5 < plan.tokens_per_s / 16 / run["published_tokens_per_s_per_gpu"] < 1.5


def test_disaggregated_over_two_nodes_is_the_best_of_every_split(problem, catalog):
    job = role_job(_with(problem, placement="disaggregated", asynchronous=True), catalog)
    hw = offer_hardware(catalog, _offer(catalog))
    best = best_split(job, hw, 16)
    every = []
    for r in range(1, 16):
        try:
            every.append(evaluate_split(job, hw, RoleSplit(r, 16 - r)))
        except DoesNotFit:  # the trainer on one GPU: its state does not fit an H100
            assert r == 15
    assert best.tokens_per_s == max(p.tokens_per_s for p in every) and best.nodes == 2


def test_part_of_a_node_beyond_one_is_refused(problem, catalog):
    hw = offer_hardware(catalog, _offer(catalog))
    with pytest.raises(JobError, match="12 GPUs, both roles on each, exceed .* must fill them"):
        evaluate_split(role_job(problem, catalog), hw, RoleSplit(12, 12, shared=True))


@pytest.mark.parametrize("command", [["solve"], ["check", "--role", "rollout=8xH100", "--role", "policy=8xH100"]])
def test_a_grpo_job_is_not_written_as_two_independent_launches(tmp_path, command):
    # a colocated plan's two roles share the same GPUs: written as a drafter pipeline's two launches it asked a
    # node for twice its GPUs (8 + 8 on an 8-GPU node); refused before any work, saying what to carry over
    args = [command[0], str(JOB), *command[1:], "--export", "slurm", "--out", str(tmp_path / "launch.sh")]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2, out.output
    assert "GRPO job" in out.output and "cluster.num_nodes" in out.output
    assert not (tmp_path / "launch.sh").exists()


def test_a_checked_split_beyond_the_offers_nodes_says_it_cannot_be_rented(problem, catalog):
    offer = _offer(catalog)
    gpus = (offer.max_nodes + 1) * offer.gpus_per_node
    result = check_roles(problem, [("target", gpus, "H100"), ("drafter", gpus, "H100")], catalog=catalog)
    assert result.best.plan.nodes == offer.max_nodes + 1
    assert any(f"supplies at most {offer.max_nodes} nodes" in n and "cannot be rented" in n for n in result.notes)
    inside = check_roles(problem, [("target", 16, "H100"), ("drafter", 16, "H100")], catalog=catalog)
    assert not any("cannot be rented" in n for n in inside.notes)


def test_a_70b_policy_trains_on_as_many_nodes_as_its_state_needs(problem, catalog):
    # Llama 3.1 70B's training state (16 bytes a parameter, 1.13 TB) does not fit one node of H100 under FSDP:
    # its one-node counts are refused with the need, and the plan spans nodes (it was planned on 8 H100)
    model = ModelSpec.model_validate(
        {"name": "llama-3.1-70b", "params": "70.6B", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
         "ffn_hidden": 28672, "vocab": 128256}
    )  # fmt: skip
    rollout = problem.job.roles.rollout.model_copy(update={"tp": 4})
    big = _with(problem, rollout=rollout)
    big = big.model_copy(update={"job": big.job.model_copy(update={"model": model})})
    hw = offer_hardware(catalog, _offer(catalog))
    with pytest.raises(DoesNotFit, match="training the policy does not fit 8 x H100-SXM"):
        evaluate_split(role_job(big, catalog), hw, RoleSplit(8, 8, shared=True))
    result = solve_roles(big.model_copy(update={"constraints": big.constraints.model_copy(
        update={"gpu": big.constraints.gpu.model_copy(update={"types": ["H100-SXM"]})})}), catalog=catalog)  # fmt: skip
    assert result.best is not None and result.best.plan.nodes > 1
    assert [p for p in result.plans if p.offer == OFFER] and all(p.plan.nodes > 1 for p in result.plans)


def test_a_plan_over_nodes_says_so_in_its_answer(problem, catalog):
    hw = offer_hardware(catalog, _offer(catalog))
    two = evaluate_split(role_job(problem, catalog), hw, RoleSplit(16, 16, shared=True))
    one = evaluate_split(role_job(problem, catalog), hw, RoleSplit(8, 8, shared=True))
    assert (two.nodes, two.link) == (2, "network") and (one.nodes, one.link) == (1, "peer")
    out = CliRunner().invoke(app, ["solve", str(JOB), "--gpu-types", "H100", "--format", "json"])
    best = __import__("json").loads(out.output)["best"]
    assert best["nodes"] == best["gpus"] // 8 > 1 and best["link"]["kind"] == "network"
