"""A hardware row's interruption rate and checkpoint time: the inputs of ``physics.reliability``."""

from __future__ import annotations

from ..physics import reliability
from .context import HardwareRow, JobContext


def interruption_rate(ctx: JobContext, row: HardwareRow) -> float:
    """Failures and (on spot rows) preemptions per hour for the whole job."""
    return float(
        reliability.interruption_rate_per_hour(
            row.gpus, row.nodes, ctx.assumptions.failure_rate_per_gpu_hour, row.preemptions_per_node_hour
        )
    )


def checkpoint_hours(ctx: JobContext, row: HardwareRow) -> float:
    """Time to write a checkpoint: bf16 weights plus optimizer state, spread over the hosts' storage links (a
    host is the node, or an NVL72 rack's compute tray: each has its own)."""
    train = ctx.train
    state = (
        train.weights_total(ctx.shape.params)
        - 2.0 * train.teacher_params
        + train.optimizer_bytes * train.trainable_params
    )
    hosts = row.gpus // row.gpus_per_host
    return state / (ctx.assumptions.checkpoint_gb_per_s_per_node * 1e9 * hosts) / 3600.0
