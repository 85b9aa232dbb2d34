"""The Megatron-LM run flags (issue 51): the model's architecture, its experts, the run's length and checkpoints.

``model_args``: the transformer's shape from the job's model (layers, widths, heads and query groups,
SwiGLU, RMSNorm, rotary positions, untied embeddings, QK norm, multi-latent attention); ``moe_args``: the
experts, the router's top-k, grouped GEMM and the token dispatcher the plan's time assumed; ``run_args``:
``--train-iters`` (the plan's steps), ``--save``/``--load``/``--save-interval`` and, for a fine-tune,
``--pretrained-checkpoint``; ``data_args``: the tokenizer and data as named placeholders. Flag names checked
against NVIDIA/Megatron-LM d98e8a64ddf3 (``MEGATRON_SOURCE``): arguments.py (--group-query-attention,
--max-position-embeddings, --position-embedding-type, --swiglu, --untie-embeddings-and-output-weights,
--num-experts, --moe-layer-freq, --q-lora-rank, --kv-lora-rank, --v-head-dim, --seq-length, --data-path),
the flags it generates from megatron/core/transformer/transformer_config.py (--num-layers, --hidden-size,
--ffn-hidden-size, --num-attention-heads, --num-query-groups, --kv-channels, --normalization,
--disable-bias-linear, --qk-layernorm, --multi-latent-attention, --moe-router-topk, --moe-grouped-gemm,
--moe-token-dispatcher-type, --moe-flex-dispatcher-backend, --moe-router-dtype, --moe-ffn-hidden-size,
--moe-shared-expert-intermediate-size) and from megatron/training/config/training_config.py (--train-iters,
--save, --load, --save-interval, --pretrained-checkpoint, --exit-signal-handler, --tokenizer-type, --tokenizer-model). Read back by
tests/exports/test_exports_run.py with an argparse parser of those names.
"""

from __future__ import annotations

from ...inputs.schema import ModelSpec
from ...physics.moe import AUTO_CROSS_NODE_DISPATCHER
from ...results import Plan
from .common import DEFAULT_SEQ_LEN, ExportJob
from .run import CHECKPOINT_DIR, DATA, HF_ASSETS, PRETRAINED, checkpoint_interval_steps, train_steps

# gpuplan's MoE dispatcher (Assumptions.moe_dispatcher) as Megatron-Core's: all-to-all, or the flex dispatcher
# with DeepEP's or HybridEP's kernels (transformer_config.py moe_token_dispatcher_type, moe_flex_dispatcher_backend)
MEGATRON_DISPATCHERS = {
    "alltoall": ["--moe-token-dispatcher-type alltoall"],
    "deepep": ["--moe-token-dispatcher-type flex", "--moe-flex-dispatcher-backend deepep"],
    "hybridep": ["--moe-token-dispatcher-type flex", "--moe-flex-dispatcher-backend hybridep"],
}


def model_args(model: ModelSpec | None, seq_len: int | None) -> list[str]:
    """The transformer's architecture flags from the job's model shapes (none for a params-only model).

    RMSNorm, rotary positions and no linear biases: every model gpuplan sizes from shapes has them (its
    parameter count leaves biases out)."""
    if model is None or not model.has_shapes:
        return []
    assert model.layers and model.hidden and model.heads and model.ffn_hidden  # has_shapes
    args = [
        f"--num-layers {model.layers}",
        f"--hidden-size {model.hidden}",
        f"--ffn-hidden-size {model.ffn_hidden}",
        f"--num-attention-heads {model.heads}",
    ]
    if model.kv_heads and model.kv_heads != model.heads:
        args += ["--group-query-attention", f"--num-query-groups {model.kv_heads}"]
    if model.kv_lora_rank:  # multi-head latent attention (DeepSeek-V3)
        args += ["--multi-latent-attention", f"--kv-lora-rank {model.kv_lora_rank}"]
        args += [f"--q-lora-rank {model.q_lora_rank}"] if model.q_lora_rank else []
        args += [f"--v-head-dim {model.v_head_dim}"] if model.v_head_dim else []
    elif model.head_dim and model.head_dim * model.heads != model.hidden:
        args.append(f"--kv-channels {model.head_dim}")
    args += [
        f"--max-position-embeddings {seq_len or DEFAULT_SEQ_LEN}",
        "--position-embedding-type rope",
        "--normalization RMSNorm",
        "--disable-bias-linear",
    ]
    if model.gated_mlp:
        args.append("--swiglu")
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if model.qk_norm:
        args.append("--qk-layernorm")
    return args


