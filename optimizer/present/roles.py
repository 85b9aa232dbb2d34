"""A role job's answer as a table and as data (issue 52, docs/roles.md): the split (GPUs per role), each stage's
rate and how busy it is, what binds (producers, consumers or the link), hours and cost.

The first line is the headline (``--quiet`` prints it alone): the chosen plan, or why none runs. ``checked``
reads ``gpuplan check``'s role flags into the API's request (the CLI layer holds no role code but the two
calls: cli/plan.py's check and solve), ``SHOWN`` is the printer and the data the CLI's answer takes. ``--export``
(``Outputs``) writes the chosen or checked split's launch per role (exports/roles.py: a JobSet, a Slurm
heterogeneous job, a SkyPilot Job Group; a GRPO job's NeMo RL or verl launch, exports/nemo_rl.py and verl.py,
``launch_text``), to ``--out`` or in place of the answer (``answered``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import ArgumentError
from ..inputs.catalog import find_sku, host_gpus, vendor_in
from ..inputs.files import load_job, problem_catalog
from ..inputs.hub import is_repo_id
from ..inputs.launch_names import vendor_of
from ..inputs.overrides import apply_overrides
from ..inputs.roles import parse_role_flag, role_names
from ..inputs.schema import Catalog, Problem
from ..planning.roles import RolePlan
from ..solver.roles import OfferPlan, RolesResult, check_roles, one_model_only, solve_roles
from . import output
from .exports import find_launcher, unknown_kind
from .exports.grpo import GrpoExport, GrpoPlacement, GrpoSettings
from .exports.nemo_rl import write_nemo_rl
from .exports.roles import GRPO_KINDS, ROLE_KINDS, PipelineExport, export_roles, no_role_meaning, role_launches
from .exports.run import torchtitan_model
from .exports.verl import write_verl


def _binding(result: RolesResult, plan: RolePlan) -> str:
    """What binds, by the workload's role names: 'the targets (qwen3.6-27b)', 'the teacher (qwen3-32b)', 'the
    policy (llama-3.1-8b)', 'the link'."""
    producer, consumer = result.roles
    first, second = ("targets", "drafter") if result.workload == "drafter" else role_names(result.workload)

    def named(role: str, model: str) -> str:
        return role if model == role else f"{role} ({model})"

    return {"producers": named(first, producer), "consumers": named(second, consumer), "link": "link"}[plan.binding]


def _bound(result: RolesResult, plan: RolePlan) -> str:
    """What binds in a table cell: the role's name, or the link."""
    return {"producers": result.roles[0], "consumers": result.roles[1], "link": "link"}[plan.binding]


def plan_line(result: RolesResult, chosen: OfferPlan) -> str:
    """One plan in a sentence: the split, its rate, what binds, days and cost."""
    p = chosen.plan
    producer, consumer = result.roles
    if chosen.consumer_offer is not None:  # each role on its own offer's node
        split = (
            f"{p.split.producers} x {p.sku} {producer} on {chosen.offer} + {p.split.consumers} x "
            f"{p.consumer_sku_name} {consumer} on {chosen.consumer_offer}"
        )
        return (
            f"{split} ({p.link} link): {p.tokens_per_s:,.0f} tokens/s, {p.days:,.2f} days, ${p.cost_usd:,.0f}; "
            f"bound by the {_binding(result, p)}"
        )
    if p.rollout_tp is not None and p.rollout_tp > 1:  # a GRPO rollout's engines span GPUs (tensor parallel)
        producer = f"{producer} (engines of {p.rollout_tp} GPUs)"
    split = (
        f"{p.split.gpus} x {p.sku}, {producer} and {consumer} colocated"
        if p.split.shared
        else f"{p.split.producers} x {p.sku} {producer} + {p.split.consumers} x {p.sku} {consumer}"
    )
    where = f"{p.nodes} nodes of {chosen.offer}" if p.nodes > 1 else chosen.offer
    return (
        f"{split} on {where} ({p.link} link): {p.tokens_per_s:,.0f} tokens/s, {p.days:,.2f} days, "
        f"${p.cost_usd:,.0f}; bound by the {_binding(result, p)}"
    )


def headline(result: RolesResult, checked: bool = False) -> str:
    if result.best is None:
        return f"No plan for {result.job}: " + "; ".join(result.refused)
    if checked:
        return f"Checked {result.job}: {plan_line(result, result.best)}"
    by = "fastest" if result.objective == "time" else "cheapest"
    return f"The {by} plan for {result.job}: {plan_line(result, result.best)}"


