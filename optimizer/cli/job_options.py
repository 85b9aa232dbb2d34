"""The job flags for the job fields that say how the job runs rather than what it trains: the data set and its
epochs, the loss's and attention's kernels, the context-parallel exchange, unpacked samples, activation and optimizer offload. Each is the job
file's field of the same name (``inputs/schema/job.py``), its values the schema's, its default the schema's; the
help says what it changes in the answer."""

from __future__ import annotations

import typer

DatasetTokensOpt = typer.Option(
    None,
    "--dataset-tokens",
    help="Tokens in the data set, trained on --epochs times (500M, 2T), in place of --tokens: the total is their "
    "product, so the time and cost. Default: the job file's job.dataset_tokens (a question without a file needs "
    "--tokens or this).",
)
EpochsOpt = typer.Option(
    None,
    "--epochs",
    help="Passes over --dataset-tokens (2, 1.5): the total tokens, so the time and cost, scale with it. Default: "
    "the job file's job.epochs, else 1. Goes with dataset tokens, not with --tokens (already the total).",
)
LossOpt = typer.Option(
    None,
    "--loss",
    help="Cross-entropy's memory at its peak: standard (the framework's own: PyTorch's fp32 log-softmax and "
    "gradients), chunked (bf16 logits, fp32 a chunk at a time: torchtune), flash (flash-attn's Triton loss, bf16 "
    "logits: llm-foundry), fused (no whole logits: Liger) or bf16 (PyTorch's loss on bf16 logits, no fp32 "
    "upcast). Changes the activation memory, so which layouts "
    "fit. Default: the job file's job.loss, else standard.",
)
AttentionOpt = typer.Option(
    None,
    "--attention",
    help="Attention kernels: flash (the framework's fused attention), flash3 (FlashAttention-3, Hopper), cudnn "
    "(cuDNN's fused attention whatever the framework), efficient (SDPA's memory-efficient kernel under a mask: "
    "padded batches through transformers) or eager (the s x s scores held). Changes the attention's speed, so the "
    "step time and cost; eager also the activation memory. Default: the job file's job.attention, else flash.",
)
ContextParallelOpt = typer.Option(
    None,
    "--context-parallel",
    help="How context-parallel ranks (--cp) exchange what attention needs: ring (ring attention, K and V passed "
    "around and overlapped: Megatron-Core's p2p, torchtitan), all_to_all (Ulysses: q, k, v re-sharded by heads, "
    "not overlapped: DeepSpeed, Megatron-Core's a2a) or all_to_all_repeat_kv (Ulysses with K and V repeated to "
    "the query heads: XTuner). Changes the CP layouts' network time and which CP sizes run. Default: the job "
    "file's job.context_parallel, else ring.",
)
OptimizerImplementationOpt = typer.Option(
    None,
    "--optimizer-implementation",
    help="How the optimizer step runs: fused (one kernel: Megatron's and DeepSpeed's FusedAdam, torchtitan, "
    "torchtune, the HF Trainer's adamw_torch_fused) or foreach (torch.optim.AdamW's own default: a kernel per "
    "operation, about 2.5x the step's memory traffic: plain PyTorch loops, Lightning, HF's adamw_torch). Changes "
    "the optimizer step's time. Default: the job file's job.optimizer_implementation, else fused.",
)
VariableLengthsOpt = typer.Option(
    None,
    "--variable-lengths/--no-variable-lengths",
    help="--variable-lengths: samples of different lengths fed unpacked (each batch padded to its longest: HF "
    "Trainer without packing), so the caching allocator's segments for shorter steps stay beside the longest "
    "step's: more memory a GPU. Default: the job file's job.variable_lengths, else off (packed).",
)
ActivationOffloadOpt = typer.Option(
    None,
    "--activation-offload/--no-activation-offload",
    help="--activation-offload: activations saved for backward kept in pinned CPU memory (torchtune, "
    "Megatron-Core), so less GPU memory, PCIe time where the copy outlasts the compute, and only the "
    "frameworks that do it. Default: the job file's job.activation_offload, else off.",
)
OffloadOpt = typer.Option(
    None,
    "--offload",
    help="Optimizer state in CPU memory (ZeRO-Offload): none (on the GPUs), optimizer (always, under ZeRO-2 or 3: less GPU "
    "memory, the optimizer step on the CPU and its PCIe traffic in the step time) or auto (gpuplan plans both, "
    "keeps the better). Default: the job file's job.offload, else none.",
)
LoraDropoutOpt = typer.Option(
    None,
    "--lora-dropout",
    help="LoRA dropout probability (PEFT's lora_dropout): above 0 each adapted linear runs a dropout kernel and "
    "keeps its mask, which the step time counts. Default: the job file's job.lora_dropout, else 0.",
)
LoraAdapterDtypeOpt = typer.Option(
    None,
    "--lora-adapter-dtype",
    help="The LoRA adapters' dtype in the step's branch kernels: auto (fp32 where PEFT upcasts a 16-bit model's "
    "adapters and no autocast runs), bf16 or fp32. Default: the job file's job.lora_adapter_dtype, else auto.",
)
