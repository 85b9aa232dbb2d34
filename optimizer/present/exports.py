"""Launcher configurations for a chosen plan: SkyPilot task, Kubernetes-style job spec (the seed's
``spec.resources.gpu``), DeepSpeed JSON, accelerate FSDP config and a torchrun command line.

Each returns text ready to write to a file; keys follow each launcher's documented format.
"""

from __future__ import annotations

import json
import math

import yaml

from ..errors import ArgumentError
from ..results import Plan

KINDS = ("skypilot", "kubernetes", "deepspeed", "accelerate", "torchrun")


def _global_batch(plan: Plan) -> int:
    s = plan.strategy
    return s.dp * s.micro_batch * s.grad_accum


def torchrun(plan: Plan, script: str = "train.py") -> str:
    node_rank = "$NODE_RANK" if plan.nodes > 1 else "0"
    master = "$MASTER_ADDR" if plan.nodes > 1 else "localhost"
    return (
        f"torchrun --nnodes {plan.nodes} --nproc-per-node {plan.gpus_per_node} --node-rank {node_rank} "
        f"--master-addr {master} --master-port 29500 {script}"
    )


def skypilot(plan: Plan, name: str) -> str:
    task = {
        "name": name,
        "resources": {"accelerators": f"{plan.sku}:{plan.gpus_per_node}", "use_spot": plan.spot},
        "num_nodes": plan.nodes,
        "envs": {
            "GLOBAL_BATCH": _global_batch(plan),
            "MICRO_BATCH": plan.strategy.micro_batch,
            "GRAD_ACCUM": plan.strategy.grad_accum,
            "TP": plan.strategy.tp,
            "PP": plan.strategy.pp,
            "ZERO_STAGE": plan.strategy.zero_stage,
        },
        "run": (
            "torchrun --nnodes $SKYPILOT_NUM_NODES --nproc-per-node $SKYPILOT_NUM_GPUS_PER_NODE "
            '--node-rank $SKYPILOT_NODE_RANK --master-addr $(echo "$SKYPILOT_NODE_IPS" | head -n1) '
            "--master-port 29500 train.py"
        ),
    }
    return yaml.safe_dump(task, sort_keys=False)


def kubernetes(plan: Plan, name: str) -> str:
    """The seed's job spec: ``spec.resources.gpu: {type, count, minMemory}`` per node."""
    min_memory_gi = math.floor(plan.memory_gib.capacity)
    spec = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": plan.nodes,
            "completions": plan.nodes,
            "resources": {"gpu": {"type": plan.sku, "count": plan.gpus_per_node, "minMemory": f"{min_memory_gi}Gi"}},
        },
    }
    return yaml.safe_dump(spec, sort_keys=False)


def deepspeed(plan: Plan) -> str:
    s = plan.strategy
    zero = {
        "stage": s.zero_stage,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "offload_optimizer": {"device": "cpu" if s.offload == "optimizer" else "none"},
        "offload_param": {"device": "none"},
    }
    if s.zero_stage == 3 and s.shard_degree < s.dp:
        zero["zero_hpz_partition_size"] = s.shard_degree  # ZeRO++ hierarchical partitioning (hybrid shard)
    config = {
        "train_batch_size": _global_batch(plan),
        "train_micro_batch_size_per_gpu": s.micro_batch,
        "gradient_accumulation_steps": s.grad_accum,
        "bf16": {"enabled": True},
        "zero_optimization": zero,
        "gradient_clipping": 1.0,
    }
    if s.recompute != "none":
        config["activation_checkpointing"] = {
            "partition_activations": s.tp > 1,
            "contiguous_memory_optimization": False,
        }
    return json.dumps(config, indent=2) + "\n"


FSDP_STRATEGY = {0: "NO_SHARD", 1: "SHARD_GRAD_OP", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}


def accelerate(plan: Plan) -> str:
    s = plan.strategy
    strategy = "HYBRID_SHARD" if s.zero_stage == 3 and s.shard_degree < s.dp else FSDP_STRATEGY[s.zero_stage]
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "mixed_precision": "bf16",
        "num_machines": plan.nodes,
        "num_processes": plan.gpus,
        "machine_rank": 0,
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
        "fsdp_config": {
            "fsdp_sharding_strategy": strategy,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_activation_checkpointing": s.recompute != "none",
            "fsdp_offload_params": s.offload != "none",  # FSDP offloads parameters with their optimizer state
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": True,
        },
    }
    header = ""
    if s.tp > 1 or s.pp > 1:
        header = (
            f"# gpuplan: this plan uses TP {s.tp} x PP {s.pp}, which FSDP alone does not express; "
            "use the DeepSpeed/Megatron export or combine FSDP with a TP/PP library.\n"
        )
    if s.zero_stage == 1:
        header += "# gpuplan: FSDP has no ZeRO-1; SHARD_GRAD_OP (ZeRO-2) is the closest strategy.\n"
    header += f"# per-GPU micro-batch {s.micro_batch}, gradient accumulation {s.grad_accum} (set them in your script)\n"
    return header + yaml.safe_dump(config, sort_keys=False)


def export(plan: Plan, kind: str, name: str = "gpuplan-job") -> str:
    kind = kind.lower()
    if kind == "skypilot":
        return skypilot(plan, name)
    if kind in ("kubernetes", "k8s"):
        return kubernetes(plan, name)
    if kind == "deepspeed":
        return deepspeed(plan)
    if kind == "accelerate":
        return accelerate(plan)
    if kind == "torchrun":
        return torchrun(plan) + "\n"
    raise ArgumentError(f"unknown export {kind!r}; choose one of {', '.join(KINDS)}", field="export")