def stages_line(result: RolesResult, p: RolePlan) -> str:
    """Each stage's rate and how busy it is."""
    producer, consumer = result.roles
    r = p.rate
    return (
        f"  {producer} {r.producer_tokens_per_s:,.0f} tokens/s ({r.producer_tokens_per_s / p.split.producers:,.0f} a "
        f"GPU, {r.utilisation('producers'):.0%} busy); {consumer} {r.consumer_tokens_per_s:,.0f} "
        f"({r.utilisation('consumers'):.0%} busy); link {r.link_tokens_per_s:,.0f} ({r.utilisation('link'):.0%} busy)"
    )


def print_roles(result: RolesResult, console: Console, headroom: Any = None) -> None:
    """The answer: headline, the chosen plan's stages, every split weighed (solve), what was left out."""
    checked = result.checked
    console.print(Text(headline(result, checked), style="bold"))
    if result.best is not None:
        console.print(stages_line(result, result.best.plan))
    for note in result.notes:
        console.print(f"  {note}")
    if checked and result.optimum is not None and result.best is not None:
        if result.optimum == result.best:  # the same split on the same offers
            console.print("  this is the best plan under the job's constraints")
        else:
            console.print(f"  the best plan under the job's constraints: {plan_line(result, result.optimum)}")
    if not checked and result.plans:
        producer, consumer = result.roles
        # the pipeline's rate in the tokens the workload counts: a drafter's and a distillation's, those the
        # target (teacher) reads; a GRPO step's, prompt + response of every sample
        unit = "tokens/s: prompt + response, every sample" if result.workload == "grpo" else "target tokens/s"
        table = Table(title=f"Each offer and GPU count's best split (in {unit})", title_justify="left")
        columns = ("GPUs", f"{producer} GPUs", f"{consumer} GPUs", "tokens/s", f"{producer} rate", f"{consumer} rate")
        for column in ("offer", "GPU", *columns, "link rate"):
            table.add_column(column, justify="left" if column in ("offer", "GPU") else "right")
        table.add_column("binds")
        table.add_column("days", justify="right")
        table.add_column("cost", justify="right")
        for row in result.plans:
            p = row.plan
            r = p.rate
            table.add_row(
                _both(row.offer, row.consumer_offer) + (" *" if row == result.best else ""),
                _both(p.sku, p.consumer_sku),
                str(p.split.gpus),
                str(p.split.producers),
                str(p.split.consumers),
                f"{p.tokens_per_s:,.0f}",
                f"{r.producer_tokens_per_s:,.0f}",
                f"{r.consumer_tokens_per_s:,.0f}",
                f"{r.link_tokens_per_s:,.0f}",
                _bound(result, p),
                f"{p.days:,.2f}",
                f"${p.cost_usd:,.0f}",
            )
        console.print(table)
    for reason in result.refused if result.best is not None else ():
        console.print(f"  left out: {reason}")


def _both(producers: str, consumers: str | None) -> str:
    """A table cell or a plan's field naming both roles' offers or SKUs where they differ: 'a + b'."""
    return producers if consumers is None else f"{producers} + {consumers}"


def _plan_data(result: RolesResult, row: OfferPlan) -> dict:
    p = row.plan
    producer, consumer = result.roles
    r = p.rate
    consumer_offer = row.consumer_offer or row.offer
    consumer_price = p.consumer_price_usd_per_gpu_hour or p.price_usd_per_gpu_hour
    return {
        "offer": _both(row.offer, row.consumer_offer),
        "sku": _both(p.sku, p.consumer_sku),
        "gpus": p.split.gpus,
        "nodes": p.nodes,  # whole nodes a GRPO split spans (1: one node, or one per role where mixed)
        "mixed": p.mixed,  # the roles on two offers' nodes, each its own SKU and price
        "roles": [
            {
                "role": producer,
                "mode": "forward",
                "gpus": p.split.producers,
                "tokens_per_s": r.producer_tokens_per_s,
                "utilisation": r.utilisation("producers"),
                "offer": row.offer,
                "sku": p.sku,
                "price_usd_per_gpu_hour": p.price_usd_per_gpu_hour,
                # a GRPO rollout's GPUs an engine (its tensor parallel size: the job's, or the smallest that holds
                # the policy on this GPU); null for a drafter's or a teacher's forward role
                "engine_gpus": p.rollout_tp,
            },
            {
                "role": consumer,
                "mode": "train",
                "gpus": p.split.consumers,
                "tokens_per_s": r.consumer_tokens_per_s,
                "utilisation": r.utilisation("consumers"),
                "offer": consumer_offer,
                "sku": p.consumer_sku_name,
                "price_usd_per_gpu_hour": consumer_price,
            },
        ],  # fmt: skip
        "link": {"kind": p.link, "tokens_per_s": r.link_tokens_per_s, "utilisation": r.utilisation("link")},
        "binding": p.binding,
        "tokens_per_s": p.tokens_per_s,
        "hours": p.hours,
        "days": p.days,
        "cost_usd": p.cost_usd,
        "price_usd_per_gpu_hour": p.price_usd_per_gpu_hour,
    }