def plan_dispatcher(dispatcher: str, plan: Plan) -> str:
    """The dispatcher a plan's time assumed: the one named, or under ``auto`` DeepEP's flex dispatcher where the
    expert-parallel group leaves its node and alltoall inside one (physics/moe.py ``by_dispatcher``)."""
    if dispatcher != "auto":
        return dispatcher
    s = plan.strategy
    expert_tp = s.expert_tp or s.tp  # unfolded: the experts split by the attention TP
    spans = plan.nodes > 1 and s.ep > plan.gpus_per_node / expert_tp
    return AUTO_CROSS_NODE_DISPATCHER if spans else "alltoall"


def moe_args(model: ModelSpec | None, dispatcher: str) -> list[str]:
    """The experts' flags: their count, the router's top-k, grouped GEMM (gpuplan's time assumes grouped
    expert GEMMs), the dispatcher the plan's time assumed, the expert width and shared experts, and which
    layers are dense (``--moe-layer-freq``'s list form). --expert-model-parallel-size is ``megatron_args``'."""
    if model is None or not model.experts:
        return []
    args = [
        f"--num-experts {model.experts}",
        f"--moe-router-topk {model.experts_per_token}",
        "--moe-grouped-gemm",
        *MEGATRON_DISPATCHERS[dispatcher],
    ]
    if model.router_fp32:  # the router's GEMM in fp32, as the plan's activation memory counts it
        args.append("--moe-router-dtype fp32")
    width = model.moe_ffn_hidden or model.ffn_hidden
    if width:
        args.append(f"--moe-ffn-hidden-size {width}")
        if model.shared_experts:
            args.append(f"--moe-shared-expert-intermediate-size {model.shared_experts * width}")
    if model.dense_layers and model.layers:
        args.append(f"--moe-layer-freq '[0]*{model.dense_layers}+[1]*{model.layers - model.dense_layers}'")
    return args


def run_args(plan: Plan, job: ExportJob) -> list[str]:
    """The run's length and checkpoints: --train-iters, --save and --load (one folder, so a restart resumes),
    --save-interval; a fine-tune's pretrained weights as --pretrained-checkpoint, which Megatron-LM loads as
    --finetune does (weights only, iteration 0) while --load holds no checkpoint yet (checkpointing.py
    load_checkpoint), and skips once it does: --finetune itself would restart the count at every resume."""
    args = []
    if (steps := train_steps(plan, job)) is not None:
        args.append(f"--train-iters {steps}")
    args += [
        f"--save {CHECKPOINT_DIR}",
        f"--load {CHECKPOINT_DIR}",
        f"--save-interval {checkpoint_interval_steps(plan, job)}",
    ]
    if job.finetune:
        args.append(f"--pretrained-checkpoint {PRETRAINED}")
    if plan.spot:  # save a checkpoint and exit on SIGTERM (a preemption's warning; the Slurm export's --signal)
        args.append("--exit-signal-handler")
    return args


def data_args() -> list[str]:
    """The tokenizer and the data, as named placeholders (Hugging Face's tokenizer from the model's folder)."""
    return ["--tokenizer-type HuggingFaceTokenizer", f"--tokenizer-model {HF_ASSETS}", f"--data-path {DATA}"]
