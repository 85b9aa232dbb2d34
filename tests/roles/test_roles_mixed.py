"""Role splits across two offers (issue 52): the targets on one offer's node and SKU, the drafter on another's, the
hidden states crossing the network between the two nodes (planning/role_mixed.py).

Independent truths: a brute force written here (every offer, GPU count and split on one node, every pair of
offers and counts across two, the network link and its refusal computed by this file's own formula) picks
the plan ``solve_roles`` picks; a split across offers is chosen where it is the cheapest within the deadline
and refused, with the bytes it needs and the network gives, where the transfer needs NVLink; ``check`` answers
a split with a different GPU per role with each role's rate and what binds. A job that does not ask
(``job.roles.across_offers``) is answered as before (tests/cli/test_roles_cli.py holds its figures).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from paths import ROOT
from typer.testing import CliRunner

import optimizer
from optimizer.cli import app
from optimizer.inputs.catalog import find_sku
from optimizer.inputs.overrides import apply_overrides
from optimizer.planning.role_jobs import offer_hardware, role_job
from optimizer.planning.roles import (
    RoleSplit,
    all_splits,
    consumer_tokens_per_s,
    evaluate_split,
    producer_tokens_per_s_per_gpu,
)

JOB = ROOT / "problems" / "seed-003-drafter-roles.yaml"
HARDWARE = ROOT / "catalogs" / "hardware.yaml"
SECONDS_PER_HOUR = 3600.0
runner = CliRunner()

# The seed's offers (catalogs/seed-003-roles.yaml) with the B200 at 6x the RTX PRO 6000's $1.57 an hour, not the
# seed's 3.4x: there eight B200 targets feeding five RTX PRO 6000 drafters on another node cost less per token
# than seven B200 targets and a B200 drafter (whose GPU sits 80 % idle), and finish first.
RTX_PRICE = 1.57
B200_PRICE_6X = 6 * RTX_PRICE


def _offers(b200_price: float) -> list[dict]:
    return [
        {"name": "rtx-box", "sku": "RTX-PRO-6000", "provider": "p", "price": RTX_PRICE, "gpus_per_node": 4},
        {"name": "rtx-8x", "sku": "RTX-PRO-6000", "provider": "p", "price": RTX_PRICE, "gpus_per_node": 8},
        {"name": "b200", "sku": "B200", "provider": "p", "price": b200_price, "gpus_per_node": 8,
         "gpu_counts": [1, 2, 4, 8], "memory_delivered": "180GB"},
    ]  # fmt: skip


def _files(
    tmp_path: Path,
    *,
    b200_price: float = B200_PRICE_6X,
    objective: str = "time",
    rtx_network_gb_per_s: float | None = None,
    **roles,
) -> Path:
    """The seed-003 job with ``roles`` set in its roles section, on a catalog of ``_offers`` written beside it;
    ``rtx_network_gb_per_s``: the RTX PRO 6000's network a GPU in place of the hardware file's."""
    hardware = str(HARDWARE)
    if rtx_network_gb_per_s is not None:
        skus = yaml.safe_load(HARDWARE.read_text())
        for sku in skus["skus"]:
            if sku["name"] == "RTX-PRO-6000":
                sku["network_gb_per_s_per_gpu"] = rtx_network_gb_per_s
        (tmp_path / "hardware.yaml").write_text(yaml.safe_dump(skus))
        hardware = "hardware.yaml"
    catalog = {"name": "mixed", "hardware": hardware, "offers": _offers(b200_price)}
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    job = yaml.safe_load(JOB.read_text())
    job["catalog"] = "catalog.yaml"
    job["objective"] = objective
    job["job"]["roles"].update(roles)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result


# --------------------------------------------------------------------------- brute force, written here


def _brute_force(problem, catalog) -> list[tuple[tuple, str, str | None, RoleSplit, float, float]]:
    """Every plan: (rank key, producers' offer, consumers' offer or None, split, hours, cost). One node: every
    GPU count the offer rents, every split of it (evaluate_split). Two offers of one provider: every count of
    each, the rate the least of the producers', the consumers' and the network's: each side's GPUs times its
    per-GPU network, times the link efficiency, over the bytes a token; kept where the network carries what the
    roles produce and consume, and where the trained role fits its GPUs."""
    job = role_job(problem, catalog)
    c = problem.constraints
    rows = []

    def keep(a, b, split, tokens_per_s, price_usd_per_hour):
        hours = job.tokens / tokens_per_s / SECONDS_PER_HOUR
        cost = hours * price_usd_per_hour
        if c.deadline_s is not None and hours * SECONDS_PER_HOUR > c.deadline_s:
            return
        if c.max_gpus is not None and split.gpus > c.max_gpus:
            return
        first = (hours, round(cost, 2)) if problem.objective == "time" else (round(cost, 2), hours)
        rows.append(((*first, split.gpus, b is not None), a.name, b.name if b else None, split, hours, cost))

    for a in catalog.offers:
        hw = offer_hardware(catalog, a)
        for gpus in a.gpu_counts or range(2, a.gpus_per_node + 1):
            for split in all_splits(gpus):
                plan = evaluate_split(job, hw, split)
                keep(a, None, split, plan.tokens_per_s, gpus * a.price_usd_per_gpu_hour)
    for a in catalog.offers:
        for b in catalog.offers:
            if a.name == b.name or a.provider != b.provider:
                continue
            ha, hb = offer_hardware(catalog, a), offer_hardware(catalog, b)
            net_a = find_sku(catalog, a.sku).network_gb_per_s_per_gpu * 1e9 * job.link_efficiency
            net_b = find_sku(catalog, b.sku).network_gb_per_s_per_gpu * 1e9 * job.link_efficiency
            for t in a.gpu_counts or range(1, a.gpus_per_node + 1):
                for d in b.gpu_counts or range(1, b.gpus_per_node + 1):
                    producers = t * producer_tokens_per_s_per_gpu(job.producer, ha, job.batch_tokens)
                    consumers = consumer_tokens_per_s(job, hb, d)
                    network = min(t * net_a, d * net_b) / job.bytes_per_token
                    if consumers <= 0 or network < min(producers, consumers):
                        continue
                    price = t * a.price_usd_per_gpu_hour + d * b.price_usd_per_gpu_hour
                    keep(a, b, RoleSplit(t, d), min(producers, consumers, network), price)
    return sorted(rows, key=lambda r: r[0])


@pytest.mark.parametrize("b200_price", [RTX_PRICE * 3.4, B200_PRICE_6X])
@pytest.mark.parametrize(
    ("objective", "deadline", "max_gpus"),
    [("time", None, None), ("cost", None, None), ("cost", "1d", None), ("time", None, 9), ("cost", "2d", 6)],
)
def test_the_solver_picks_what_brute_force_picks(tmp_path, b200_price, objective, deadline, max_gpus):
    problem = optimizer.load_job(_files(tmp_path, b200_price=b200_price, objective=objective, across_offers=True))
    problem = apply_overrides(problem, deadline=deadline, max_gpus=max_gpus)
    catalog = optimizer.load_catalog(str(tmp_path / "catalog.yaml"))
    rows = _brute_force(problem, catalog)
    best = optimizer.solve_roles(problem, catalog=catalog).best
    assert rows and best is not None
    _, a, b, split, hours, cost = rows[0]
    assert (best.offer, best.consumer_offer, best.plan.split) == (a, b, split)
    assert best.plan.hours == pytest.approx(hours) and best.plan.cost_usd == pytest.approx(cost)


# --------------------------------------------------------------------------- chosen when cheaper, refused when not


def test_a_split_across_offers_is_chosen_where_it_is_the_cheapest_within_the_deadline(tmp_path):
    job = _files(tmp_path, objective="cost", across_offers=True)
    r = run("solve", job, "--deadline", "1d", "--format", "json")
    assert r.exit_code == 0, r.output
    best = json.loads(r.stdout)["best"]
    target, drafter = best["roles"]
    assert best["mixed"] and best["link"]["kind"] == "network" and best["binding"] == "producers"
    assert (target["sku"], target["offer"], target["gpus"]) == ("B200", "b200", 8)
    assert (drafter["sku"], drafter["offer"], drafter["gpus"]) == ("RTX-PRO-6000", "rtx-8x", 5)
    assert best["days"] == pytest.approx(0.724, abs=0.001)
    # against the best on one node within the day, seven B200 targets and a B200 drafter: cheaper and sooner
    (tmp_path / "alone").mkdir()
    one_node = _files(tmp_path / "alone", objective="cost")
    alone = json.loads(run("solve", one_node, "--deadline", "1d", "--format", "json").stdout)
    assert not alone["best"]["mixed"] and alone["best"]["sku"] == "B200"
    assert best["cost_usd"] < alone["best"]["cost_usd"] and best["days"] < alone["best"]["days"]
    # each role's price: 8 x $9.42 + 5 x $1.57 an hour
    assert best["cost_usd"] == pytest.approx(best["hours"] * (8 * B200_PRICE_6X + 5 * RTX_PRICE))
    text = run("solve", job, "--deadline", "1d").output.splitlines()[0]
    assert "8 x B200 qwen3.6-27b on b200 + 5 x RTX-PRO-6000 drafter on rtx-8x (network link)" in text


def test_a_job_that_does_not_ask_is_answered_on_one_node(tmp_path):
    data = json.loads(run("solve", _files(tmp_path), "--format", "json").stdout)
    assert data["plans"] and not any(p["mixed"] for p in data["plans"])


# A 10 Gb/s network (1.25 GB/s a GPU, IEEE 802.3ae 10GBASE) in place of the RTX PRO 6000's 100 Gb/s: five RTX
# drafters receive 5 GB/s at most, where eight B200 targets hand on 9.2 GB/s (180k tokens/s x 51.2 kB).
SLOW_NETWORK_GB_PER_S = 1.25


def test_a_transfer_the_network_cannot_carry_needs_nvlink_and_is_refused_with_the_reason(tmp_path):
    job = _files(tmp_path, across_offers=True, rtx_network_gb_per_s=SLOW_NETWORK_GB_PER_S)
    data = json.loads(run("solve", job, "--format", "json").stdout)
    # no B200 targets feed drafters on another node: the network carries too little for any such split
    assert not any(p["mixed"] and p["roles"][0]["sku"] == "B200" for p in data["plans"])
    reasons = [r for r in data["refused"] if "needs NVLink" in r]
    assert any(
        r.startswith("8 x B200 on b200 + ") and "between the two nodes, the network carries" in r for r in reasons
    ), data["refused"]
    assert data["best"]["link"]["kind"] == "peer" and data["best"]["sku"] == "B200"


@pytest.mark.parametrize("link", ["peer", "host"])
def test_a_job_whose_roles_share_a_node_plans_none_across_offers_and_says_why(tmp_path, link):
    job = _files(tmp_path, across_offers=True, link=link)
    r = run("solve", job, "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert not any(p["mixed"] for p in data["plans"])
    assert any(f"job.roles.link is {link}" in reason for reason in data["refused"]), data["refused"]
    refused = run("check", job, "--role", "target=7xRTX-PRO-6000", "--role", "drafter=1xB200")
    assert refused.exit_code == 2 and f"job.roles.link is {link}" in refused.output


# --------------------------------------------------------------------------- check with a GPU per role


def test_check_answers_a_split_with_a_different_gpu_per_role():
    r = run("check", JOB, "--role", "target=7xRTX-PRO-6000", "--role", "drafter=1xB200")
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert "7 x RTX-PRO-6000 qwen3.6-27b on rtx-pro-6000-8x + 1 x B200 drafter on b200-3.4x (network link)" in first
    assert "3.69 days" in first and "bound by the targets" in first
    data = json.loads(
        run("check", JOB, "--role", "target=7xRTX-PRO-6000", "--role", "drafter=1xB200", "--format", "json").stdout
    )
    target, drafter = data["best"]["roles"]
    assert (target["sku"], target["gpus"], drafter["sku"], drafter["gpus"]) == ("RTX-PRO-6000", 7, "B200", 1)
    assert target["utilisation"] == 1.0 and drafter["utilisation"] < 0.25 and data["best"]["binding"] == "producers"
    # the same seven targets as on one 8-GPU RTX box: its 3.69 days, the B200 drafter dearer than an RTX one
    one_box = optimizer.check_roles(
        optimizer.load_job(JOB), [("target", 7, "RTX-PRO-6000"), ("drafter", 1, "RTX-PRO-6000")]
    )
    assert one_box.best is not None
    assert data["best"]["days"] == pytest.approx(one_box.best.plan.days)
    assert data["best"]["cost_usd"] == pytest.approx(data["best"]["hours"] * (7 * 1.57 + 5.338))
    assert "across_offers" in r.output  # the optimum shown is one node's: the job did not ask for splits across


def test_check_says_when_the_network_binds_a_split_across_offers(tmp_path):
    job = _files(tmp_path, rtx_network_gb_per_s=SLOW_NETWORK_GB_PER_S)
    r = run("check", job, "--role", "target=8xB200", "--role", "drafter=5xRTX-PRO-6000")
    assert r.exit_code == 0, r.output
    assert "bound by the link" in r.output.splitlines()[0]
    assert "the network binds it" in r.output and "needs NVLink" in r.output


def test_a_grpo_job_keeps_its_rollout_and_policy_on_one_node():
    problem = optimizer.load_job(ROOT / "problems" / "grpo-llama-3.1-8b.yaml")
    with pytest.raises(optimizer.GpuplanError, match="rollout and policy sit on one offer's node"):
        optimizer.check_roles(problem, [("target", 4, "nodus-h200"), ("drafter", 4, "nodus-b200")])


def test_across_offers_dumps_only_where_the_job_asks_and_reads_back(tmp_path):
    plain = optimizer.load_job(JOB).job.roles
    assert plain is not None and "across_offers" not in plain.model_dump(by_alias=True)
    asked = optimizer.load_job(_files(tmp_path, across_offers=True)).job.roles
    assert asked is not None and asked.model_dump(by_alias=True)["across_offers"] is True
    assert type(asked).model_validate(asked.model_dump(by_alias=True)) == asked


def _exported(tmp_path, kind: str) -> str:
    job = _files(tmp_path, across_offers=True)  # the fastest: 8 B200 targets + 5 RTX PRO 6000 drafters
    r = run("solve", job, "--export", kind)
    assert r.exit_code == 0, r.output
    return r.output


def test_a_split_across_offers_is_exported_as_a_role_on_each_node_of_its_own_gpu(tmp_path):
    (jobset,) = yaml.safe_load_all(_exported(tmp_path, "kubernetes"))
    pods = {j["name"]: j["template"]["spec"]["template"]["spec"] for j in jobset["spec"]["replicatedJobs"]}
    assert set(pods) == {"target", "drafter"}
    for role, (sku, gpus) in {"target": ("B200", "8"), "drafter": ("RTX PRO 6000", "5")}.items():
        pod = pods[role]
        (container,) = pod["containers"]
        assert container["resources"]["limits"] == {"nvidia.com/gpu": gpus}
        # no pod affinity to the other role's node and nothing of a node shared: two nodes, the network between
        assert "podAffinity" not in pod["affinity"] and "hostIPC" not in pod
        (term,) = pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        (expr,) = term["preference"]["matchExpressions"]
        assert expr["key"] == "nvidia.com/gpu.product" and sku in expr["values"][0].replace("-", " "), expr


def test_a_split_across_offers_is_a_hetjob_of_two_nodes_and_a_job_group_of_two_accelerators(tmp_path):
    script = _exported(tmp_path, "slurm")
    assert "#SBATCH hetjob" in script and "--gpus-per-node=8" in script and "--gpus-per-node=5" in script
    # no check that both components landed on one node; both roles hand off to the drafter's node
    assert "needs both roles on one node" not in script.split("#SBATCH hetjob")[-1]
    assert script.count('HANDOFF_ADDR="$other"') == 2
    assert "B200 GPUs" in script and "RTX-PRO-6000" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0
    head, *tasks = yaml.safe_load_all(_exported(tmp_path, "skypilot"))
    accelerators = {t["name"]: t["resources"]["accelerators"] for t in tasks}
    assert accelerators["target"].endswith(":8") and accelerators["drafter"].endswith(":5")
    assert accelerators["target"].split(":")[0] != accelerators["drafter"].split(":")[0]