def roles_data(result: RolesResult) -> dict:
    """The answer as JSON-ready data: the chosen plan's split (``strategy.roles``), every split weighed."""
    return {
        "job": result.job,
        "objective": result.objective,
        "headline": headline(result, result.checked),
        "best": _plan_data(result, result.best) if result.best else None,
        "plans": [_plan_data(result, row) for row in result.plans],
        "optimum": _plan_data(result, result.optimum) if result.optimum else None,
        "refused": list(result.refused),
        "notes": list(result.notes),
    }


SHOWN = (print_roles, roles_data)


def checked(
    job: Path | None,
    role: list[str] | None,
    sku: str | None,
    gpus: int | None,
    catalog: str | None,
    deadline: str | None = None,
    budget: str | None = None,
    outputs: Outputs | None = None,
) -> Answered:
    """``gpuplan check JOB --role target=3xRTX-PRO-6000 --role drafter=1xRTX-PRO-6000``: the split checked, with
    the problem and catalog it was checked on; without --role, --sku and --gpus are what is missing."""
    if not role:
        missing = " and ".join(f for f, v in (("--sku", sku), ("--gpus", gpus)) if v is None)
        raise ArgumentError(
            f"{missing} missing: check takes a GPU and a count (--sku B200 --gpus 8), or for a job with roles: "
            "each role's GPUs (--role target=3xRTX-PRO-6000 --role drafter=1xRTX-PRO-6000)",
            field="sku" if sku is None else "gpus",
        )
    if sku is not None or gpus is not None:
        raise ArgumentError("--role gives each role's GPUs: drop --sku and --gpus", field="role")
    outputs = _checked_outputs(outputs)
    if job is None:
        raise ArgumentError("--role splits a job file's roles: give the job file (JOB)", field="job")
    problem = apply_overrides(load_job(job), deadline=deadline, budget=budget)
    if problem.job.roles is None:
        raise ArgumentError(
            f"{job} has no roles: section, so there is nothing to split; check it with --sku and --gpus, or add "
            "job.roles (docs/roles.md)",
            field="role",
        )
    requests = [parse_role_flag(text, problem.job.roles.workload) for text in role]  # its workload's role names
    if outputs.export_kind is not None:
        refuse_grpo_export(problem, outputs.export_kind)
    cat = problem_catalog(problem, catalog)
    if outputs.export_kind and outputs.out is not None:  # no input overwritten by the launch file
        output.check_destination(outputs.out, "out", inputs=[job, *cat.source_files], what="launcher config")
    return Answered(check_roles(problem, requests, catalog=cat), problem, cat, outputs)


@dataclass(frozen=True)
class Outputs:
    """What a role command writes beside its answer: ``export_kind`` (--export, None: none) to ``out`` (a file
    already checked by the CLI, None: standard output, in place of the answer); ``other``: --plot or --report,
    which a role job does not draw yet."""

    export_kind: str | None = None
    out: Path | None = None
    other: str | None = None  # the flag of a chart or report asked for ("plot", "report")


@dataclass(frozen=True)
class Answered:
    """A role command's answer, the problem and catalog it was reached on, and what to write beside it."""

    result: RolesResult
    problem: Problem
    catalog: Catalog
    outputs: Outputs


def _checked_outputs(outputs: Outputs | None) -> Outputs:
    """The outputs a role job writes, refused before any work where it has none: charts and reports (not drawn
    yet), and an export kind with no per-role meaning (a framework's config for one model on all the GPUs)."""
    outputs = outputs or Outputs()
    if outputs.other:
        raise ArgumentError(
            "a job with roles is answered as text, JSON or YAML, or written as a launch per role (--export "
            "kubernetes, slurm or skypilot; a GRPO job's nemo-rl or verl): its charts and reports are not drawn yet "
            f"(docs/roles.md); drop --{outputs.other}",
            field=outputs.other,
        )
    if outputs.export_kind is not None:
        launcher = find_launcher(outputs.export_kind)
        if launcher is None:
            raise ArgumentError(unknown_kind(outputs.export_kind), field="export")
        if launcher.kind not in ROLE_KINDS + GRPO_KINDS:
            raise ArgumentError(no_role_meaning(outputs.export_kind), field="export")
    return outputs


