"""The accelerate export: an FSDP config YAML and the ``accelerate launch`` line, data parallelism only.

One GPU with nothing offloaded: ``distributed_type: 'NO'`` (no FSDP at all). Otherwise the ZeRO stage as
FSDP's sharding strategy (HYBRID_SHARD for a hybrid shard over one node); where
accelerate's nearest setting needs no more GPU memory than planned (SHARD_GRAD_OP for ZeRO-1, FSDP CPU
offload for optimizer offload), it is written with a ``note:`` line saying so. ``gaps``: TP, PP, CP, EP, a
hybrid shard over other than one node, and the fine-tune memory options FSDP's config cannot carry. Read back
by accelerate's own loaders (``ClusterConfig.from_yaml_file``, ``accelerate launch``'s parser and
``prepare_multi_gpu_env``): tests/exports/test_exports.py test_accelerate_config_loads_with_accelerate,
test_accelerate_launch_line_rendezvouses_on_node_0, test_accelerate_refuses_tensor_and_pipeline_parallelism
and test_an_adapter_plan_says_what_the_script_must_add; tests/exports/test_ecosystem.py.
"""

from __future__ import annotations

from ...results import Plan
from .common import ExportJob, Launcher, adapter_line, comment, ep, header, hybrid, yaml_text
from .gaps import memory_option_gaps
from .torchrun import MASTER_PORT

FSDP_STRATEGY = {0: "NO_SHARD", 1: "SHARD_GRAD_OP", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}
ACCELERATE_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "nvfp4": "bf16"}


def gaps(plan: Plan, job: ExportJob) -> list[str]:
    """What accelerate's FSDP config cannot express for this plan (``Launcher.gaps``)."""
    s = plan.strategy
    out = memory_option_gaps(plan, "accelerate", in_backward=False, offload=False)
    if s.tp > 1 or s.pp > 1:
        out.append(
            f"accelerate's FSDP config shards data-parallel ranks only, so it cannot express TP {s.tp} x PP {s.pp}"
        )
    if s.cp > 1:
        out.append(f"accelerate's FSDP config has no context parallelism (CP {s.cp})")
    if ep(s) > 1:
        out.append(f"accelerate's FSDP config has no expert parallelism (EP {ep(s)})")
    if hybrid(s) and s.shard_degree != plan.host_gpus:
        out.append(f"FSDP's HYBRID_SHARD shards over one node ({plan.host_gpus} GPUs), not {s.shard_degree} GPUs")
    return out


def write(plan: Plan, job: ExportJob) -> str:
    """An accelerate FSDP config (data parallelism only: ``gaps`` refuses plans with TP or PP)."""
    s, precision = plan.strategy, job.precision
    if plan.gpus == 1 and s.offload == "none":
        return _single_gpu(plan, job)
    strategy = "HYBRID_SHARD" if hybrid(s) else FSDP_STRATEGY[s.zero_stage]
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "mixed_precision": ACCELERATE_PRECISION.get(precision, "bf16"),
        "num_machines": plan.hosts,
        "num_processes": plan.gpus,
        "machine_rank": 0,
        # accelerate (commands/launch.py, utils/launch.py prepare_multi_gpu_env) hands torchrun the rendezvous
        # endpoint main_process_ip:main_process_port over nodes; without the address it is "None:29500"
        **({"main_process_port": MASTER_PORT} if plan.hosts > 1 else {}),
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
        "fsdp_config": {
            "fsdp_sharding_strategy": strategy,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            # FSDP's plugin checkpoints every block or none: a plan recomputing some blocks does it in the script
            "fsdp_activation_checkpointing": s.recompute != "none" and not s.partial_layers,
            "fsdp_offload_params": s.offload != "none",
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": True,
        },
    }
    lines = [f"per-GPU micro-batch {s.micro_batch}, gradient accumulation {s.grad_accum} (set them in your script)"]
    if plan.hosts > 1:
        lines += [
            f"run on each of the {plan.hosts} nodes with NODE_RANK (0-{plan.hosts - 1}) and MASTER_ADDR (node 0) set:",
            "accelerate launch --config_file this.yaml --machine_rank $NODE_RANK --main_process_ip $MASTER_ADDR "
            f"--main_process_port {MASTER_PORT} train.py",
        ]
    else:
        lines.append("accelerate launch --config_file this.yaml train.py")
    lines += adapter_line(job.method)
    notes = []
    if s.zero_stage == 1:
        notes.append("FSDP has no ZeRO-1; SHARD_GRAD_OP (ZeRO-2) is the closest strategy and needs less memory")
    if s.offload != "none":
        notes.append("FSDP offloads parameters with their optimizer state: less GPU memory than planned, slower")
    if s.recompute == "selective":
        notes.append("FSDP's activation checkpointing recomputes whole blocks (full), more than the selective plan")
    if s.partial_layers:
        notes.append(partial_recompute_note(s.partial_layers, job.num_layers))
    if precision == "nvfp4":
        notes.append("accelerate has no NVFP4 setting: bf16 here")
    return comment(header(plan, precision, lines, notes)) + yaml_text(config | compiled(job))


def compiled(job: ExportJob) -> dict:
    """accelerate's torch.compile setting where the plan's speed assumed a compiled run (accelerate's config file
    ``dynamo_config``, as ``accelerate config`` writes it: the Inductor backend)."""
    return {"dynamo_config": {"dynamo_backend": "INDUCTOR"}} if job.compile else {}


def partial_recompute_note(layers: int, num_layers: int | None) -> str:
    """How a script recomputes ``layers`` of the model's blocks, every k-th one (the FSDP framework's rule)."""
    every = f"every {num_layers // layers}-th block, " if num_layers else ""
    return (
        f"the plan recomputes {layers} of the blocks ({every}the rest keep their activations): wrap those in your "
        "script (torchtune: ac_mode selective, ac_option k; torch.distributed's apply_activation_checkpointing "
        "with a check_fn); accelerate's FSDP plugin checkpoints every block or none, so it is off here"
    )


def _single_gpu(plan: Plan, job: ExportJob) -> str:
    """One GPU and nothing offloaded: no distributed training at all (accelerate's ``distributed_type: 'NO'``,
    as ``accelerate config`` writes for one GPU), not FSDP's NO_SHARD wrapping, which adds its flat-parameter
    machinery and collectives for nothing."""
    s = plan.strategy
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "NO",
        "mixed_precision": ACCELERATE_PRECISION.get(job.precision, "bf16"),
        "num_machines": 1,
        "num_processes": 1,
        "machine_rank": 0,
        "gpu_ids": "all",
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    lines = [
        f"micro-batch {s.micro_batch}, gradient accumulation {s.grad_accum} (set them in your script)",
        "accelerate launch --config_file this.yaml train.py",
        *adapter_line(job.method),
    ]
    notes = []
    if s.partial_layers:
        notes.append(partial_recompute_note(s.partial_layers, job.num_layers))
    elif s.recompute != "none":
        notes.append(
            f"the plan recomputes activations ({s.recompute}): turn on gradient checkpointing in your script "
            "(model.gradient_checkpointing_enable()); a single-GPU accelerate config has no setting for it"
        )
    if job.precision == "nvfp4":
        notes.append("accelerate has no NVFP4 setting: bf16 here")
    return comment(header(plan, job.precision, lines, notes)) + yaml_text(config | compiled(job))


LAUNCHER = Launcher(
    "accelerate",
    write,
    gaps=gaps,
    reads_seq_len=False,  # the config has no sequence length
    suffix="yaml",
    summary="an FSDP config",
)
