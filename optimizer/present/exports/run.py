"""The run an export starts: its length in optimizer steps, its checkpoints, its model and its placeholders.

A plan carries the layout and batch; the run needs more (issue 51): how many optimizer steps (the job's
tokens over the tokens one step takes, rounded up), how often to checkpoint (the interval the reliability
model assumes, in steps), how much disk a checkpoint takes, which model (torchtitan's name and flavour for
a bundled preset), and where a fine-tune's pretrained weights, the data and the checkpoints live. What the
user must fill in is a named placeholder (``PRETRAINED``, ``DATA``, ``HF_ASSETS``), written the same way in
every export. The job's facts these read (tokens, model, checkpoint bytes, fine-tune or not, MoE
dispatcher) are ``common.ExportJob``'s, filled by ``common.job_facts``.
"""

from __future__ import annotations

import dataclasses
import math

from ...inputs.schema import Assumptions, ModelSpec, Offer
from ...physics import reliability
from ...results import Plan
from .common import DEFAULT_SEQ_LEN, ExportJob

# Placeholders the user fills in once (each export names them in its header): absolute paths, as torchtitan
# 0.3.0 requires of checkpoint.initial_load_path (an absolute path or a remote URI), and plain words a shell
# takes unquoted
PRETRAINED = "/path/to/PRETRAINED_CHECKPOINT"  # the weights a fine-tune starts from
DATA = "/path/to/DATA_PATH"  # the training data
HF_ASSETS = "/path/to/HF_ASSETS_DIR"  # the model's Hugging Face folder (tokenizer, config.json)
CHECKPOINT_DIR = "checkpoints"  # where the run's own checkpoints go (relative to the working directory)

# The reliability model's defaults (Assumptions' and Offer's fields): an export receives the job, not the
# problem's assumptions or the offer, so it checkpoints on these; a job whose assumptions differ sets the
# interval by hand (the header says which figures were used).
FAILURE_RATE_PER_GPU_HOUR = Assumptions.model_fields["failure_rate_per_gpu_hour"].default
CHECKPOINT_GB_PER_S_PER_NODE = Assumptions.model_fields["checkpoint_gb_per_s_per_node"].default
SPOT_PREEMPTIONS_PER_NODE_HOUR = Offer.model_fields["spot_preemptions_per_node_hour"].default

# Disk for a run's checkpoints: two checkpoints (the last good one and the one being written), a quarter more
# for the dataloader, scheduler and file-system slack, above the machine image's own disk (SkyPilot's default
# disk_size, sky/resources.py _DEFAULT_DISK_SIZE_GB = 256)
CHECKPOINTS_KEPT = 2
DISK_MARGIN = 0.25
BASE_DISK_GB = 256
DISK_ROUND_GB = 100
# The interval where the checkpoint's size is unknown (a job given only by name): torchtitan's default
# (job_config.py Checkpoint.interval), said in the header as a figure to set
FALLBACK_INTERVAL_STEPS = 500


def train_steps(plan: Plan, job: ExportJob) -> int | None:
    """The plan's optimizer steps: the job's tokens / (global batch x sequence length), rounded up; None
    without the job's tokens."""
    if not job.tokens:
        return None
    per_step = plan.strategy.global_batch * (job.seq_len or DEFAULT_SEQ_LEN)
    return max(1, math.ceil(job.tokens / per_step))


def checkpoint_interval_steps(plan: Plan, job: ExportJob) -> int:
    """Steps between checkpoints: Young's optimum interval sqrt(2 delta M) (``physics.reliability``, as the
    plan's time assumes), delta the time to write the job's weights and optimizer state over the hosts'
    storage links, M the mean time between failures (and preemptions on spot); at least 1 step, at most the
    run's steps."""
    steps = train_steps(plan, job)
    if not job.checkpoint_bytes or plan.step_s <= 0:
        return min(FALLBACK_INTERVAL_STEPS, steps or FALLBACK_INTERVAL_STEPS)
    rate = float(
        reliability.interruption_rate_per_hour(
            plan.gpus,
            plan.nodes,
            FAILURE_RATE_PER_GPU_HOUR,
            SPOT_PREEMPTIONS_PER_NODE_HOUR if plan.spot else 0.0,
        )
    )
    checkpoint_h = job.checkpoint_bytes / (CHECKPOINT_GB_PER_S_PER_NODE * 1e9 * plan.hosts) / 3600.0
    tau_h = float(reliability.checkpoint_interval_h(rate, checkpoint_h))
    if not math.isfinite(tau_h):
        return steps or 1
    interval = max(1, int(tau_h * 3600.0 / plan.step_s))
    return min(interval, steps) if steps else interval


