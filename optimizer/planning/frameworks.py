"""What each training framework can run, as data with a source per rule (docs/design.md section 3.5).

A layout (TP, PP, interleaving, ZeRO stage and shard group, offload) with the job's method and optimizer
is runnable in a framework when every rule below allows it. The candidate generator keeps only layouts
the job's framework runs; with ``framework: auto`` it keeps every layout some framework runs, labelled
with the first framework in ``PREFERENCE`` order that runs it (the simplest tool that does the job) and
with the first of those gpuplan costs differently (``label_layouts``); the first label that fits in
memory is the one the layout runs in (``candidates.Evaluation.shadowed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import numpy as np

from ..inputs.schema import JobSpec
from ..physics.constants import LOGITS_BYTES_PER_VOCAB, MEGATRON_CROSS_ENTROPY_BYTES_PER_VOCAB
from ..physics.layout import Offload, Recompute
from .stage_splits import layers_per_stage_chunks, recompute_count

# job.optimizer as the grid's constant "optimizer" column (the schema's order)
OPTIMIZERS: tuple[str, ...] = get_args(JobSpec.model_fields["optimizer"].annotation)
OPTIMIZER_CODES = {name: i for i, name in enumerate(OPTIMIZERS)}
# job.precision as the grid's constant "precision" column
PRECISIONS: tuple[str, ...] = get_args(JobSpec.model_fields["precision"].annotation)
PRECISION_CODES = {name: i for i, name in enumerate(PRECISIONS)}
# job.context_parallel as the grid's constant "context_parallel" column (0: ring)
EXCHANGES: tuple[str, ...] = get_args(JobSpec.model_fields["context_parallel"].annotation)
EXCHANGE_CODES = {name: i for i, name in enumerate(EXCHANGES)}


@dataclass(frozen=True)
class Framework:
    """One framework's rules. Each ``*_source`` says where the rule comes from."""

    name: str
    title: str
    zero_stages: frozenset[int]
    zero_source: str
    hybrid_shard: bool  # ZeRO-3 sharded inside a node and replicated across (HSDP, ZeRO++ hpZ)
    hybrid_source: str
    tensor_parallel: bool
    tp_max_zero: int  # highest ZeRO stage that combines with TP
    tp_source: str
    pipeline: bool
    pp_max_zero: int  # highest ZeRO stage that combines with PP
    pp_with_tp: bool
    pp_source: str
    interleaved: bool  # virtual pipeline stages (interleaved 1F1B)
    # how interleaving splits the layers into PP x v chunks: "even" (the chunks must divide the layers),
    # "layers_per_stage" (torchtitan: 2 chunks per rank any split, more where some count of layers per stage
    # makes exactly PP x v chunks: ``layers_per_stage_chunks``) or "any" (Megatron-Core's explicit layout)
    chunk_split: str
    uneven_stages: bool  # without interleaving, PP need not divide the layers
    interleave_source: str
    offload: bool  # optimizer state in CPU memory, as gpuplan models it (ZeRO-Offload)
    offload_source: str
    # the optimizers (job.optimizer) its offload steps on the CPU as planned
    offload_optimizers: frozenset[str] = frozenset({"adamw"})
    ddp_gradient_copy: bool = False  # torch DDP's buckets copy every gradient (memory_terms.ddp_bucket_bytes)
    frees_gradients: bool = False  # its loop frees the gradients each step (memory_terms.not_concurrent_bytes)
    # Under job.gradient_dtype auto with fp32 master weights, its data-parallel gradient reduce runs in fp32 at ZeRO
    # stages below this one (twice a bf16 reduce's traffic), else in bf16
    fp32_reduce_below_zero: int = 0
    reduce_source: str = "gradients reduced in bf16"
    # whether job.gradient_dtype fp32 is a gradient buffer of its own beside the 16-bit weights (Megatron-Core's
    # main_grad), rather than the fp32 parameters' own gradients (FSDP's sharded parameters, DDP under autocast),
    # which the 16 bytes a parameter of mixed precision already count
    fp32_gradient_buffer: bool = True
    context_parallel: bool = False  # ring attention over cp ranks
    cp_source: str = "no ring-attention context parallelism"
    # the Ulysses exchanges (job.context_parallel all_to_all, all_to_all_repeat_kv) its sequence parallelism runs
    ulysses_exchanges: frozenset[str] = frozenset()
    ulysses_source: str = "no Ulysses (all-to-all) sequence parallelism"
    ulysses_with_tp: bool = True  # whether its Ulysses combines with tensor parallelism
    expert_parallel: bool = False  # routed experts split over ep ranks with all-to-all dispatch
    ep_source: str = "no expert parallelism"
    ep_max_zero: int = 3  # highest ZeRO stage that combines with EP
    # EP drawn from the FSDP shard group x TP (torchtitan: the expert mesh is dp_shard x CP x TP // EP)
    ep_from_shard_group: bool = False
    optimizer_in_backward: bool = False  # each parameter stepped in backward (job.optimizer_in_backward)
    optimizer_in_backward_methods: frozenset[str] = frozenset({"full", "lora", "qlora"})  # in which fine-tunes
    # the optimizers its optimizer step in backward runs on more than one GPU
    optimizer_in_backward_sharded: frozenset[str] = frozenset(OPTIMIZERS)
    optimizer_in_backward_source: str = "the optimizer steps after the whole backward pass"
    activation_offload: bool = False  # saved activations in CPU memory (job.activation_offload)
    activation_offload_with_recompute: bool = True  # combines with activation recomputation
    activation_offload_source: str = "no activation offload to CPU"
    expert_folding: bool = False  # an expert TP other than the attention TP, EP over TP x DP x CP ranks
    folding_source: str = "experts split by the attention TP only"
    # ZeRO-3 with PP: weights held unsharded over the step and gradients reduced once per step, instead of
    # gathered and reduced every micro-batch (physics/time.py, _data_parallel_exposed_s)
    zero3_step_gathers_with_pp: bool = False
    zero3_gathers_source: str = "ZeRO-3 gathers the weights and reduces the gradients every micro-batch"
    # Fine-tuning methods it trains (job.method): full, LoRA adapters, LoRA over 4-bit NF4 base weights (QLoRA)
    methods: frozenset[str] = frozenset({"full", "lora", "qlora"})
    methods_source: str = "full, LoRA and QLoRA"
    # Optimizers (job.optimizer) its standard configuration selects
    optimizers: frozenset[str] = frozenset(OPTIMIZERS)
    optimizers_source: str = "any torch.optim or bitsandbytes optimizer"
    # Precisions (job.precision) it trains in: NVFP4 needs Transformer Engine's NVFP4 recipe in the model
    precisions: frozenset[str] = frozenset(p for p in PRECISIONS if p != "nvfp4")
    precisions_source: str = (
        "no NVFP4 training recipe: Transformer Engine's NVFP4BlockScaling is wired into Megatron-Core's layers "
        "(--fp4-format e2m1)"
    )
    # Under job.kernels: auto, the activations its kernels keep (physics/memory.py layer_activation_bytes):
    # fused norms, SwiGLU and FP8 linear inputs (Transformer Engine) or eager PyTorch's
    fused_kernels: bool = False
    kernels_source: str = "eager PyTorch modules (Hugging Face, torchtitan without Transformer Engine)"
    # Whether an MoE's experts at EP 1 are transformers' own modules, run as assumptions.experts_implementation
    # says (physics/moe.py expert_loop_s), and whether ZeRO-3 fetches weights one submodule at a time
    hf_experts: bool = False
    zero3_module_fetch: bool = False
    hf_experts_source: str = "its own MoE layers: grouped GEMMs over the experts"
    # Whether its expert GEMMs loop over the local experts on the host (physics/constants.py
    # MOE_HOST_S_PER_LOCAL_EXPERT): Transformer Engine's GroupedLinear (Megatron), DeepSpeed-MoE's Experts (a Python
    # loop of one module per expert, deepspeed/moe/experts.py Experts.forward), rather than one kernel for all of
    # them; under ``hf_experts`` at EP 1 transformers' own experts run instead (``expert_loop``)
    grouped_gemm_per_expert: bool = False
    # With TP, whether the norms and the residual stream are split along the sequence too (Megatron's sequence
    # parallelism): the activations outside the TP-split linears are then divided by TP as well, else every TP
    # rank keeps them whole (physics/memory.py activation_bytes)
    sequence_parallel: bool = True
    sequence_parallel_source: str = "no tensor parallelism"
    # a plain (not interleaved) pipeline needs at least as many micro-batches per step as stages
    pipeline_min_microbatches: bool = False
    microbatches_source: str = "a pipeline with fewer micro-batches than stages runs, with a longer bubble"
    # the sequence length (job.seq_len) its sequence and context parallelism split: "none", "per_cp_rank"
    # (each CP rank's s / cp divisible by TP: Megatron's sequence parallelism) or "tp_2cp" (s divisible by
    # TP x 2 CP whenever TP or CP is on: torchtitan's seq_len_divisor)
    seq_len_split: str = "none"
    seq_len_source: str = "no sequence-length rule"
    # Full recompute of some of a stage's layers (layout.recompute_layers): "block", any count, the same in each
    # of a rank's pipeline chunks (Megatron); "every_k", every k-th block, floor(L / k) of L (torchtune); "none",
    # full recompute re-runs every layer
    partial_recompute: str = "none"
    partial_recompute_source: str = "activation checkpointing wraps every transformer block or none"
    # its plain cross-entropy's memory per token and vocabulary entry (job.loss standard; physics/constants.py)
    standard_loss_bytes_per_vocab: float = LOGITS_BYTES_PER_VOCAB["standard"]
    # job.loss chunked is a fused kernel's one pass over the bf16 logits (physics/loss_time.py), not a chunked upcast
    fused_chunked_loss: bool = False
    # per-op selective recompute (Recompute.OP: each block saves its matmuls' outputs but every second one)
    op_recompute: bool = False
    op_recompute_source: str = "no per-op selective checkpointing policy"

    def runnable(self, grid: dict[str, np.ndarray], layers: int) -> np.ndarray:
        """Which layouts of a strategy grid (columns by name) this framework runs."""
        return ~np.any(np.stack(list(self.violations(grid, layers).values())), axis=0)

    def violations(self, grid: dict[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
        """Per rule (its sentence with the source), a mask of the layouts that break it."""
        tp, pp, zero, shard = grid["tp"], grid["pp"], grid["zero"], grid["shard"]
        v, offload = grid["virtual_stages"], grid["offload"]
        cp = grid.get("cp", np.ones_like(tp))
        exchange = grid.get("context_parallel", np.zeros_like(tp))  # EXCHANGE_CODES (absent: ring)
        dp = grid["dp"] * cp  # ranks that hold the same weights
        hybrid = (zero >= 3) & (shard < dp)
        layers = max(int(layers), 1)
        # Job-wide options arrive as constant columns (absent: off).
        in_backward = grid.get("optimizer_in_backward", np.zeros_like(tp)) > 0
        act_offload = grid.get("activation_offload", np.zeros_like(tp)) > 0
        recompute = grid.get("recompute", np.zeros_like(tp))
        method = grid.get("method", np.zeros_like(tp))
        trained = np.isin(method, [METHOD_CODES[m] for m in self.methods])
        optimizer = grid.get("optimizer", np.zeros_like(tp))
        stepped = np.isin(optimizer, [OPTIMIZER_CODES[o] for o in self.optimizers])
        precision = grid.get("precision", np.zeros_like(tp))
        in_precision = np.isin(precision, [PRECISION_CODES[p] for p in self.precisions])
        accum = grid["grad_accum"]
        bad_seq = self._bad_seq_len(grid.get("seq_len"), tp, cp)
        return {
            f"{self.title} trains {'/'.join(sorted(self.methods))} only ({self.methods_source})": ~trained,
            f"{self.title} runs the {'/'.join(sorted(self.optimizers))} optimizers only ({self.optimizers_source})": (
                ~stepped
            ),
            f"{self.title} does not train in {'/'.join(p for p in PRECISIONS if p not in self.precisions)} "
            f"({self.precisions_source})": ~in_precision,
            f"{self.title} runs ZeRO stages {sorted(self.zero_stages)} ({self.zero_source})": ~np.isin(
                zero, list(self.zero_stages)
            ),
            f"{self.title} has no hybrid shard ({self.hybrid_source})": hybrid & (not self.hybrid_shard),
            f"{self.title} has no tensor parallelism ({self.tp_source})": (tp > 1) & (not self.tensor_parallel),
            f"{self.title} combines TP with ZeRO-{self.tp_max_zero} at most ({self.tp_source})": (tp > 1)
            & (zero > self.tp_max_zero),
            f"{self.title} has no pipeline parallelism ({self.pp_source})": (pp > 1) & (not self.pipeline),
            f"{self.title} combines PP with ZeRO-{self.pp_max_zero} at most ({self.pp_source})": (pp > 1)
            & (zero > self.pp_max_zero),
            f"{self.title} does not combine PP with TP ({self.pp_source})": (pp > 1) & (tp > 1) & (not self.pp_with_tp),
            f"{self.title} has no interleaved pipeline schedule ({self.interleave_source})": (v > 1)
            & (not self.interleaved),
            **self._chunk_rules(pp, v, layers),
            f"{self.title} needs PP to divide the layers ({self.interleave_source})": (pp > 1)
            & (v == 1)
            & (not self.uneven_stages)
            & (layers % np.maximum(pp, 1) != 0),
            f"{self.title} has no optimizer offload of the kind gpuplan models ({self.offload_source})": (
                offload == Offload.OPTIMIZER
            )
            & (not self.offload),
            f"{self.title} offloads the {'/'.join(sorted(self.offload_optimizers))} optimizer only "
            f"({self.offload_source})": (offload == Offload.OPTIMIZER)
            & self.offload
            & ~np.isin(optimizer, [OPTIMIZER_CODES[o] for o in self.offload_optimizers]),
            **self._context_parallel_rules(cp, exchange, tp),
            f"{self.title} has no expert parallelism ({self.ep_source})": (grid.get("ep", np.ones_like(tp)) > 1)
            & (not self.expert_parallel),
            f"{self.title} combines EP with ZeRO-{self.ep_max_zero} at most ({self.ep_source})": (
                grid.get("ep", np.ones_like(tp)) > 1
            )
            & (zero > self.ep_max_zero),
            f"{self.title} draws EP from the FSDP shard group (data_parallel_shard_degree x CP) x TP, which EP "
            f"must divide ({self.ep_source})": (grid.get("ep", np.ones_like(tp)) > 1)
            & self.ep_from_shard_group
            & (np.where(zero >= 3, shard, cp) * tp % np.maximum(grid.get("ep", np.ones_like(tp)), 1) != 0),
            f"{self.title} has no optimizer step in backward ({self.optimizer_in_backward_source})": in_backward
            & (not self.optimizer_in_backward),
            f"{self.title} steps the optimizer in backward in {'/'.join(sorted(self.optimizer_in_backward_methods))} "
            f"fine-tunes only ({self.optimizer_in_backward_source})": in_backward
            & self.optimizer_in_backward
            & ~np.isin(method, [METHOD_CODES[m] for m in self.optimizer_in_backward_methods]),
            f"{self.title} steps the optimizer in backward on more than one GPU with the "
            f"{'/'.join(sorted(self.optimizer_in_backward_sharded))} optimizers only "
            f"({self.optimizer_in_backward_source})": in_backward
            & self.optimizer_in_backward
            & (grid["dp"] * tp * pp * cp > 1)
            & ~np.isin(optimizer, [OPTIMIZER_CODES[o] for o in self.optimizer_in_backward_sharded]),
            f"{self.title} runs optimizer-in-backward without expert parallelism ({self.optimizer_in_backward_source})": (
                in_backward & (grid.get("ep", np.ones_like(tp)) > 1) & self.optimizer_in_backward
            ),
            f"{self.title} has no activation offload to CPU ({self.activation_offload_source})": act_offload
            & (not self.activation_offload),
            f"{self.title} offloads activations only without pipeline parallelism ({self.activation_offload_source})": (
                act_offload & (pp > 1) & self.activation_offload
            ),
            f"{self.title} offloads activations only without recomputation ({self.activation_offload_source})": (
                act_offload & (recompute > 0) & (not self.activation_offload_with_recompute)
            ),
            f"{self.title} needs at least as many micro-batches per step as pipeline stages without interleaving "
            f"({self.microbatches_source})": (pp > 1) & (v == 1) & (accum < pp) & self.pipeline_min_microbatches,
            f"{self.title} needs the sequence length to split evenly over its sequence and context parallel ranks "
            f"({self.seq_len_source})": bad_seq,
            f"{self.title} splits the experts by the attention TP only ({self.folding_source})": (
                grid.get("etp", np.zeros_like(tp)) > 0
            )
            & (grid.get("etp", np.zeros_like(tp)) != tp)
            & (not self.expert_folding),
            **self._recompute_rules(grid, layers),
        }

    def _context_parallel_rules(self, cp, exchange, tp) -> dict[str, np.ndarray]:
        """CP layouts whose exchange (job.context_parallel as ``EXCHANGE_CODES``) this framework does not run: ring
        attention (``context_parallel``) or a Ulysses all-to-all (``ulysses_exchanges``, with TP where
        ``ulysses_with_tp``)."""
        ring = exchange == EXCHANGE_CODES["ring"]
        ulysses = np.isin(exchange, [EXCHANGE_CODES[e] for e in self.ulysses_exchanges])
        return {
            f"{self.title} has no context parallelism as gpuplan models it ({self.cp_source})": (cp > 1)
            & ring
            & (not self.context_parallel),
            f"{self.title} runs Ulysses sequence parallelism as {'/'.join(sorted(self.ulysses_exchanges)) or 'none'} "
            f"only ({self.ulysses_source})": (cp > 1) & ~ring & ~ulysses,
            f"{self.title} runs Ulysses sequence parallelism without tensor parallelism ({self.ulysses_source})": (
                cp > 1
            )
            & ~ring
            & (tp > 1)
            & (not self.ulysses_with_tp),
        }

    def _chunk_rules(self, pp, v, layers: int) -> dict[str, np.ndarray]:
        """Interleaving whose PP x v chunks this framework cannot split the layers into (``chunk_split``)."""
        if self.chunk_split == "any":
            return {}
        if self.chunk_split == "even":
            broken = (v > 1) & (layers % np.maximum(pp * v, 1) != 0)
            return {
                f"{self.title} interleaving needs PP x chunks to divide the layers ({self.interleave_source})": broken
            }
        broken = (v > 2) & ~layers_per_stage_chunks(layers, pp * v)
        return {
            f"{self.title} interleaving of more than 2 chunks per rank needs a layer count per stage that makes "
            f"exactly PP x chunks stages ({self.interleave_source})": broken
        }

    def _bad_seq_len(self, seq, tp, cp) -> np.ndarray:
        """Layouts whose sequence length does not split evenly over their TP and CP ranks (``seq`` None, a strategy
        checked without its job's sequence: none)."""
        if seq is None or self.seq_len_split == "none":
            return np.zeros(np.shape(tp), dtype=bool)
        if self.seq_len_split == "per_cp_rank":
            return (tp > 1) & ((seq % cp != 0) | ((seq // np.maximum(cp, 1)) % tp != 0))
        return ((tp > 1) | (cp > 1)) & (seq % (tp * 2 * cp) != 0)

    def _recompute_rules(self, grid: dict[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
        """Full recompute of some layers only (``recompute_layers`` > 0; the grid's RECOMPUTE_LEAST is resolved
        to a count this framework runs: ``recompute_count``)."""
        n = grid.get("recompute_layers", 0 * grid["tp"])
        partial = (grid["recompute"] == Recompute.FULL) & (n > 0)
        named = np.minimum(n, np.ceil(layers / np.maximum(grid["pp"], 1)))  # (more than a stage has: all of them)
        runs = named == recompute_count(self.partial_recompute, n, layers, grid["pp"], grid["virtual_stages"])
        how = {"block": "the same number of layers in each of a rank's pipeline chunks", "every_k": "every k-th layer"}
        return {
            f"{self.title} has no per-op selective recompute ({self.op_recompute_source})": (
                grid["recompute"] == Recompute.OP
            )
            & (not self.op_recompute),
            f"{self.title} recomputes every layer or none ({self.partial_recompute_source})": partial
            & (self.partial_recompute == "none"),
            f"{self.title} recomputes {how.get(self.partial_recompute, '')} ({self.partial_recompute_source})": (
                partial & (self.partial_recompute != "none") & ~runs
            ),
        }


_DEEPSPEED_PIPE = "deepspeed/runtime/pipe/engine.py: 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'"
_MEGATRON_ARGS = "Megatron-LM megatron/training/arguments.py"

FRAMEWORKS: dict[str, Framework] = {
    "fsdp": Framework(
        name="fsdp",
        methods_source="torchtune's FSDP2 recipes (full_finetune_distributed, lora_finetune_distributed with its "
        "QLoRA configs); Hugging Face PEFT with FSDP and bitsandbytes' FSDP-QLoRA (bitsandbytes docs 'FSDP-QLoRA', "
        "PEFT 0.10.0)",
        title="PyTorch FSDP (HF Trainer / accelerate)",
        zero_stages=frozenset({0, 2, 3}),
        zero_source="FSDP ShardingStrategy NO_SHARD / SHARD_GRAD_OP / FULL_SHARD, torch.distributed.fsdp docs",
        # ZeRO 0 on more than one GPU is torch DDP (accelerate's and the HF Trainer's multi-GPU default without an
        # FSDP config, Lightning's DDP strategy), gradient_as_bucket_view left False
        ddp_gradient_copy=True,
        frees_gradients=True,  # the HF Trainer's model.zero_grad(), accelerate's and Lightning's zero_grad()
        fp32_reduce_below_zero=1,
        reduce_source="DDP under autocast keeps the parameters, so their gradients and the all-reduce, in fp32 "
        "(accelerate's and the HF Trainer's multi-GPU default); accelerate's FSDP plugin reduces in the mixed "
        "precision dtype (src/accelerate/utils/dataclasses.py FullyShardedDataParallelPlugin.set_mixed_precision: "
        "MixedPrecision(param_dtype=dtype, reduce_dtype=dtype, buffer_dtype=dtype))",
        fp32_gradient_buffer=False,
        hybrid_shard=True,
        hybrid_source="FSDP ShardingStrategy.HYBRID_SHARD",
        tensor_parallel=False,
        tp_max_zero=3,
        tp_source="accelerate's FSDP plugin shards data-parallel ranks only",
        pipeline=False,
        pp_max_zero=3,
        pp_with_tp=False,
        pp_source="HF Trainer has no pipeline schedule",
        interleaved=False,
        chunk_split="even",
        uneven_stages=False,
        interleave_source="no pipeline schedule",
        offload=False,
        offload_source="FSDP CPUOffload moves parameters and gradients too, not the optimizer alone",
        partial_recompute="every_k",
        partial_recompute_source="torchtune training/_activation_checkpointing.py apply_selective_activation_"
        "checkpointing (ac_mode 'selective', ac_option k: every k-th block), over torch.distributed's "
        "apply_activation_checkpointing, which wraps the blocks its check_fn selects",
        optimizer_in_backward=True,
        optimizer_in_backward_source="torchtune's full fine-tune recipes, optimizer_in_bwd (Tensor.register_post_"
        "accumulate_grad_hook); refused with gradient_accumulation_steps > 1 (recipes/full_finetune_single_device.py, "
        "full_finetune_distributed.py); its LoRA recipes have none (docs memory_optimizations.rst: no 'meaningful "
        "impact when finetuning LoRA'); bitsandbytes optimizers on its FSDP2 distributed recipes: single device only "
        "(memory_optimizations.rst; torchtune issue 1856, 'PagedAdamW is not compatible with FSDP2')",
        optimizer_in_backward_methods=frozenset({"full"}),
        optimizer_in_backward_sharded=frozenset({"adamw", "sgd", "adafactor"}),
        optimizers_source="Hugging Face Trainer's optim (adamw_torch, adamw_bnb_8bit, paged_adamw_32bit, "
        "paged_adamw_8bit, sgd, adafactor) on FSDP1, accelerate's default fsdp_version",
        activation_offload=True,
        activation_offload_source="torchtune enable_activation_offloading (training/_activation_offloading.py, "
        "OffloadActivations), with or without activation checkpointing",
        hf_experts=True,
        hf_experts_source="HF Trainer and accelerate train transformers' modeling code: an MoE's experts run as its "
        "experts_implementation (transformers docs 'Experts backends'); FSDP wraps whole decoder layers",
    ),
    "deepspeed": Framework(
        name="deepspeed",
        reduce_source="deepspeed/runtime/engine.py (edaa72212, 2026-08-22): communication_data_type, unset, is "
        "torch.bfloat16 under bf16",
        methods_source="Hugging Face PEFT docs 'DeepSpeed': LoRA with ZeRO-1/2/3 and 'Use PEFT QLoRA and DeepSpeed "
        "with ZeRO3' (PEFT 0.10.0, bitsandbytes >= 0.43)",
        title="DeepSpeed",
        zero_stages=frozenset({0, 1, 2, 3}),
        zero_source="DeepSpeed config zero_optimization.stage 0-3",
        hybrid_shard=True,
        hybrid_source="ZeRO++ hierarchical partitioning, zero_hpz_partition_size (Wang et al. 2023)",
        tensor_parallel=True,
        tp_max_zero=2,
        tp_source="DeepSpeed AutoTP training tutorial: tensor_parallel.autotp_size with ZeRO stage 0, 1 or 2",
        sequence_parallel=False,
        sequence_parallel_source="AutoTP shards the Linear layers only (deepspeed/module_inject/auto_tp.py: "
        "LinearAllreduce and LinearLayer replace nn.Linear); the norms and the residual stream stay whole on "
        "every TP rank",
        pipeline=True,
        pp_max_zero=1,
        pp_with_tp=False,
        pp_source=_DEEPSPEED_PIPE + "; AutoTP applies to Hugging Face models, not PipelineModule",
        interleaved=False,
        chunk_split="even",
        uneven_stages=True,
        interleave_source="DeepSpeed's TrainSchedule is plain 1F1B; PipelineModule partition_method='parameters' "
        "balances uneven layer counts",
        offload=True,
        offload_source="ZeRO-Offload, zero_optimization.offload_optimizer (Ren et al. 2021), steps DeepSpeedCPUAdam "
        "(deepspeed/runtime/engine.py; a client optimizer raises unless zero_force_ds_cpu_optimizer is false, and "
        "accelerate replaces it with DeepSpeedCPUAdam, accelerate/utils/deepspeed.py)",
        optimizers_source="Hugging Face Trainer's optim with no optimizer block in the DeepSpeed config "
        "(transformers integrations/deepspeed.py deepspeed_optim_sched sets zero_allow_untested_optimizer); "
        "DeepSpeed's own optimizer.type has no bitsandbytes optimizer (deepspeed/runtime/config.py)",
        ulysses_exchanges=frozenset({"all_to_all", "all_to_all_repeat_kv"}),
        ulysses_source="DeepSpeed-Ulysses, deepspeed/sequence/layer.py DistributedAttention (Jacobs et al. 2023), and "
        "for Hugging Face models UlyssesSPAttentionHF (deepspeed/runtime/sequence_parallel/ulysses_sp.py); XTuner's "
        "sequence_parallel repeats K and V to the query heads before its all-to-all (xtuner dispatch llama.py); "
        "the sequence-parallel ranks are data-parallel ranks, beside ZeRO and no AutoTP (accelerate's ALST "
        "integration: ParallelismConfig(dp_shard_size, sp_backend='deepspeed', sp_size))",
        ulysses_with_tp=False,
        expert_parallel=True,
        ep_source="DeepSpeed-MoE, deepspeed.moe.layer.MoE(ep_size=...) (Rajbhandari et al. 2022); "
        "deepspeed/runtime/engine.py (0.19.8) refuses these layers under ZeRO-3: 'Native DeepSpeed MoE is not "
        "supported with ZeRO Stage 3. Use AutoEP or choose ZeRO stage 1/2'",
        ep_max_zero=2,
        optimizer_in_backward_source="ZeRO steps the optimizer after the gradient reduction of the whole step",
        activation_offload_source="activation_checkpointing.cpu_checkpointing moves Megatron-style checkpoints "
        "only; not modelled",
        zero3_gathers_source="deepspeed/runtime/engine.py no_sync: 'no_sync context manager is incompatible with "
        "gradient partitioning logic of ZeRO stage 2/3': ZeRO-3 gathers the weights and reduce-scatters the "
        "gradients every micro-batch",
        hf_experts=True,
        zero3_module_fetch=True,
        grouped_gemm_per_expert=True,
        hf_experts_source="HF Trainer and accelerate's DeepSpeed integration train transformers' modeling code (native "
        "DeepSpeed-MoE layers only with ep > 1); ZeRO-3 fetches each submodule's weights in its forward and backward "
        "hooks (DeepSpeed issue 5047: 'DS wrapping very small nn.Modules such as nn.Linear')",
    ),
    "torchtitan": Framework(
        name="torchtitan",
        frees_gradients=True,  # torchtitan train.py: optimizers.zero_grad() before each step
        fp32_reduce_below_zero=4,
        reduce_source="torchtitan/config/configs.py (b5bcd76c6, 2026-08-21): mixed_precision_reduce: "
        "Literal['float32'] = 'float32', FSDP2's MixedPrecisionPolicy.reduce_dtype; under DDP alone "
        "mixed_precision_param applies through torch.autocast, the parameters and gradients fp32",
        fp32_gradient_buffer=False,
        op_recompute=True,
        op_recompute_source="torchtitan/distributed/activation_checkpoint.py SelectiveAC (b5bcd76c, 2026-08-21): "
        "saves SDPA's, communication ops' and every second matmul's outputs, recomputes the rest",
        methods=frozenset({"full", "lora"}),
        methods_source="torchtitan/components/lora.py LoRAConverter (74181b1e8, 2026-05-08); no 4-bit NF4 base "
        "weights, so no QLoRA",
        title="torchtitan",
        zero_stages=frozenset({0, 3}),
        zero_source="torchtitan parallelism.data_parallel_shard_degree (FSDP2) / data_parallel_replicate_degree (DDP)",
        hybrid_shard=True,
        hybrid_source="torchtitan HSDP: data_parallel_replicate_degree x data_parallel_shard_degree",
        tensor_parallel=True,
        tp_max_zero=3,
        tp_source="torchtitan parallelism.tensor_parallel_degree composes with FSDP2 (Liang et al. 2025, 'TorchTitan')",
        sequence_parallel_source="torchtitan models/llama3/infra/parallelize.py apply_tp: SequenceParallel() on "
        "attention_norm, ffn_norm and the final norm (Liang et al. 2025, section 2.2.2)",
        pipeline=True,
        pp_max_zero=3,
        pp_with_tp=True,
        pp_source="torchtitan parallelism.pipeline_parallel_degree composes with FSDP2 and TP (3D)",
        interleaved=True,
        chunk_split="layers_per_stage",
        uneven_stages=True,
        interleave_source="torchtitan pipeline_parallel_schedule Interleaved1F1B: 2 stages per rank by default, the "
        "layers split unevenly (its Table 5: Llama 3.1 405B, 126 layers, at PP 8); more take "
        "pipeline_parallel_layers_per_stage N, ceil((layers + embedding + output) / N) stages differing by one "
        "layer at most (torchtitan/distributed/pipeline_parallel.py, v0.2.2 and b5bcd76c)",
        offload=False,
        offload_source="torchtitan's CPU offload moves parameters and gradients too (FSDP2 CPUOffloadPolicy)",
        context_parallel=True,
        cp_source="torchtitan parallelism.context_parallel_degree (ring attention)",
        expert_parallel=True,
        ep_source="torchtitan parallelism.expert_parallel_degree; distributed/parallel_dims.py (0.3.0): "
        "efsdp = dp_shard * cp * tp // ep, the sparse mesh (pp, dp_replicate, efsdp, ep)",
        ep_from_shard_group=True,
        optimizer_in_backward=True,
        optimizer_in_backward_source="torchtitan optimizer.early_step_in_backward (v0.2.2 job_config.py; removed "
        "after it, pytorch/torchtitan 3269); components/optimizer.py raises with pipeline or expert parallelism",
        optimizers=frozenset({"adamw"}),
        optimizers_source="torchtitan components/optimizer.py build_optimizers: Adam, AdamW (v0.2.2; DistMuon "
        "later), any other name NotImplementedError",
        pipeline_min_microbatches=True,
        microbatches_source="torch/distributed/pipelining/schedules.py Schedule1F1B (torch 2.13): 'Number of "
        "microbatches must be greater than or equal to the number of stages'; torchtitan's pipeline_parallel.py "
        "only warns before building it",
        seq_len_split="tp_2cp",
        seq_len_source="torchtitan ParallelDims.seq_len_divisor = tp x cp x 2, checked at start-up (0.3.0 "
        "trainer.py; v0.2.2 models/llama3/infra/parallelize.py) with TP (sequence parallel by default) or CP on",
        activation_offload_source="torchtitan's CPU offload (FSDP2 CPUOffloadPolicy) moves parameters, not activations",
        zero3_step_gathers_with_pp=True,
        zero3_gathers_source="torchtitan/distributed/fsdp.py: reshard_after_forward_policy 'default' is 'not "
        "pp_enabled' ('avoid per-microbatch all-gathers'); torch/distributed/pipelining/stage.py "
        "backward_maybe_with_nosync: set_reshard_after_backward(False) and set_requires_gradient_sync(False) "
        "until the last micro-batch's backward",
    ),
    "megatron": Framework(
        name="megatron",
        reduce_source="the Megatron export writes --grad-reduce-in-bf16, as NeMo's performance recipes set "
        "grad_reduce_in_fp32 false (Megatron-LM's own default under --bf16 is fp32: job.gradient_dtype fp32)",
        methods=frozenset({"full", "lora"}),
        methods_source="Megatron-Bridge src/megatron/bridge/peft/lora.py (LoRA, DoRA; main at 067f987d, "
        "2026-08-22); no 4-bit NF4 base weights, so no QLoRA",
        optimizers=frozenset({"adamw", "sgd"}),
        precisions=frozenset(PRECISIONS),
        precisions_source="megatron-core 0.16.1 transformer_config.py: --fp4-format e2m1 with fp4_recipe 'nvfp4' "
        "(Transformer Engine's NVFP4BlockScaling, TE >= 2.7), as Megatron-Bridge's GB200 NVFP4 recipes set it",
        seq_len_split="per_cp_rank",
        seq_len_source="megatron/core/tensor_parallel/mappings.py _split_along_first_dim: 'First dimension of the "
        "tensor should be divisible by tensor parallel size' under --sequence-parallel (the export's, with TP), "
        "each CP rank holding s / cp tokens (arguments.py: seq_length divisible by 2 x cp)",
        optimizers_source=_MEGATRON_ARGS + ": --optimizer choices adam (decoupled weight decay, AdamW), sgd, "
        "muon, lion, soap (d98e8a64, 2026-08-22): no bitsandbytes 8-bit or paged optimizer, no Adafactor",
        title="Megatron-LM / Megatron-Core / NeMo",
        zero_stages=frozenset({0, 1, 2, 3}),
        zero_source=_MEGATRON_ARGS + ": --use-distributed-optimizer shards optimizer state (ZeRO-1); "
        "--use-megatron-fsdp with --data-parallel-sharding-strategy optim_grads / optim_grads_params shards the "
        "gradients / and the weights too (ZeRO-2 / ZeRO-3: docs/user-guide/features/megatron_fsdp.md), as "
        "Megatron-Bridge's Llama 3 perf recipes run it (scripts/performance/utils/overrides.py)",
        hybrid_shard=True,
        hybrid_source="Megatron-FSDP's hybrid-sharded data parallelism: --num-distributed-optimizer-instances "
        "replicas of the sharded model state (megatron_fsdp.md, 'DP-Outer Sharding Strategy' no_shard)",
        tensor_parallel=True,
        tp_max_zero=3,
        tp_source=_MEGATRON_ARGS + ": --tensor-model-parallel-size (Shoeybi et al. 2019)",
        sequence_parallel_source=_MEGATRON_ARGS + ": --sequence-parallel (Korthikanti et al. 2022), which the "
        "Megatron-Bridge and NeMo recipes set with TP > 1",
        pipeline=True,
        pp_max_zero=1,
        pp_with_tp=True,
        pp_source=_MEGATRON_ARGS + ": --pipeline-model-parallel-size (Narayanan et al. 2021); Megatron-FSDP's "
        "documentation and Megatron-Bridge's recipes pair it with TP, CP and EP, not PP",
        interleaved=True,
        chunk_split="any",
        uneven_stages=True,
        interleave_source=_MEGATRON_ARGS + ": --pipeline-model-parallel-layout gives each of the PP x chunks its "
        "layers, the embedding and the loss (megatron/core/transformer/pipeline_parallel_layer_layout.py: any "
        "count per stage, empty stages allowed; Megatron-Bridge's perf recipes set it for Llama 3 70B, 405B and "
        "DeepSeek-V3), so the layers need not split evenly",
        offload=False,
        offload_source="--optimizer-cpu-offload (Megatron-Core, with the distributed optimizer) is not modelled",
        context_parallel=True,
        cp_source=_MEGATRON_ARGS + ": --context-parallel-size",
        ulysses_exchanges=frozenset({"all_to_all"}),
        ulysses_source=_MEGATRON_ARGS + ": --cp-comm-type a2a (Transformer Engine's DotProductAttention cp_comm_type "
        "'a2a', the Ulysses exchange)",
        expert_parallel=True,
        ep_source=_MEGATRON_ARGS + ": --expert-model-parallel-size (Megatron-Core MoE)",
        optimizer_in_backward_source="the distributed optimizer steps after the gradient reduce-scatter",
        activation_offload=True,
        activation_offload_with_recompute=False,
        activation_offload_source="Megatron-Core cpu_offloading + cpu_offloading_activations (Transformer Engine); "
        "megatron/core/transformer/transformer_config.py refuses it with PP > 1 and with recompute",
        fused_kernels=True,
        kernels_source="Megatron-Core's transformer layers run Transformer Engine's fused LayerNormLinear and "
        "LayerNormMLP modules (megatron/core/models/gpt/gpt_layer_specs.py, get_gpt_layer_with_transformer_engine_spec)",
        grouped_gemm_per_expert=True,
        hf_experts_source="Megatron-Core's MoE layers with --moe-grouped-gemm run TEGroupedMLP "
        "(megatron/core/transformer/moe/experts.py): Transformer Engine's GroupedLinear, one cuBLASLt GEMM per local "
        "expert launched from a host loop (transformer_engine/pytorch/module/grouped_linear.py)",
        expert_folding=True,
        folding_source=_MEGATRON_ARGS + ": --expert-tensor-parallel-size (Megatron-Core MoE, 'MoE Parallel Folding')",
        standard_loss_bytes_per_vocab=MEGATRON_CROSS_ENTROPY_BYTES_PER_VOCAB,
        fused_chunked_loss=True,  # --cross-entropy-fusion-impl te: Transformer Engine's fused cross-entropy
        partial_recompute="block",
        partial_recompute_source="megatron/core/transformer/transformer_config.py (d98e8a64, 2026-08-22): "
        "recompute_method 'block' recomputes recompute_num_layers layers within each pipeline stage (each "
        "chunk's TransformerBlock), the rest keep their activations",
    ),
}

# With framework: auto a layout is labelled with the first of these that runs it: the simplest tool.
PREFERENCE = ("fsdp", "deepspeed", "torchtitan", "megatron")
# LoRA plans gpuplan's exports cannot write, though the framework trains LoRA (the rules above): Megatron-LM's
# pretrain_gpt.py trains every weight, LoRA being Megatron-Bridge's PEFT; the torchtitan export writes no LoRA
# converter. The DeepSpeed and accelerate configs are the same for a PEFT model, which the script builds.
LORA_EXPORT_GAPS = {
    "megatron": "Megatron-LM's pretrain_gpt.py trains every weight: LoRA runs in Megatron-Bridge's PEFT "
    "(megatron.bridge.peft.lora.LoRA), which this export does not write",
    "torchtitan": "the torchtitan export writes no LoRA converter (torchtitan/components/lora.py)",
}
# job.method as the grid's constant "method" column
METHOD_CODES = {"full": 0, "lora": 1, "qlora": 2}
CODES = {name: i for i, name in enumerate(PREFERENCE)}
