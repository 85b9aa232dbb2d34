"""The training job (``JobSpec``): model, method, tokens, batch, precision, kernels, and the short-run
measurements (``Measurement``) that calibrate it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    model_validator,
)

from .. import units
from ..roles import RolesSpec
from .base import _Model
from .model import ModelSpec
from .types import (
    Bytes,
    Count,
    Method,
    Name,
    Precision,
    _unit,
)

Rate = Annotated[float, BeforeValidator(lambda v: units.parse_rate(v, "a throughput in tokens/s")), _unit("14.8k")]


class Measurement(_Model):
    """A short run's throughput (and peak memory) on one configuration."""

    sku: str = Field(description="GPU name or alias, as check --sku.")
    gpus: int = Field(ge=1)
    nodes: int | None = Field(None, ge=1, description="Default: the fewest nodes that hold the GPUs.")
    tokens_per_s: Rate = Field(gt=0, description="Measured training throughput, e.g. 14.8k.")
    peak_memory_bytes: Bytes | None = Field(None, alias="peak_memory", gt=0, description="Peak per GPU, e.g. 71GiB.")
    # the --measured text this came from (None: the job file), so that an error names the flag
    _flag: str | None = PrivateAttr(None)

    def from_flag(self, text: str) -> Measurement:
        self._flag = text
        return self

    @property
    def flag(self) -> str | None:
        return self._flag