def solved(problem: Problem, catalog: Catalog, outputs: Outputs | None = None) -> Answered:
    """``gpuplan solve`` on a job with roles: the API's answer (``solve_roles``)."""
    outputs = _checked_outputs(outputs)
    if outputs.export_kind is not None:
        refuse_grpo_export(problem, outputs.export_kind)
    return Answered(solve_roles(problem, catalog=catalog), problem, catalog, outputs)


def refuse_grpo_export(problem: Problem, kind: str) -> None:
    """An export kind the job's workload has not, refused before any work (the CLI's --export, the service's POST
    /v1/export): a GRPO job runs as one RL framework's launch (``GRPO_KINDS``: nemo-rl), not a launch per role, and
    the other jobs with roles have no RL framework's launch."""
    roles = problem.job.roles
    launcher = find_launcher(kind)
    if roles is None or launcher is None:
        return
    grpo = roles.workload == "grpo"
    if grpo and launcher.kind not in GRPO_KINDS:
        raise ArgumentError(
            f"{problem.job.name} is a GRPO job: it runs as one RL framework's launch (NeMo RL, verl, OpenRLHF: the "
            "rollout engine and the trainer in one Ray job, colocated on the same GPUs or on separate ones), not as "
            f"two independent launches, which --export {kind} writes. --export nemo-rl writes NeMo RL's GRPO launch "
            "with the plan's GPUs, nodes and rollout/train split (cluster.num_nodes, cluster.gpus_per_node, "
            "policy.generation.colocated) and its batch, --export verl verl's (trainer.nnodes, "
            "trainer.n_gpus_per_node, its hybrid engine or one-step-off rollout); choose one, or drop --export",
            field="export",
        )
    if not grpo and launcher.kind in GRPO_KINDS:
        raise ArgumentError(
            f"--export {kind} writes a GRPO job's launch (job.roles.workload: grpo), and {problem.job.name} is a "
            f"{roles.workload} job, whose roles run as two launches: choose kubernetes (a JobSet), slurm (a "
            "heterogeneous job) or skypilot (a Job Group) (docs/roles.md)",
            field="export",
        )


def _nothing_to_export(result: RolesResult) -> ArgumentError:
    return ArgumentError(
        f"no plan for {result.job}, so there is nothing to export: " + "; ".join(result.refused or ("no split runs",)),
        field="export",
    )


def _hub_id(problem: Problem) -> str | None:
    """The policy's Hugging Face model: the job's Hub id, or its preset's (exports/run.py's table); None: unknown."""
    model = problem.job.model
    if model.name and is_repo_id(model.name):
        return model.name
    known = torchtitan_model(model)
    return known.hub if known is not None else None


