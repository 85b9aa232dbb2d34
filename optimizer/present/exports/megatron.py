"""The Megatron-LM export: a torchrun command for ``pretrain_gpt.py`` with the plan's layout and batch.

``megatron_args``: the parallelism (TP, PP, virtual stages, uneven first and last stages, CP, EP, sequence
parallelism), optimizer, batch, recompute, activation offload and precision flags, names checked against
``MEGATRON_SOURCE``; ``write`` adds the run's (``megatron_run``: the model's architecture and experts, the
steps, checkpoints, tokenizer and data placeholders). ``CUDA_DEVICE_MAX_CONNECTIONS=1`` is
exported where TP or CP is above 1. ``gaps``: the fine-tune memory options it cannot carry (the framework's
own rules are the planner's, which ``gaps.export_gaps`` adds). Read back by the flags megatron-core's
dataclasses generate (``TransformerConfig``, ``DistributedDataParallelConfig``, ``OptimizerConfig``, mirrored
as argparse): tests/exports/test_exports.py test_megatron_arguments_build_megatron_core_configs,
test_megatron_takes_the_uneven_pipeline_split_it_is_given, test_megatron_export_runs_the_optimizer_the_plan_
counted and test_megatron_takes_the_jobs_sequence_length_and_precision; tests/planning/test_frameworks.py (LoRA).
"""

from __future__ import annotations

from ...results import Plan
from .common import DEFAULT_SEQ_LEN, Command, ExportJob, Launcher, comment, ep, header
from .gaps import memory_option_gaps
from .megatron_run import data_args, model_args, moe_args, plan_dispatcher, run_args
from .run import DATA, HF_ASSETS, PRETRAINED, interval_note, steps_note
from .torchrun import torchrun_line

# Where the flag names were checked (``megatron_args``).
MEGATRON_SOURCE = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py (main at d98e8a6, 2026-08-22); its TransformerConfig flags "
    "are generated from megatron/core/model_parallel_config.py and megatron/core/transformer/transformer_config.py"
)
# Megatron-LM's validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS == "1" where TP or CP > 1 on GPUs before
# Blackwell (arguments.py lines 1453-1479 at MEGATRON_SOURCE's commit); its example scripts export it always
MEGATRON_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def gaps(plan: Plan, job: ExportJob) -> list[str]:
    """What Megatron-LM's flags cannot carry for this plan (``Launcher.gaps``)."""
    # Activation offload is --cpu-offloading-num-layers (Megatron-Core's cpu_offloading_num_layers, which must
    # stay under the model's layer count): it needs num_layers.
    # (ZeRO stages, interleaving and the like are the framework's rules, which ``gaps.export_gaps`` adds)
    return memory_option_gaps(plan, "Megatron-LM", in_backward=False, offload=(job.num_layers or 0) > 1)


