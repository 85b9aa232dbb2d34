"""The Slurm export: an ``sbatch`` script, one task per node, each running torchrun over that node's GPUs.

Most training clusters run Slurm. The script asks for the plan's hosts (``--nodes``, ``--ntasks-per-node=1``,
``--gpus-per-node``, whole nodes with ``--exclusive``), a wall-clock limit of the plan's p90 hours plus a
tenth, and on an NVLink rack (hosts of one NVLink domain, GB200/GB300) ``--segment`` so that Slurm places
every host in one rack. torchrun meets on the first host with the c10d rendezvous (PyTorch's "Multinode
training" with Slurm: no node rank to pass), and the layout goes to the script as environment variables
(``torchrun.layout_env``). Read back by tests/test_exports.py: ``bash -n`` parses it, and every ``#SBATCH``
line is an sbatch option with a value of its documented form, all before the first command (sbatch stops
reading directives there).
"""

from __future__ import annotations

import math
import re
import shlex

from ...results import Plan
from .common import ExportJob, Launcher, comment, header
from .torchrun import MASTER_PORT, layout_env

# Slurm job names: sbatch takes any text; keep it to a shell- and squeue-friendly one
_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# the wall-clock limit asked for beyond the plan's p90 hours (a job past --time is killed)
TIME_MARGIN = 0.10


def slurm_time(hours: float) -> str:
    """sbatch's --time as days-hours:minutes:seconds, rounded up to the minute."""
    minutes = max(1, math.ceil(hours * 60.0))
    days, minutes = divmod(minutes, 24 * 60)
    return f"{days}-{minutes // 60:02d}:{minutes % 60:02d}:00"


def write(plan: Plan, job: ExportJob) -> str:
    """An sbatch script for the plan: the hosts, their GPUs, the time limit, and srun + torchrun."""
    name = _NAME.sub("-", job.name).strip("-") or "gpuplan-job"
    directives = [
        f"--job-name={name}",
        f"--nodes={plan.hosts}",
        "--ntasks-per-node=1",
        f"--gpus-per-node={plan.host_gpus}",
        "--exclusive",
        f"--time={slurm_time(plan.hours.p90 * (1.0 + TIME_MARGIN))}",
    ]
    if plan.gpus_per_host:  # hosts of one NVLink domain: all of them in one segment (rack)
        directives.append(f"--segment={plan.hosts}")
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in layout_env(plan).items())
    torchrun = (
        f"torchrun --nnodes {plan.hosts} --nproc-per-node {plan.host_gpus} --rdzv-backend c10d "
        f'--rdzv-endpoint "$head_node:{MASTER_PORT}" --rdzv-id "$SLURM_JOB_ID" train.py'
    )
    notes = [f"time limit: the plan's p90 {plan.hours.p90:.1f} h plus {TIME_MARGIN:.0%}"]
    return (
        "#!/bin/bash\n"
        + comment(header(plan, job.precision, notes))
        + "".join(f"#SBATCH {d}\n" for d in directives)
        + "set -euo pipefail\n"
        + f"export {env}\n"
        + 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        + f"srun --ntasks-per-node=1 {torchrun}\n"
    )


LAUNCHER = Launcher("slurm", write, aliases=("sbatch",), suffix="sh")
