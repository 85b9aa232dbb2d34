"""The torchrun export (a command line), and the torchrun invocation the other launchers run.

``write``: the layout exported as environment variables for the script (``layout_env``: launchers carry no
parallelism; skypilot and kubernetes set the same variables), then ``torchrun ... train.py`` over the plan's
hosts. ``torchrun_args`` / ``torchrun_line``: torchrun's arguments, which skypilot, kubernetes, megatron and
torchtitan launch with; ``MASTER_PORT``, the rendezvous port (accelerate's main_process_port too). Read back
by tests/exports/test_exports.py test_torchrun_and_layout_environment and test_an_nvl72_rack_launches_on_its_hosts_of_
four (shlex, as a shell splits it) and tests/exports/test_ecosystem.py test_torchrun_command.
"""

from __future__ import annotations

import shlex

from ...results import Plan
from .common import ExportJob, Launcher, comment, ep, header

MASTER_PORT = 29500


def layout_env(plan: Plan) -> dict[str, str]:
    """The layout as environment variables for a training script (launchers carry no parallelism)."""
    s = plan.strategy
    return {
        "TP": str(s.tp),
        "PP": str(s.pp),
        "DP": str(s.dp),
        "CP": str(s.cp),
        "EP": str(ep(s)),
        "ZERO_STAGE": str(s.zero_stage),
        "SHARD_DEGREE": str(s.shard_degree),
        "MICRO_BATCH": str(s.micro_batch),
        "GRAD_ACCUM": str(s.grad_accum),
        "GLOBAL_BATCH": str(s.global_batch),
        "RECOMPUTE": s.recompute,
        "RECOMPUTE_LAYERS": str(s.partial_layers or 0),  # under full recompute, of each stage (0: all)
        "VIRTUAL_STAGES": str(s.virtual_stages),
        "OFFLOAD": s.offload,
    }


def torchrun_args(nodes: str, per_node: str, rank: str, master: str, port: str, script: str) -> list[str]:
    """torchrun's arguments, one token each (a container's ``args``; joined by spaces, a command line)."""
    return [
        *("--nnodes", nodes),
        *("--nproc-per-node", per_node),
        *("--node-rank", rank),
        *("--master-addr", master),
        *("--master-port", port),
        *script.split(" "),
    ]


def torchrun_line(plan: Plan, script: str) -> str:
    """``torchrun ... script`` over the plan's hosts: on one, rendezvous at localhost; on several, at
    $MASTER_ADDR, each host's rank $NODE_RANK (the user sets both)."""
    multi = plan.hosts > 1
    args = torchrun_args(
        str(plan.hosts),
        str(plan.host_gpus),
        "$NODE_RANK" if multi else "0",
        "$MASTER_ADDR" if multi else "localhost",
        str(MASTER_PORT),
        script,
    )
    return "torchrun " + " ".join(args)


def write(plan: Plan, job: ExportJob) -> str:
    """A torchrun command line, the layout exported as environment variables for the script."""
    where = (
        [f"run on each of the {plan.hosts} nodes with NODE_RANK (0-{plan.hosts - 1}) and MASTER_ADDR (node 0) set"]
        if plan.hosts > 1
        else []
    )
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in layout_env(plan).items())
    return comment(header(plan, job.precision, where)) + f"export {env}\n" + torchrun_line(plan, "train.py") + "\n"


LAUNCHER = Launcher("torchrun", write, suffix="sh", summary="a command line")