def uneven_pipeline_ends(num_layers: int | None, pp: int) -> tuple[int, int] | None:
    """Where PP does not divide the layers: the layers of the first and last stages, the middle stages
    holding ceil(layers / PP) each as gpuplan's time model assumes (its slowest stage), as Megatron-Core
    takes them (TransformerConfig num_layers_in_first/last_pipeline_stage: the middle layers must split
    evenly over the middle stages; without them it asserts that PP divides the layers). None where PP
    divides them (or they are unknown)."""
    if num_layers is None or pp < 2 or num_layers % pp == 0:
        return None
    slowest = -(-num_layers // pp)
    for middle in range(slowest, 0, -1):
        ends = num_layers - middle * (pp - 2)
        if 2 <= ends <= 2 * slowest:
            return ends // 2, ends - ends // 2
    return None


def pipeline_layout(num_layers: int | None, pp: int, chunks: int) -> str | None:
    """Megatron-Core's ``--pipeline-model-parallel-layout`` for interleaving whose PP x chunks do not divide the
    layers (None where they do, or without interleaving): the stages in model order (chunk-major, as
    pipeline_parallel_layer_layout.py reads them: stage v x PP + rank), each a run of ``t`` (a decoder layer),
    the embedding ``E`` on the first and the loss ``L`` on the last, split by ``|``. The first L mod (PP x chunks)
    stages take one layer more, so no rank holds more than ceil(layers / PP), the slowest stage gpuplan's time
    model assumes. With more stages than layers, the embedding and then the loss take a stage of their own (as
    account_for_embedding/loss_in_pipeline_split place them: Megatron-Bridge's Llama 3.1 405B at PP 16 x 8)."""
    stages = pp * chunks
    if num_layers is None or chunks < 2 or num_layers % stages == 0:
        return None
    if stages > num_layers:
        runs = ["E", *["t"] * num_layers, "L"]
        if len(runs) > stages:  # one stage short: the loss joins the last layer
            runs[-2:] = ["tL"]
        return "|".join(runs)
    base, extra = divmod(num_layers, stages)
    runs = ["t" * (base + (i < extra)) for i in range(stages)]
    runs[0], runs[-1] = "E" + runs[0], runs[-1] + "L"
    return "|".join(runs)


# job.optimizer -> Megatron-LM's --optimizer choice (frameworks.py: Megatron runs these two)
MEGATRON_OPTIMIZERS = {"adamw": "adam", "sgd": "sgd"}


def megatron_args(
    plan: Plan,
    seq_len: int | None = None,
    precision: str = "bf16",
    num_layers: int | None = None,
    optimizer: str = "adamw",
    gradient_dtype: str = "bf16",
    context_parallel: str = "ring",
) -> list[str]:
    """The parallelism, batch, recompute, activation offload and precision arguments of Megatron-LM's
    ``pretrain_gpt.py``.

    Names checked against ``MEGATRON_SOURCE``; virtual stages use ``--num-virtual-stages-per-pipeline-rank``
    (current arguments.py has no ``--virtual-pipeline-model-parallel-size``). Activation offload is
    ``--cpu-offloading-num-layers``: arguments.py turns cpu_offloading on when it is positive, and
    Megatron-Core (transformer_config.py) takes fewer than num_layers; every layer but the last is offloaded
    (cpu_offloading_activations defaults to True, model_parallel_config.py)."""
    s = plan.strategy
    args = [
        f"--tensor-model-parallel-size {s.tp}",
        f"--pipeline-model-parallel-size {s.pp}",
    ]
    if (layout := pipeline_layout(num_layers, s.pp, s.virtual_stages)) is not None:
        args.append(f"--pipeline-model-parallel-layout {layout}")
    elif s.virtual_stages > 1:
        args.append(f"--num-virtual-stages-per-pipeline-rank {s.virtual_stages}")
    elif (ends := uneven_pipeline_ends(num_layers, s.pp)) is not None:
        # Megatron-LM's flags for TransformerConfig's num_layers_in_first/last_pipeline_stage, which it excludes
        # from its generated flags (arguments.py _add_network_size_args; argument_utils.py maps them back)
        args += [f"--decoder-first-pipeline-num-layers {ends[0]}", f"--decoder-last-pipeline-num-layers {ends[1]}"]
    args += [f"--context-parallel-size {s.cp}", f"--expert-model-parallel-size {ep(s)}"]
    if s.cp > 1 and context_parallel == "all_to_all":  # Ulysses (job.context_parallel): TE's a2a exchange
        args.append("--cp-comm-type a2a")
    if getattr(s, "expert_tp", None):
        args.append(f"--expert-tensor-parallel-size {s.expert_tp}")
    if s.tp > 1:
        args.append("--sequence-parallel")
    # the planned optimizer's state, not Megatron's default (adam): --optimizer offers adam (decoupled weight
    # decay: AdamW) and sgd among gpuplan's optimizers (the framework rule refuses the others)
    args.append(f"--optimizer {MEGATRON_OPTIMIZERS[optimizer]}")
    if s.zero_stage >= 1 or s.offload != "none":
        args.append("--use-distributed-optimizer")
    args += megatron_fsdp_args(s)
    if s.offload != "none":
        args += ["--optimizer-cpu-offload", "--optimizer-offload-fraction 1.0", "--use-precision-aware-optimizer"]
    if s.activation_offload and num_layers:
        args.append(f"--cpu-offloading-num-layers {num_layers - 1}")
    args += [
        f"--micro-batch-size {s.micro_batch}",
        f"--global-batch-size {s.global_batch}",
        f"--seq-length {seq_len or DEFAULT_SEQ_LEN}",
    ]
    if s.recompute == "selective":
        args.append("--recompute-granularity selective")
    elif s.partial_layers:  # N of each stage's layers, the same count in each of its chunks (block method)
        per_chunk = s.partial_layers // max(s.virtual_stages, 1)
        args += ["--recompute-granularity full", "--recompute-method block", f"--recompute-num-layers {per_chunk}"]
    elif s.recompute == "full":
        args += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    args.append("--fp16" if precision == "fp16" else "--bf16")
    if precision == "fp8":
        args.append("--fp8-format hybrid")
    elif precision == "nvfp4":
        args.append("--fp4-format e2m1")
    if gradient_dtype != "fp32" and precision != "fp16":  # else Megatron-LM accumulates and reduces in fp32
        args.append("--grad-reduce-in-bf16")
    return args


def megatron_fsdp_args(s) -> list[str]:
    """ZeRO-2 and ZeRO-3 as Megatron-FSDP runs them (arguments.py: --use-megatron-fsdp, its sharding strategy,
    the fsdp_dtensor checkpoint format it asserts; a shard group smaller than the data-parallel ranks is its
    hybrid sharding, --num-distributed-optimizer-instances replicas); none for ZeRO-0/1."""
    if s.zero_stage < 2:
        return []
    strategy = "optim_grads_params" if s.zero_stage >= 3 else "optim_grads"
    args = ["--use-megatron-fsdp", f"--data-parallel-sharding-strategy {strategy}", "--ckpt-format fsdp_dtensor"]
    replicas = s.dp * s.cp // max(s.shard_degree, 1) if s.zero_stage >= 3 else 1
    if replicas > 1:
        args.append(f"--num-distributed-optimizer-instances {replicas}")
    return args


def _run_lines(plan: Plan, job: ExportJob) -> list[str]:
    """The header lines on the run's flags (``megatron_run``) and the placeholders to fill in."""
    model = job.model
    lines = [steps_note(plan, job), interval_note(plan, job)]
    if model is None or not model.has_shapes:
        lines.append("the model's shapes are unknown: add --num-layers, --hidden-size, --num-attention-heads, ...")
    else:
        lines.append(
            "set --rotary-base to the model's rope_theta (config.json; Llama 3.1: 500000, with --use-rope-scaling): "
            "Megatron's default 10000 is not the pretrained model's"
        )
    if model is not None and model.experts:
        lines.append(
            f"MoE token dispatcher {plan_dispatcher(job.moe_dispatcher, plan)}: the one the plan's time assumed "
            "(assumptions.moe_dispatcher)"
        )
    if model is not None and model.kv_lora_rank:
        lines.append("multi-latent attention: set --qk-head-dim and --qk-pos-emb-head-dim to the model's split")
    if model is not None and model.sliding_window:
        lines.append("sliding-window attention: add --window-size (and --window-attn-skip-freq) as the model has it")
    if job.finetune:
        lines.append(
            f"fine-tune: {PRETRAINED} is the pretrained weights in Megatron's format (convert Hugging Face weights "
            "with Megatron-Bridge); loaded once, while --load holds no checkpoint of this run"
        )
    lines.append(
        f"fill in {HF_ASSETS} (the model's Hugging Face folder, for its tokenizer) and {DATA} (a Megatron dataset "
        "prefix); set --lr, --min-lr, --lr-decay-style and --lr-warmup-iters from your recipe (Megatron has no default lr)"
    )
    return lines


def write(plan: Plan, job: ExportJob) -> str:
    """A torchrun command for Megatron-LM's ``pretrain_gpt.py`` with the plan's layout; add model/data flags."""
    s = plan.strategy
    lines = [
        f"Megatron-LM derives DP = GPUs / (TP x PP x CP) = {s.dp} and {s.grad_accum} micro-batches per step "
        f"from --global-batch-size {s.global_batch} / (--micro-batch-size {s.micro_batch} x DP {s.dp})",
        f"flags checked against {MEGATRON_SOURCE}",
        *_run_lines(plan, job),
    ]
    notes = [] if job.seq_len else [f"sequence length {DEFAULT_SEQ_LEN} (the plan carries none): set --seq-length"]
    run = command(plan, job)
    env = ""
    if run.env:
        lines.append(
            "CUDA_DEVICE_MAX_CONNECTIONS=1: Megatron-LM asserts it for TP or CP above 1 before Blackwell "
            "(arguments.py validate_args), and its example scripts set it"
        )
        env = "export " + " ".join(f"{k}={v}" for k, v in run.env.items()) + "\n"
    target = " \\\n  ".join(run.target)
    return comment(header(plan, job.precision, lines, notes)) + env + f"{torchrun_line(plan, target)}\n"


def command(plan: Plan, job: ExportJob) -> Command:
    """``pretrain_gpt.py`` with the plan's layout and the run's flags, and the environment it needs."""
    s = plan.strategy
    target = [
        "pretrain_gpt.py",
        *megatron_args(
            plan, job.seq_len, job.precision, job.num_layers, job.optimizer, job.gradient_dtype, job.context_parallel
        ),
        *model_args(job.model, job.seq_len),
        *moe_args(job.model, plan_dispatcher(job.moe_dispatcher, plan)),
        *run_args(plan, job),
        *data_args(),
    ]
    # Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS is not 1 and only warns beside TP or CP (arguments.py)
    return Command(target, env=dict(MEGATRON_ENV) if (s.tp > 1 or s.cp > 1) and s.zero_stage < 2 else {})


LAUNCHER = Launcher("megatron", write, gaps=gaps, suffix="sh", summary="pretrain_gpt.py arguments", command=command)