class JobSpec(_Model):
    name: Name = "job"
    model: ModelSpec
    method: Method = "full"
    lora_rank: int = Field(16, ge=1)
    trainable_params: Count | None = Field(None, gt=0, description="Adapter parameters without shapes (LoRA/QLoRA).")
    teacher_params: Count | None = Field(
        None, gt=0, description="A frozen teacher/target run forward-only each step (distillation, drafters)."
    )
    tokens: Count | None = Field(None, gt=0, description="Tokens to process in total.")
    dataset_tokens: Count | None = Field(None, gt=0)
    epochs: float | None = Field(None, gt=0)
    seq_len: int = Field(4096, ge=1)
    global_batch: int | str | None = Field(
        None,
        description="Sequences per optimizer step (an int) or tokens ('4M tokens'); default: a fine-tune's "
        "recipe batch (131,072 tokens a step), a pre-training's free batch; 'free': any batch gpuplan finds "
        "cheapest up to twice the compute-optimal one.",
    )
    precision: Precision = "bf16"
    optimizer: Literal["adamw", "adamw8bit", "paged_adamw", "paged_adamw8bit", "sgd", "adafactor"] = Field(
        "adamw",
        description="paged_*: bitsandbytes paged optimizers, whose state pages to CPU memory when the GPU runs "
        "out (Dettmers et al. 2023, QLoRA), so it is not counted in GPU memory.",
    )
    optimizer_implementation: Literal["fused", "foreach"] = Field(
        "fused",
        description="How the optimizer step runs: fused (one kernel over every parameter: Megatron-Core's and "
        "DeepSpeed's FusedAdam, torchtitan's and torchtune's fused AdamW, the HF Trainer's adamw_torch_fused, its "
        "default from transformers' switch for torch >= 2.8) or foreach (PyTorch's default for torch.optim.AdamW "
        "and SGD without fused=True: a kernel per operation, about 2.5x the step's memory traffic: plain PyTorch "
        "loops, Lightning, the HF Trainer's adamw_torch). Changes the optimizer step's time "
        "(physics/optimizer_step.py).",
    )
    bytes_per_param: float | None = Field(
        None,
        gt=0,
        description="Training-state bytes per parameter: the whole state (weights, gradients, optimizer, and any "
        "copy a framework keeps of them, such as torch DDP's gradient buckets).",
    )
    activation_reserve: Literal["auto"] | float | str = Field(
        "auto", description="auto (from shapes), a size per GPU (40GB) or a fraction of capacity (0.2)."
    )
    attention: Literal["flash", "flash3", "cudnn", "efficient", "eager"] = Field(
        "flash",
        description="Attention kernels: flash (fused, the framework's own: PyTorch SDPA's FlashAttention-2, "
        "Transformer Engine's cuDNN attention under Megatron-Core), flash3 (FlashAttention-3, Hopper's: transformers' "
        "flash_attention_3), cudnn (cuDNN's fused attention whatever the "
        "framework: Transformer Engine's attention in a PyTorch stack, SDPA's cuDNN backend), efficient (SDPA's "
        "memory-efficient kernel under an explicit attention mask, as transformers passes a padded batch's: every "
        "block of the s x s square computed), eager (the s x s scores materialised). Their speed: "
        "physics/attention.py.",
    )
    lora_targets: Literal["all_linear", "attention", "qkv"] = Field(
        "all_linear",
        description="LoRA on every linear layer, on q, k, v and o only (attention), or on the fused query-key-value "
        "projection only (qkv: Megatron's linear_qkv, as NeMo's and Megatron-Bridge's performance recipes).",
    )
    lora_dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="LoRA dropout probability (PEFT's LoraConfig.lora_dropout, 0 by default): above 0 each adapted "
        "linear runs a dropout kernel on its input and keeps its mask (physics/adapters.py).",
    )
    lora_adapter_dtype: Literal["auto", "bf16", "fp32"] = Field(
        "auto",
        description="The LoRA adapters' dtype in the step's branch kernels: auto (fp32 where PEFT upcasts a 16-bit "
        "model's adapters and no autocast runs: LoRA with kernels eager, master_weights false, framework fsdp, "
        "deepspeed or auto; else the model's 16 bits), bf16 or fp32 as stated.",
    )
    loss: Literal["standard", "chunked", "flash", "fused", "bf16"] = Field(
        "standard",
        description="Cross-entropy memory: standard (the framework's own: PyTorch's fp32 log-softmax and "
        "gradients, Megatron-Core's in place), chunked (bf16 logits, fp32 per chunk: torchtune), flash "
        "(flash-attn's Triton cross-entropy: bf16 logits and their gradient; llm-foundry's default), fused (no "
        "full logits: Liger's fused linear cross-entropy), bf16 (PyTorch's cross-entropy on the bf16 logits, no "
        "fp32 upcast: its log-softmax and two gradients in bf16).",
    )
    kernels: Literal["auto", "fused", "eager"] = Field(
        "auto",
        description="Kernels: fused (Transformer Engine's norms and SwiGLU, Megatron-Core's or a PyTorch stack's) keep "
        "fewer activations than eager PyTorch (Hugging Face, torchtitan) and, without compile, run at its speed; "
        "eager: eager PyTorch's activations and speed for every layout, a Megatron-style one included (nanotron); "
        "auto: the framework's each layout is labelled with (fused for megatron or under compile, else eager).",
    )
    compile: bool = Field(
        False,
        description="The model runs under torch.compile (torchtitan compile.enable, torchtune compile, HF "
        "Trainer torch_compile): an eager PyTorch stack's element-wise kernels fused, at the published compiled "
        "over eager speed-up (physics/efficiency.py COMPILE_SPEEDUPS) and with fused kernels' activations under "
        "kernels: auto. Megatron-Core layouts keep Transformer Engine's fused kernels. Default false, as the "
        "frameworks ship it (torchtitan CompileConfig.enable = False).",
    )
    recompute_modules: list[Literal["core_attn", "layernorm", "moe_act", "mlp"]] | None = Field(
        None,
        description="What selective recompute re-runs, as Megatron-Core's --recompute-modules names it (with "
        "recompute selective): core_attn (the attention core), layernorm and moe_act (output-discarding: the "
        "norms' outputs, the routed experts' activation output), mlp (a dense MLP layer). Counted where Transformer "
        "Engine's layers run (framework megatron); unset: [core_attn], Megatron-Core's default and gpuplan's "
        "selective.",
    )
    framework: Literal["auto", "megatron", "deepspeed", "torchtitan", "fsdp"] = Field(
        "auto",
        description="The framework the team runs: only layouts it can run are planned (auto: the best over all, "
        "each labelled with a framework that runs it).",
    )
    # set by check where it pins a framework on a framework-auto question (never read from a file): the layout's
    # framework is the pin's, its efficiency auto's (planning/context.py fused_efficiency_ratio)
    framework_pinned: bool = Field(False, exclude=True)
    offload: Literal["none", "optimizer", "auto"] = Field(
        "none", description="Optimizer state in CPU memory (ZeRO-Offload): never, always, or where it pays."
    )
    optimizer_in_backward: bool = Field(
        False,
        description="Optimizer step fused into the backward pass, each parameter updated and its gradient freed as "
        "soon as it is computed, so no full set of gradients is held (torchtune optimizer_in_bwd, torchtitan "
        "optimizer.early_step_in_backward; PyTorch tutorial 'How to save memory by fusing the optimizer step into "
        "the backward pass'). No gradient accumulation and no pipeline parallelism with it.",
    )
    gradient_dtype: Literal["auto", "bf16", "fp32"] = Field(
        "auto",
        description="The dtype gradients accumulate and reduce in: bf16 (2 bytes a gradient; the Megatron export "
        "writes --grad-reduce-in-bf16, as NeMo's performance recipes set grad_reduce_in_fp32 false), fp32 (twice "
        "the data-parallel reduce traffic, and under Megatron 4 bytes a gradient: Megatron-LM's default under "
        "--bf16, NeMo's bf16 DDP config, nanotron's accumulate_grad_in_fp32) or auto: each framework's own with "
        "fp32 master weights (fp32 under torchtitan, whose mixed_precision_reduce is float32 only, and under "
        "DDP with autocast; bf16 under Megatron as exported, DeepSpeed and accelerate's FSDP).",
    )
    pipeline_split: Literal["layers", "compute"] = Field(
        "layers",
        description="How pipeline stages divide the model: layers (L / PP layers a stage, the embedding on the first "
        "and the LM head on the last: Megatron-Core's default) or compute (contiguous blocks by cumulative matmul "
        "cost, the LM head weighing its V x h parameters, so the first stage takes more layers: nanotron's build_model "
        "with get_block_compute_costs).",
    )
    context_parallel: Literal["ring", "all_to_all", "all_to_all_repeat_kv"] = Field(
        "ring",
        description="How context-parallel ranks (CP, --cp) exchange what attention needs: ring (ring attention: K and V "
        "passed around the CP ranks, overlapped with attention; Megatron-Core's --cp-comm-type p2p, torchtitan's "
        "context_parallel), all_to_all (Ulysses: an all-to-all re-shards q, k, v by heads before attention and one "
        "brings the output back, not overlapped; the query heads must split over TP x CP, K and V replicated up to one "
        "head a rank where there are fewer than CP: DeepSpeed-Ulysses, DeepSpeed's UlyssesSPAttentionHF, "
        "Megatron-Core's --cp-comm-type a2a) or all_to_all_repeat_kv (the same with K and V repeated to every query "
        "head before the all-to-all: XTuner's sequence_parallel).",
    )
    gradient_accumulator: Literal["in_place", "after_backward", "unsharded"] = Field(
        "in_place",
        description="Where backward writes the gradients: in_place (default: into the buffer gpuplan counts, "
        "Megatron-Core's main_grad, PyTorch's .grad, FSDP's and DeepSpeed's partitions) or after_backward (fresh 16-bit "
        "gradients of every parameter of the stage each micro-batch, added to the fp32 buffer when its backward ends, "
        "and reduced through torch DDP's bucket copy without ZeRO: nanotron's FP32GradientAccumulator) or unsharded "
        "(FSDP2 with set_requires_gradient_sync(False) on every micro-batch but the last: each unit's gradient kept "
        "unsharded in fp32 until the last one's reduce-scatter, KempnerForge's maybe_no_sync).",
    )
    loss_parallel: bool = Field(
        True,
        description="With TP, whether the loss runs on logits split over the vocabulary (Megatron-Core's "
        "vocab-parallel cross-entropy, torchtitan's loss_parallel) or, false, on the whole vocabulary's logits "
        "gathered on every TP rank (an output head ColwiseParallel(output_layouts=Replicate()): KempnerForge).",
    )
    embedding_parallel: bool = Field(
        True,
        description="With TP, whether the token embedding is split over the TP ranks (Megatron-Core's "
        "VocabParallelEmbedding, torchtitan's RowwiseParallel tok_embeddings) or, false, replicated whole on every TP "
        "rank with its gradient and optimizer state (KempnerForge's tensor-parallel plan).",
    )
    master_weights: bool = Field(
        True,
        description="Mixed precision with an fp32 master copy (AdamW 12 B/param of state: Megatron, DeepSpeed, "
        "HF Trainer). false: pure bf16 as torchtune's dtype: bf16, the optimizer state in the parameters' dtype "
        "(AdamW 4 B, 8-bit AdamW 2 B, SGD 2 B).",
    )
    activation_offload: bool = Field(
        False,
        description="Activations saved for backward moved to pinned CPU memory during forward and brought back "
        "during backward, on a side stream (torchtune enable_activation_offloading, OffloadActivations; "
        "Megatron-Core cpu_offloading_activations). Costs PCIe time where the transfer outlasts the compute.",
    )
    variable_lengths: bool = Field(
        False,
        description="Samples of different lengths fed unpacked (each batch padded to its longest, up to seq_len: "
        "Hugging Face Trainer, ms-swift, LLaMA-Factory without packing), so PyTorch's caching allocator keeps the "
        "segments it cut for earlier, shorter steps beside the longest step's (physics/memory_terms.py "
        "variable_length_fragmentation_bytes). false: every step the same shape (packed or padded to seq_len).",
    )
    measured: list[Measurement] = Field(default_factory=list, description="Short-run measurements to calibrate from.")
    roles: RolesSpec | None = Field(None, description="GPUs split between roles (docs/roles.md); unset: one model.")

    @model_validator(mode="after")
    def _recompute_modules_are_megatrons(self) -> JobSpec:
        if self.recompute_modules is not None and self.framework not in ("auto", "megatron"):
            raise ValueError(
                f"job.recompute_modules is Megatron-Core's --recompute-modules, which {self.framework} does not run: "
                "set job.framework: megatron (or auto), or drop job.recompute_modules"
            )
        return self

    @model_validator(mode="after")
    def _tokens_given_once(self) -> JobSpec:
        if self.tokens is None and self.dataset_tokens is None:
            raise ValueError("give job.tokens, or job.dataset_tokens with job.epochs")
        if self.tokens is not None and self.dataset_tokens is not None:
            raise ValueError("give job.tokens or job.dataset_tokens + job.epochs, not both")
        if self.tokens is not None and self.epochs is not None:
            # tokens is the total; epochs would be ignored without a word
            raise ValueError(
                "job.epochs goes with job.dataset_tokens (tokens = dataset_tokens x epochs); with job.tokens, "
                "give the total tokens and drop epochs"
            )
        batch = self.global_batch_sequences
        if batch is not None and batch * self.seq_len > self.total_tokens:
            raise ValueError(
                f"one optimizer step of global_batch {batch:,} x seq_len {self.seq_len:,} = "
                f"{units.fmt_count(batch * self.seq_len)} tokens is more than the job's "
                f"{units.fmt_count(self.total_tokens)} tokens; lower global_batch or check the tokens"
            )
        return self

    @property
    def tiled_attention(self) -> bool:
        """Whether the attention kernels never store the s x s scores (every kernel but eager): selective
        recompute of the core then frees nothing more, and context parallelism splits the sequence."""
        return self.attention != "eager"

    @property
    def free_batch(self) -> bool:
        """``global_batch: free``: any batch up to the scaling-law cap, whatever the method."""
        return isinstance(self.global_batch, str) and self.global_batch.strip().lower() == "free"

    @property
    def total_tokens(self) -> float:
        if self.tokens is not None:
            return float(self.tokens)
        return float(self.dataset_tokens or 0.0) * float(self.epochs or 1.0)

    @property
    def global_batch_sequences(self) -> int | None:
        """The batch the job file gives, in sequences (None: not given, or free)."""
        if self.global_batch is None or self.free_batch:
            return None
        if isinstance(self.global_batch, int):
            return self.global_batch
        return units.batch_sequences(units.parse_count(self.global_batch, "job.global_batch"), self.seq_len)