def interval_note(plan: Plan, job: ExportJob) -> str:
    """The header line saying how the checkpoint interval was chosen."""
    if not job.checkpoint_bytes:
        return f"checkpoint every {checkpoint_interval_steps(plan, job)} steps: the job's checkpoint size is unknown, set it"
    spot = f" and {SPOT_PREEMPTIONS_PER_NODE_HOUR} preemptions per node-hour (spot)" if plan.spot else ""
    return (
        f"checkpoint every {checkpoint_interval_steps(plan, job)} steps: Young's interval for "
        f"{FAILURE_RATE_PER_GPU_HOUR:.3g} failures per GPU-hour{spot}, a checkpoint of "
        f"{(job.checkpoint_bytes or 0) / 1e9:,.0f} GB written at {CHECKPOINT_GB_PER_S_PER_NODE:g} GB/s per host "
        f"and a step of {plan.step_s:.2f} s (gpuplan's default assumptions)"
    )


def steps_note(plan: Plan, job: ExportJob) -> str:
    """The header line saying where the step count comes from."""
    steps = train_steps(plan, job)
    if steps is None:
        return "the job's tokens are unknown: set the number of training steps"
    tokens = plan.strategy.global_batch * (job.seq_len or DEFAULT_SEQ_LEN)
    return f"{steps:,} optimizer steps = {job.tokens:,.0f} tokens / {tokens:,} tokens per step, rounded up"


def checkpoint_disk_gb(job: ExportJob) -> int | None:
    """Disk for the run (GB): the machine's own plus ``CHECKPOINTS_KEPT`` checkpoints of weights and
    optimizer state with ``DISK_MARGIN``, rounded up to ``DISK_ROUND_GB``; None without the checkpoint's size."""
    if not job.checkpoint_bytes:
        return None
    need = BASE_DISK_GB + CHECKPOINTS_KEPT * job.checkpoint_bytes / 1e9 * (1.0 + DISK_MARGIN)
    return int(math.ceil(need / DISK_ROUND_GB) * DISK_ROUND_GB)


@dataclasses.dataclass(frozen=True)
class TorchtitanModel:
    """A model torchtitan defines: its train spec (``--model.name``), flavour (``--model.flavor``), the shape
    the flavour has (checked against the job's) and the Hugging Face repository of its weights."""

    name: str
    flavor: str
    layers: int
    hidden: int
    hub: str


# gpuplan's presets (catalogs: gpuplan models) as torchtitan's models and flavours: pytorch/torchtitan v0.2.2
# (73a0e69) torchtitan/models/__init__.py _supported_models and each model's __init__.py flavour table
# (llama3_configs, qwen3_configs, gpt_oss_configs, deepseekv3_configs); main (b5bcd76) names the same configs
# as functions, e.g. torchtitan/models/llama3/config_registry.py llama3_70b.
TORCHTITAN_MODELS: dict[str, TorchtitanModel] = {
    "llama-3.1-8b": TorchtitanModel("llama3", "8B", 32, 4096, "meta-llama/Llama-3.1-8B"),
    "llama-3.1-70b": TorchtitanModel("llama3", "70B", 80, 8192, "meta-llama/Llama-3.1-70B"),
    "llama-3.1-405b": TorchtitanModel("llama3", "405B", 126, 16384, "meta-llama/Llama-3.1-405B"),
    "qwen3-8b": TorchtitanModel("qwen3", "8B", 36, 4096, "Qwen/Qwen3-8B"),
    "qwen3-14b": TorchtitanModel("qwen3", "14B", 40, 5120, "Qwen/Qwen3-14B"),
    "qwen3-32b": TorchtitanModel("qwen3", "32B", 64, 5120, "Qwen/Qwen3-32B"),
    "qwen3-30b-a3b": TorchtitanModel("qwen3", "30B-A3B", 48, 2048, "Qwen/Qwen3-30B-A3B"),
    "qwen3-235b-a22b": TorchtitanModel("qwen3", "235B-A22B", 94, 4096, "Qwen/Qwen3-235B-A22B"),
    "gpt-oss-20b": TorchtitanModel("gpt_oss", "20b", 24, 2880, "openai/gpt-oss-20b"),
    "gpt-oss-120b": TorchtitanModel("gpt_oss", "120b", 36, 2880, "openai/gpt-oss-120b"),
    "deepseek-v3": TorchtitanModel("deepseek_v3", "671B", 61, 7168, "deepseek-ai/DeepSeek-V3"),
}


def _key(name: str) -> str:
    """A model name as the table keys it: the Hub id's last part, lower case, without Meta's prefix."""
    return name.rsplit("/", 1)[-1].lower().removeprefix("meta-").removesuffix("-instruct")


def torchtitan_model(model: ModelSpec | None) -> TorchtitanModel | None:
    """torchtitan's model for the job's, by name (a preset's or a Hub id's) where the shapes agree; None
    where torchtitan has no flavour of it (the export then says what to set)."""
    if model is None or not model.name:
        return None
    known = TORCHTITAN_MODELS.get(_key(model.name))
    if known is None or (model.layers, model.hidden) not in ((known.layers, known.hidden), (None, None)):
        return None
    return known
