"""The SkyPilot export: a task YAML, one node per ``num_nodes``, torchrun over SkyPilot's SKYPILOT_* variables.

The accelerator goes out under SkyPilot's name for the SKU (its row of ``inputs.launch_names``, with a note
where the name may not be what the user wants), the cloud pinned to the plan's provider where SkyPilot knows it
(``SKYPILOT_CLOUDS``), the layout as the task's envs, a ``disk_size`` that holds the run's checkpoints
(``run.checkpoint_disk_gb``), for a spot plan a managed job (``sky jobs launch``, ``JOB_RECOVERY``), and the
plan's framework command (``command.framework_command``; ``train.py`` reading the envs where there is none). Read back by SkyPilot itself (``sky.Task.from_yaml``,
``from_yaml_config`` and its catalog's accelerator names): tests/exports/test_exports.py
test_skypilot_task_loads_with_skypilot, test_skypilot_asks_for_every_sku_by_skypilots_name,
test_skypilot_asks_for_an_h100_sxm_plan_as_h100, test_skypilot_pins_the_cloud_whose_price_the_plan_used and
test_a_plan_on_an_imported_skypilot_catalog_exports_a_task_skypilot_accepts; tests/exports/test_ecosystem.py.
"""

from __future__ import annotations

import re

from ...inputs.launch_names import SKYPILOT_SOURCE, SKYPILOT_VERSION, launch_names
from ...results import Plan
from .command import framework_command, write_files
from .common import ExportJob, Launcher, comment, header, yaml_text
from .run import BASE_DISK_GB, CHECKPOINTS_KEPT, DISK_MARGIN, DISK_ROUND_GB, checkpoint_disk_gb
from .torchrun import MASTER_PORT, layout_env, torchrun_args


def _sky_name(name: str) -> str:
    """A SkyPilot task name (sky/task.py _VALID_NAME_REGEX: ASCII letters and digits, runs of at most two of
    '._-' between them); ``gpuplan-job`` where nothing of the job's name is left."""
    words = re.findall(r"[A-Za-z0-9]+", name)
    return "-".join(words)[:63].strip("-") or "gpuplan-job"


def skypilot_accelerator(sku: str) -> str:
    """SkyPilot's name for a gpuplan SKU (its ``launch_names`` row); the SKU's own name where it has none."""
    return launch_names(sku).skypilot or sku


# SkyPilot's cloud names (sky.Task.from_yaml_config resources.cloud, skypilot 0.14.1) for the catalogs' providers:
# the plan's price is that provider's, so the task is pinned to it; a provider SkyPilot does not know (a
# reserved cluster, Nodus) leaves the cloud to SkyPilot's optimizer.
SKYPILOT_CLOUDS = frozenset({"aws", "gcp", "azure", "lambda", "runpod", "oci", "nebius"})


# A spot plan runs as a managed job (sky jobs launch), which SkyPilot recovers from preemptions on a new
# cluster: resources.job_recovery (skypilot docs/source/reference/yaml-spec.rst "job_recovery", schema in
# sky/utils/schemas.py: strategy FAILOVER or EAGER_NEXT_REGION, SkyPilot's default; max_restarts_on_errors, the
# restarts after the job's own non-zero exits, such as an NCCL timeout)
JOB_RECOVERY = {"strategy": "EAGER_NEXT_REGION", "max_restarts_on_errors": 3}


def _launch_lines(plan: Plan, job: ExportJob, disk_gb: int | None) -> list[str]:
    """How to launch the task (a managed job on spot capacity) and what its disk holds."""
    if plan.spot:
        lines = [
            f"sky jobs launch -n {_sky_name(job.name)} this.yaml: a managed job, which SkyPilot restarts on new spot "
            "capacity after a preemption (resources.job_recovery); workdir . is synced to each node",
            "a recovered job starts on a new cluster: keep checkpoints in a bucket (file_mounts: /checkpoints: "
            "{source: s3://<your-bucket>, mode: MOUNT_CACHED}) and point the framework's checkpoint folder there",
        ]
    else:
        lines = ["sky launch -c <cluster> this.yaml (workdir . is synced to each node)"]
    if disk_gb:
        lines.append(
            f"disk_size {disk_gb} GB: the image's {BASE_DISK_GB} GB and {CHECKPOINTS_KEPT} checkpoints of "
            f"{(job.checkpoint_bytes or 0) / 1e9:,.0f} GB (weights and optimizer state) with {DISK_MARGIN:.0%} to "
            f"spare, rounded up to {DISK_ROUND_GB} GB"
        )
    return lines


def write(plan: Plan, job: ExportJob) -> str:
    """A SkyPilot task: one node per ``num_nodes``, torchrun over SkyPilot's SKYPILOT_* variables."""
    run, run_lines = framework_command(plan, job)
    run_args = torchrun_args(
        "$SKYPILOT_NUM_NODES",
        "$SKYPILOT_NUM_GPUS_PER_NODE",
        "$SKYPILOT_NODE_RANK",
        "$MASTER_ADDR",
        str(MASTER_PORT),
        " \\\n  ".join(run.target),
    )
    names = launch_names(plan.sku)
    accelerator, note = names.skypilot or plan.sku, names.skypilot_note
    cloud = provider if (provider := (plan.provider or "").lower()) in SKYPILOT_CLOUDS else None
    disk_gb = checkpoint_disk_gb(job)
    task = {
        "name": _sky_name(job.name),
        "num_nodes": plan.hosts,
        "resources": {
            **({"cloud": cloud} if cloud else {}),
            "accelerators": f"{accelerator}:{plan.host_gpus}",
            "use_spot": plan.spot,
            **({"disk_size": disk_gb} if disk_gb else {}),
            **({"job_recovery": dict(JOB_RECOVERY)} if plan.spot else {}),
        },
        "workdir": ".",
        "envs": {**layout_env(plan), **run.env},
        "setup": "set -e\nif [ -f requirements.txt ]; then pip install -r requirements.txt; fi\n",
        "run": (
            'set -e\nMASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
            + write_files(run)
            + "torchrun "
            + " ".join(run_args)
            + "\n"
        ),
    }
    lines = _launch_lines(plan, job, disk_gb) + run_lines
    if cloud:
        lines.append(f"cloud: {cloud}, the provider whose price the plan used ({plan.offer})")
    if names.skypilot is None:  # no name of SkyPilot's: the SKU's own goes out
        note = (
            f"SkyPilot's catalog may not list {plan.sku} ({SKYPILOT_VERSION} has no name for it): "
            "set accelerators to the name your cloud uses (sky show-gpus)"
        )
    if accelerator != plan.sku:
        lines.append(f"accelerators: SkyPilot's name {accelerator} for {plan.sku} ({SKYPILOT_SOURCE})")
    return comment(header(plan, job.precision, lines, [note] if note else [])) + yaml_text(task)


LAUNCHER = Launcher("skypilot", write, suffix="yaml", summary="a task YAML")
