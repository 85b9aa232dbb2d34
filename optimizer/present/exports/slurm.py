"""The Slurm export: an ``sbatch`` script, one task per node, each running torchrun over that node's GPUs.

Most training clusters run Slurm. The script asks for the plan's hosts (``--nodes``, ``--ntasks-per-node=1``,
``--gpus-per-node``, whole nodes with ``--exclusive``), a wall-clock limit of the plan's p90 hours plus a
tenth, and on an NVLink rack (hosts of one NVLink domain, GB200/GB300) ``--segment`` so that Slurm places
every host in one rack. torchrun meets on the first host with the c10d rendezvous (PyTorch's "Multinode
training" with Slurm: no node rank to pass). It runs the command of the plan's framework export
(``Launcher.command``: Megatron-LM's pretrain_gpt.py with its flags, torchtitan's trainer on the TOML the
script writes in a quoted here-document), or ``train.py`` with the layout as environment variables
(``torchrun.layout_env``) where that export has no command or cannot write the plan. Output goes to
``<job>-<id>.out``; on spot capacity the job requeues (``--requeue``, output appended) and is signalled ahead
of its time limit (``--signal``) to save. Read back by tests/exports/test_exports.py: ``bash -n`` parses it, and every
``#SBATCH`` line is an sbatch option with a value of its documented form, all before the first command
(sbatch stops reading directives there); tests/exports/test_exports_run.py (Megatron's parser on its command, the
here-document, spot).
"""

from __future__ import annotations

import math
import re

from ...results import Plan
from .command import export_env, framework_command, write_files
from .common import ExportJob, Launcher, comment, header
from .run import CHECKPOINT_GB_PER_S_PER_NODE
from .torchrun import MASTER_PORT

# Slurm job names: sbatch takes any text; keep it to a shell- and squeue-friendly one
_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# the wall-clock limit asked for beyond the plan's p90 hours (a job past --time is killed)
TIME_MARGIN = 0.10
# the least warning (s) before the time limit a spot job is signalled with, to write its last checkpoint
SIGNAL_LEAD_S = 300


def slurm_time(hours: float) -> str:
    """sbatch's --time as days-hours:minutes:seconds, rounded up to the minute."""
    minutes = max(1, math.ceil(hours * 60.0))
    days, minutes = divmod(minutes, 24 * 60)
    return f"{days}-{minutes // 60:02d}:{minutes % 60:02d}:00"


def preemption_directives(plan: Plan, job: ExportJob) -> list[str]:
    """On spot or preemptible capacity: requeue the job when it is preempted (its checkpoints resume it),
    append to its output across runs, and signal it (SIGTERM, on which Megatron-LM's --exit-signal-handler
    saves) ahead of the time limit by twice the time a checkpoint takes to write, at least ``SIGNAL_LEAD_S``."""
    if not plan.spot:
        return []
    write_s = (job.checkpoint_bytes or 0.0) / (CHECKPOINT_GB_PER_S_PER_NODE * 1e9 * plan.hosts)
    return ["--requeue", "--open-mode=append", f"--signal=TERM@{max(SIGNAL_LEAD_S, math.ceil(2.0 * write_s))}"]


def write(plan: Plan, job: ExportJob) -> str:
    """An sbatch script for the plan: the hosts, their GPUs, the time limit, output and preemption, and srun +
    torchrun running the plan's framework command."""
    name = _NAME.sub("-", job.name).strip("-") or "gpuplan-job"
    directives = [
        f"--job-name={name}",
        f"--nodes={plan.hosts}",
        "--ntasks-per-node=1",
        f"--gpus-per-node={plan.host_gpus}",
        "--exclusive",
        f"--time={slurm_time(plan.hours.p90 * (1.0 + TIME_MARGIN))}",
        f"--output={name}-%j.out",
    ]
    if plan.gpus_per_host:  # hosts of one NVLink domain: all of them in one segment (rack)
        directives.append(f"--segment={plan.hosts}")
    directives += preemption_directives(plan, job)
    run, lines = framework_command(plan, job)
    torchrun = (
        f"torchrun --nnodes {plan.hosts} --nproc-per-node {plan.host_gpus} --rdzv-backend c10d "
        f'--rdzv-endpoint "$head_node:{MASTER_PORT}" --rdzv-id "$SLURM_JOB_ID" ' + " \\\n  ".join(run.target)
    )
    notes = [f"time limit: the plan's p90 {plan.hours.p90:.1f} h plus {TIME_MARGIN:.0%}"]
    if plan.spot:
        notes.append("spot capacity: a preempted job is requeued and resumes from its last checkpoint")
    files, env = write_files(run), export_env(run)
    return (
        "#!/bin/bash\n"
        + comment(header(plan, job.precision, lines, notes))
        + "".join(f"#SBATCH {d}\n" for d in directives)
        + "set -euo pipefail\n"
        + files
        + env
        + 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        + f"srun --ntasks-per-node=1 {torchrun}\n"
    )


LAUNCHER = Launcher("slurm", write, aliases=("sbatch",), suffix="sh", summary="an sbatch script")
