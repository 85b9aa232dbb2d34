"""The DeepSpeed export: a config JSON, the header as its top-level ``_comment`` list.

``train_batch_size`` = micro-batch x gradient accumulation x DP ranks, DP = GPUs / (TP x PP); the ZeRO stage
(with ZeRO++ hierarchical partitioning for a hybrid shard), optimizer offload, AutoTP for TP and the pipeline
stages for PP. ``gaps``: what DeepSpeed's config and engine cannot run (context parallelism, interleaved
stages, ZeRO-2/3 with PP, TP beside PP, AutoTP above ZeRO-2). Read back by DeepSpeed's config reader
(``deepspeed.runtime.config.DeepSpeedConfig``, its batch assertion against the DP size): tests/exports/test_exports.py
test_deepspeed_config_passes_deepspeeds_batch_assertion and test_deepspeed_refuses_what_it_cannot_run_and_
names_what_can; tests/exports/test_ecosystem.py and tests/physics/test_offload.py (json).
"""

from __future__ import annotations

import json
from typing import Any

from ...results import Plan
from .common import ExportJob, Launcher, adapter_line, ep, header, hybrid
from .gaps import memory_option_gaps


def gaps(plan: Plan, job: ExportJob) -> list[str]:
    """What DeepSpeed's config and engine cannot run of this plan (``Launcher.gaps``)."""
    s = plan.strategy
    out = memory_option_gaps(plan, "DeepSpeed", in_backward=False, offload=False)
    if s.cp > 1:
        out.append(f"DeepSpeed's config has no ring-attention context parallelism (CP {s.cp})")
    if s.virtual_stages > 1:
        out.append("DeepSpeed's pipeline schedule (TrainSchedule) is plain 1F1B, without interleaved virtual stages")
    if s.pp > 1 and s.zero_stage >= 2:
        out.append(
            f"deepspeed/runtime/pipe/engine.py: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism "
            f"(this plan: PP {s.pp} with ZeRO-{s.zero_stage})"
        )
    if s.pp > 1 and s.tp > 1:
        out.append("DeepSpeed's AutoTP shards Hugging Face models, not a PipelineModule, so it cannot add TP to PP")
    if s.tp > 1 and s.zero_stage > 2:
        out.append("AutoTP training runs with ZeRO stages 0-2 (DeepSpeed AutoTP training tutorial)")
    return out


def write(plan: Plan, job: ExportJob) -> str:
    """DeepSpeed config JSON. ``train_batch_size`` = micro x accumulation x DP ranks, DP = GPUs / (TP x PP)."""
    s, precision = plan.strategy, job.precision
    dp_ranks = plan.gpus // (s.tp * s.pp)
    notes = []
    stage = s.zero_stage
    if s.offload != "none" and stage == 0:
        stage = 1  # one data-parallel rank: ZeRO-1 shards nothing, and is how DeepSpeed turns on ZeRO-Offload
        notes.append("ZeRO-Offload needs ZeRO stage 1 or more; over one data-parallel rank ZeRO-1 shards nothing")
    zero: dict[str, Any] = {
        "stage": stage,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "offload_optimizer": {"device": "cpu", "pin_memory": True} if s.offload != "none" else {"device": "none"},
        "offload_param": {"device": "none"},
    }
    if hybrid(s):
        zero["zero_hpz_partition_size"] = s.shard_degree  # ZeRO++ hierarchical partitioning (hybrid shard)
    lines = []
    if s.tp > 1:
        lines.append(
            f"TP {s.tp}: tensor_parallel.autotp_size (DeepSpeed AutoTP training, Hugging Face models); pass "
            f"deepspeed.initialize an mpu whose data-parallel world size is {dp_ranks}, as DeepSpeed's AutoTP "
            "example does, so that it checks train_batch_size against the DP ranks, not every GPU"
        )
    if s.pp > 1:
        lines.append(
            f"PP {s.pp}: build the model as deepspeed.pipe.PipelineModule(layers, num_stages={s.pp}, "
            f"partition_method='parameters'); pipeline.stages records it, DeepSpeed reads the stages from code"
        )
    if ep(s) > 1:
        lines.append(f"EP {ep(s)}: deepspeed.moe.layer.MoE(..., ep_size={ep(s)}) in the model (DeepSpeed-MoE)")
    lines += adapter_line(job.method)
    if s.recompute == "selective":
        notes.append("selective recompute has no DeepSpeed setting: checkpoint the attention core in your model")
    if precision == "fp8":
        notes.append("DeepSpeed's config has no FP8 matmuls: bf16 here, FP8 through Transformer Engine in the model")
    if precision == "nvfp4":
        notes.append("DeepSpeed's config has no NVFP4 matmuls: bf16 here, NVFP4 through Transformer Engine")
    config: dict[str, Any] = {
        "_comment": header(plan, precision, lines, notes),
        "train_batch_size": s.micro_batch * s.grad_accum * dp_ranks,
        "train_micro_batch_size_per_gpu": s.micro_batch,
        "gradient_accumulation_steps": s.grad_accum,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": precision != "fp16"},
        "fp16": {"enabled": precision == "fp16"},
        "zero_optimization": zero,
    }
    if s.tp > 1:
        config["tensor_parallel"] = {"autotp_size": s.tp}
    if s.pp > 1:
        config["pipeline"] = {
            "stages": s.pp,
            "partition": "parameters",
            "activation_checkpoint_interval": 1 if s.recompute == "full" else 0,
        }
    if s.recompute != "none":
        config["activation_checkpointing"] = {
            "partition_activations": s.tp > 1,
            "contiguous_memory_optimization": False,
            "cpu_checkpointing": False,
        }
    return json.dumps(config, indent=2) + "\n"


LAUNCHER = Launcher(
    "deepspeed",
    write,
    gaps=gaps,
    reads_seq_len=False,  # the config has no sequence length
    suffix="json",
    summary="a config JSON",
)