def grpo_export(done: Answered) -> GrpoExport:
    """The chosen (solve) or checked (check) GRPO split as the nemo-rl export takes it: its hosts (a GB200 rack's
    trays), the rollout's and the policy's GPUs, and the job's recipe."""
    result, problem, catalog = done.result, done.problem, done.catalog
    roles = problem.job.roles
    if result.best is None or roles is None or roles.rollout is None:
        raise _nothing_to_export(result)
    chosen, p = result.best, result.best.plan
    offer = next(o for o in catalog.offers if o.name == chosen.offer)
    host = host_gpus(offer.gpus_per_node, find_sku(catalog, p.sku).gpus_per_host)
    gpus = p.split.gpus
    colocated = p.split.shared
    placement = GrpoPlacement(
        hosts=max(1, gpus // host) if gpus > host else 1,
        gpus_per_host=host if gpus > host else gpus,
        rollout_gpus=p.split.producers,
        policy_gpus=p.split.consumers,
        colocated=colocated,
        asynchronous=roles.asynchronous and not colocated,
    )
    r, job = roles.rollout, problem.job
    seq_tokens = float(r.prompt_tokens) + float(r.response_tokens)
    sequences = r.prompts_per_step * r.samples_per_prompt
    longest = float(r.prompt_tokens) + float(r.max_response_tokens) if r.max_response_tokens else float(job.seq_len)
    recipe = GrpoSettings(
        model_name=_hub_id(problem),
        params=float(job.model.params),
        prompts_per_step=r.prompts_per_step,
        samples_per_prompt=r.samples_per_prompt,
        max_total_sequence_length=math.ceil(longest),
        max_new_tokens=math.ceil(float(r.max_response_tokens)) if r.max_response_tokens else None,
        rollout_tp=p.rollout_tp or 1,  # the plan's engine size (the job's, or the smallest that holds it)
        memory_utilization=r.memory_utilization,
        max_num_seqs=r.max_num_seqs,
        micro_batch=roles.micro_batch,
        forward_passes=roles.forward_passes,
        steps=r.steps or math.ceil(float(job.total_tokens) / (sequences * seq_tokens)),
        precision=job.precision,
        method=job.method,
        optimizer=job.optimizer,
    )
    return GrpoExport(
        job=result.job,
        sku=p.sku,
        offer=chosen.offer,
        placement=placement,
        recipe=recipe,
        tokens_per_s=p.tokens_per_s,
        hours=p.hours,
        cost_usd=p.cost_usd,
        binding={"producers": "rollout", "consumers": "policy's training", "link": "weight sync"}[p.binding],
    )


def launch_text(done: Answered, kind: str) -> str:
    """The launch ``kind`` (a launcher's kind, aliases resolved) writes for the answer: a GRPO job's NeMo RL launch
    (``GRPO_KINDS``), or a launch per role (exports/roles.py)."""
    if kind in GRPO_KINDS:
        return {"nemo-rl": write_nemo_rl, "verl": write_verl}[kind](grpo_export(done))
    return export_roles(pipeline_export(done), kind)


def pipeline_export(done: Answered) -> PipelineExport:
    """The chosen (solve) or checked (check) split as its exports take it; no plan: nothing to export."""
    result, problem, catalog = done.result, done.problem, done.catalog
    roles = problem.job.roles
    if result.best is None or roles is None:
        raise _nothing_to_export(result)
    chosen, p = result.best, result.best.plan
    first, consumers = role_names(roles.workload)
    producers = "targets" if first == "target" else first  # as the answer says what binds
    offer = next((o for o in catalog.offers if o.name == chosen.offer), None)
    consumer_sku = p.consumer_sku if chosen.consumer_offer is not None else None
    target, drafter = role_launches(roles.target.name, problem.job.model.name or roles.drafter.name,
                                    p.split.producers, p.split.consumers)  # fmt: skip
    return PipelineExport(
        job=result.job,
        sku=p.sku,
        vendor=vendor_in(catalog, p.sku) or vendor_of(p.sku),
        offer=chosen.offer,
        provider=offer.provider if offer is not None else None,
        link=p.link,
        producer=target,
        consumer=drafter,
        tokens_per_s=p.tokens_per_s,
        hours=p.hours,
        cost_usd=p.cost_usd,
        binding={"producers": producers, "consumers": consumers, "link": "link"}[p.binding],
        batch_tokens=int(float(roles.batch_tokens or problem.job.seq_len)),
        bytes_per_token=roles.bytes_per_token,
        handed=roles.passes.words,
        names=role_names(roles.workload),
        consumer_sku=consumer_sku,
        consumer_vendor=(vendor_in(catalog, consumer_sku) or vendor_of(consumer_sku)) if consumer_sku else None,
        consumer_offer=chosen.consumer_offer,
    )


def answered(answer: Callable[..., None], done: Answered, fmt: Any) -> None:
    """The CLI's answer (``answer``: cli/plan.py's, with ``SHOWN``) to a role command, and its launch per role where
    --export asks: written to --out first (said on stderr), or printed in place of the answer."""
    kind = done.outputs.export_kind
    if kind is None:
        return answer(done.result, done.problem, fmt, *SHOWN)
    launcher = find_launcher(kind)
    assert launcher is not None  # _checked_outputs refused any other
    text = launch_text(done, launcher.kind)
    if done.outputs.out is None:
        typer.echo(text, nl=False)
        return None
    output.write_text(done.outputs.out, text, "out")
    with contextlib.suppress(OSError):
        typer.echo(f"wrote {kind} config to {output.shown(done.outputs.out)}", err=True)
    return answer(done.result, done.problem, fmt, *SHOWN)


def one_model(problem: Problem, command: str) -> None:
    """``check --sku --gpus`` and ``options`` plan one model on all the GPUs: refused on a job with roles
    (solver/roles.py one_model_only)."""
    one_model_only(problem, command)
