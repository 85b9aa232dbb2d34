"""Memory terms of particular libraries a run trains with, beside the general terms of ``physics/memory.py``.

Each term is what a library's own code keeps on the GPU beyond the count ``memory.layer_activation_bytes`` measures
for plain PyTorch, with the source line that keeps it.
"""

from __future__ import annotations

import numpy as np

from .constants import ACTIVATION_OFFLOAD_RESIDENT_LAYERS
from .layout import Layout, Recompute, RunSettings
from .pipeline import in_flight
from .shapes import ModelShape, TrainingState


def bnb_saved_input_bytes_per_token(shape: ModelShape) -> float:
    """Bytes per token and block that bitsandbytes' 4-bit linears keep and a frozen 16-bit base does not.

    bitsandbytes/autograd/_functions.py, ``MatMul4Bit.forward``: ``if any(ctx.needs_input_grad[:2]): ctx.tensors =
    (A, B)``: the input A of every 4-bit linear is kept whenever A needs a gradient, which it does in every block of
    a fine-tune, though the frozen weight needs no gradient. A frozen 16-bit ``nn.Linear`` keeps nothing of its
    input: PyTorch's autograd saves an operand only for the other operand's gradient (torchgen
    ``gen_variable_type.py``: each saved variable guarded by ``should_compute_output`` of the gradient that reads
    it). So over a LoRA run on the same layout a bitsandbytes QLoRA run also keeps the inputs of the linears whose
    input nothing else saves: the two norms' outputs (the QKV and gate/up or fc1 input, 2h each: the norm saves its
    own input and its frozen weight saves nothing of the output), the output projection's input (2q: the copy
    ``transpose(1, 2).reshape`` makes of the attention output) and the down projection's (fc2's) input (2f: the
    SwiGLU or GeLU saves its inputs, not its output). Routed experts are 3-D parameters in transformers, not
    ``nn.Linear`` modules, and stay unquantised, so an MoE layer adds its dense share only.

    LitGPT's resource table (validation/memory_runs.yaml, litgpt-*-qlora) puts its 4-bit rows above its 16-bit
    LoRA rows, less the weights, by 0.8-2.8 GiB, growing with the token count, the layers and the widths as this
    does (Llama 2 7B at 1304 tokens: 1.81 GiB)."""
    h, q = shape.hidden, shape.q_width
    dense_f = shape.ffn_active * (1.0 - shape.moe_layer_share) if shape.experts else shape.ffn_active
    return 2.0 * h + 2.0 * h + 2.0 * q + 2.0 * dense_f


def bnb_saved_input_bytes(shape: ModelShape, settings: RunSettings, layout: Layout) -> np.ndarray:
    """Per GPU, ``bnb_saved_input_bytes_per_token`` over the layers of the busiest stage whose tensors wait for
    backward, as ``memory.activation_bytes`` counts them: every layer not recomputed, with min(p, m) micro-batches
    in flight, or, where layers are recomputed, at least the one being re-run (its working set); split by TP
    and CP as the block's tensors are."""
    tp, pp, cp = (np.asarray(v, float) for v in (layout.tp, layout.pp, layout.cp))
    tokens = float(settings.seq_len) * np.asarray(layout.micro_batch, float)
    rc = np.asarray(layout.recompute)
    share = np.where(rc == Recompute.OP, 1.0, layout.recomputed_share(shape.layers))
    held = layout.stage_layers(shape.layers) * in_flight(pp, layout.grad_accum) * (1.0 - share)
    if settings.activation_offload:
        held = np.minimum(held, ACTIVATION_OFFLOAD_RESIDENT_LAYERS)
    layers = np.where(share > 0, np.maximum(held, 1.0), held)
    return tokens * bnb_saved_input_bytes_per_token(shape) * layers / (tp * cp)


def kbit_upcast_bytes(train: TrainingState, layout: Layout) -> np.ndarray:
    """Per GPU, the bytes PEFT's ``prepare_model_for_kbit_training`` adds to a bitsandbytes QLoRA base that is not
    sharded: huggingface/peft src/peft/utils/other.py, "cast all non INT8 parameters to fp32": every fp16/bf16
    parameter that is not a ``Params4bit`` (the embeddings, the LM head, the norms: ``bf16_base_params``) goes to
    fp32, 2 bytes more each. TRL's SFTTrainer calls it for every 4-bit model except a sharded one (trl
    trainer/sft_trainer.py, ``_prepare_peft_model``: ``if is_qlora and not is_sharded_qlora``, "Check if model is
    sharded (FSDP/DS-Zero3)"), so ZeRO-3 layouts keep them in 16 bits. Llama 3.1 8B: 1.05e9 parameters, 1.96 GiB,
    the constant Unsloth's Hugging Face + FA2 context table sits above gpuplan by without it."""
    if not train.bnb_saved_inputs:
        return np.zeros(np.shape(np.asarray(layout.zero)))
    model_parallel = np.asarray(layout.tp, float) * np.asarray(layout.pp, float)
    return np.where(np.asarray(layout.zero) >= 3, 0.0, 2.0 * train.bf16_base_params / model_parallel)


# DeepSpeed's default stage3_max_reuse_distance, in parameters (deepspeed/runtime/zero/config.py: max_reuse_distance =
# Field(pp_int(1e9)), "Do not release a parameter if it will be reused within this threshold of parameters").
DEEPSPEED_MAX_REUSE_DISTANCE_PARAMS = 1e9


def deepspeed_held_block_params(block_params, largest_module_params) -> np.ndarray:
    """Parameters per GPU of the block ZeRO-3 keeps gathered through its backward beyond the largest single module
    that ``memory.deepspeed_gathered_params`` already counts. DeepSpeed releases a module's parameters after it
    runs unless the trace reuses them within ``stage3_max_reuse_distance`` parameters
    (deepspeed/runtime/zero/partitioned_param_coordinator.py, ``__params_to_release``: "Return persistent params and
    params that may be used in the near future"); a block's backward (after its recomputed forward, or, without
    recompute, its modules' backward one after another) reuses each of its modules within one block's parameters,
    so a whole block of up to 1e9 parameters stays gathered while it runs, not one module."""
    held = np.minimum(np.asarray(block_params, float), DEEPSPEED_MAX_REUSE_DISTANCE_PARAMS)
    return np.maximum(held - np.asarray(largest_module_params, float), 0.0)


def variable_length_fragmentation_bytes(fragmentation_bytes, activation_bytes, settings: RunSettings) -> np.ndarray:
    """PyTorch's caching allocator's reserved-minus-allocated gap per GPU when the steps' sequences differ in length
    (``RunSettings.variable_lengths``): the step's length-dependent working set (``activation_bytes``: the saved
    activations and the loss's tensors) once more, not one largest tensor (``memory.allocator_fragmentation_bytes``,
    the fixed-shape gap), whichever is larger.

    PyTorch's CUDA semantics notes, "Optimizing memory usage with PYTORCH_CUDA_ALLOC_CONF", ``expandable_segments``:
    large allocations are cudaMalloc'ed at the size requested and reused for requests that fit; when a step runs at a
    larger size than before "it will have to make new allocations that are slightly larger ... As the model runs it
    will partially fill up all of these segments leaving unusable free slices of memory at the end of these segments
    ... With models 50+ layers deep, this pattern might repeat 50+ times creating many slivers." A run over samples of
    many lengths keeps the segments its earlier, shorter steps cut beside those of its longest, which hold about one
    more copy of the tensors whose size follows the length; the allocator frees that cache only when a cudaMalloc
    fails, so ``memory.framework_reserve_bytes`` bounds it by the room the capacity leaves.

    Scored on ms-swift's benchmark (validation/memory_runs.yaml, family ms-swift-benchmark: swift sft on
    cls-fudan-news-zh, 91-19,548 tokens a sample, torch.cuda.max_memory_reserved), whose Qwen 1.8B, 7B and 14B LoRA
    rows sit above gpuplan's fixed-shape figure by the same 2.2, 4.7 and 7.8 GiB at 512, 1024 and 2048 tokens
    whatever the model's size: a length-dependent term, where the Qwen README's own fine-tunes of the same models,
    padded to one length, sit on gpuplan's figure. Nothing here is fitted on those rows."""
    fixed = np.asarray(fragmentation_bytes, float)
    if not settings.variable_lengths:
        return fixed
    return np.maximum(fixed, np.asarray(activation_bytes, float))


def backward_gradient_bytes_per_token(shape: ModelShape) -> tuple[float, float]:
    """Bytes per token of the activation gradients alive at the peak of one block's backward beyond the tensors the
    block saved (``memory.layer_activation_bytes``), as (hidden-width part, MLP-width part); TP splits the second,
    and the first only under sequence parallelism (``memory.activation_bytes``).

    PyTorch's autograd frees a node's saved tensors once the node has run (torch/csrc/autograd/engine.cpp,
    ``call_function``: ``fn.release_variables()`` unless the graph is kept) and a gradient once the node that reads it
    has run, so a block's backward peaks in its MLP, every saved tensor but the down projection's input still held:
    the block output's gradient (2h, handed by the residual add to both branches), the down projection's input
    gradient (2f, its saved input of 2f released) and, in a gated MLP (transformers' LlamaMLP, ``down_proj(act_fn(
    gate_proj(x)) * up_proj(x))``), the multiply's two input gradients (2f each) while that 2f is alive: 2h + 4f over
    the saved set; ungated (``fc2(act(fc1(x)))``) the activation's input gradient alone, 2h + 2f. Transformer
    Engine's fused SwiGLU backward writes one [s, 2f] gradient the same way. They follow the loss's tensors, which
    are freed first, so a plan holds the larger of the two: they show where the loss keeps few logits (Liger's or
    Cut Cross Entropy's fused loss, a long sequence over a small vocabulary). ``memory.activation_bytes`` counts them
    on the last stage as the larger of them and the loss's tensors, a re-run layer's backward included; it still adds
    the re-run layer's working set on top of the loss's tensors, which never coexist (BENCHMARKS, session 41)."""
    f = shape.ffn_active
    return 2.0 * shape.hidden, (4.0 if shape.gated_mlp else 2.0) * f


def block_matmul_params(shape: ModelShape) -> float:
    """One block's matmul parameters, the cost nanotron balances its pipeline stages by (src/nanotron/models/llama.py
    ``get_block_compute_costs``: 4 x heads x d_qkv x h for the attention's QKV and output projections, 3 x d_ff x h
    for the gated MLP; the norms cost nothing): h (q + 2k) + q h + (3 or 2) h f, nanotron's count under full
    multi-head attention."""
    h, q, k, f = shape.hidden, shape.q_width, shape.kv_width, shape.ffn_active
    return h * (q + 2.0 * k) + q * h + (3.0 if shape.gated_mlp else 2.0) * h * f


def compute_split_stage_layers(shape: ModelShape, pp) -> tuple[np.ndarray, np.ndarray]:
    """Layers of the first and of the last pipeline stage where the stages divide the model by compute
    (``TrainingState.pipeline_split`` "compute"): nanotron's ``build_model`` (src/nanotron/models/base.py @ c2528430)
    walks the pipeline blocks in order (the embedding, cost 0; the L blocks, ``block_matmul_params`` each; the final
    norm, 0; the LM head, V x h; the loss, 0), places each on the current rank and moves to the next rank once the
    cumulative cost passes (r + 1) / p of the total, so rank r ends with the block that crosses its threshold. The
    first stage takes the k blocks with k c > T / p, k = floor(T / (p c)) + 1 (T = L c + V h), the last what the
    ranks before it leave: L - (floor(T (p - 1) / (p c)) + 1). nanotron's 1.34B (16 blocks, V h = 4 blocks) at PP 2:
    11 and 5 layers where an even split gives 8 and 8."""
    pp = np.asarray(pp, float)
    layers = shape.layers
    cost = block_matmul_params(shape)
    if layers <= 0 or cost <= 0:
        even = np.ceil(layers / pp)
        return even, even
    total = layers * cost + shape.vocab * shape.hidden
    first = np.minimum(np.floor(total / (pp * cost)) + 1.0, layers)
    before_last = np.minimum(np.floor(total * (pp - 1.0) / (pp * cost)) + 1.0, layers)
    last = np.maximum(layers - before_last, 0.0)
    return np.where(pp > 1, first, layers), np.where(pp > 1, last, layers)


def compute_split_stage_share(shape: ModelShape, pp) -> np.ndarray:
    """Share of the parameters outside the routed experts on the heaviest stage under the compute split
    (``compute_split_stage_layers``): the first stage's blocks and the input embedding (V h), or the last stage's
    blocks and the LM head (V h; a copy where tied), whichever is larger; 1 on one stage."""
    pp = np.asarray(pp, float)
    dense = shape.params * (1.0 - shape.expert_share)
    if dense <= 0 or not shape.layers:
        return 1.0 / pp
    per_block = max(dense - shape.embedding_params, 0.0) / shape.layers
    first, last = compute_split_stage_layers(shape, pp)
    heaviest = np.maximum(first, last) * per_block + shape.vocab * shape.hidden
    return np.where(pp > 1, np.minimum(heaviest / dense, 1.0), 1.0)


def after_backward_gradient_bytes(half_grad_bytes, one_micro_batch_bytes, layout: Layout) -> np.ndarray:
    """Per GPU, what a run whose accumulator adds the gradients after backward (``TrainingState.gradient_accumulator``
    "after_backward") holds beyond its fp32 gradient buffer, given the stage's 16-bit gradients ``half_grad_bytes``
    (unsharded) and one micro-batch's activations of the stage ``one_micro_batch_bytes``.

    nanotron's ``FP32GradientAccumulator`` (src/nanotron/optim/gradient_accumulator.py @ c2528430): ``backward`` runs
    ``loss.backward()``, which writes a 16-bit ``.grad`` for every parameter of the stage, and only then adds each into
    the fp32 buffer (``fp32_grad.add_(half_param.grad)``) and frees it (``half_param.grad = None``); the fp32 buffer
    covers every parameter even under ZeRO-1 ("we need to accumulate grads for all parameters", ``build_grad_buffers``),
    the fp32 master copy only the rank's slice (what gradient_dtype fp32 and ZeRO-1 already count). The micro-batch's
    saved activations are freed as its backward produces the gradients, so at its end the stage holds the other
    micro-batches in flight and the gradients: the peak is (in flight - 1) A + max(A, G), max(G - A, 0) above the
    activations counted. Without ZeRO and with DP > 1 nanotron wraps the model in torch DDP (trainer.py ``make_ddp``:
    ``data_parallel_size > 1 and not (accumulate_grad_in_fp32 and zero_stage > 0)``, default
    ``gradient_as_bucket_view`` False), whose Reducer keeps a 16-bit bucket copy of every gradient (PyTorch's DDP
    documentation, ``gradient_as_bucket_view``: views into the buckets save "the total gradients size")."""
    half = np.asarray(half_grad_bytes, float)
    held = np.maximum(half - np.asarray(one_micro_batch_bytes, float), 0.0)
    ddp = (np.asarray(layout.zero) == 0) & (np.asarray(layout.dp, float) > 1)
    return held + np.where(ddp, half, 0.0)


def ddp_bucket_bytes(grad_bytes, layout: Layout, ddp_gradient_copy, bucket_per_grad_byte=1.0) -> np.ndarray:
    """Per GPU, the gradient buckets of torch's DistributedDataParallel where a layout replicates its weights over
    data-parallel ranks without ZeRO and its framework wraps the model in DDP (``ddp_gradient_copy``): the Reducer
    allocates its buckets beside the parameters' gradients unless ``gradient_as_bucket_view=True``, which is off by
    default and "can reduce peak memory usage, where the saved memory size will be equal to the total gradients
    size" (torch.nn.parallel.DistributedDataParallel's documentation); accelerate, the Hugging Face Trainer and
    Lightning construct DDP with the default. One more copy of ``grad_bytes`` (the layout's unsharded gradients), in
    the dtype they reduce in: the buckets are the parameters' gradients' dtype (torch/csrc/distributed/c10d/reducer.cpp
    initialize_buckets: one flat tensor per bucket of the first parameter's options), fp32 under autocast over fp32
    parameters where the gradients counted are 16-bit (``bucket_per_grad_byte`` 2: RunSettings.reduce_per_grad_byte over
    grad_buffer)."""
    return ddp_copies(layout, ddp_gradient_copy, bucket_per_grad_byte) * np.asarray(grad_bytes, float)


def ddp_copies(layout: Layout, ddp_gradient_copy, bucket_per_grad_byte=1.0) -> np.ndarray:
    """Per layout, the gradient copies DDP's buckets add (``ddp_bucket_bytes``), per byte of the gradients counted:
    ``bucket_per_grad_byte`` where it replicates without ZeRO over more than one rank, else 0."""
    replicated = (np.asarray(layout.zero) == 0) & (np.asarray(layout.dp, float) * np.asarray(layout.cp, float) > 1)
    return np.where(np.asarray(ddp_gradient_copy, bool) & replicated, np.asarray(bucket_per_grad_byte, float), 0.0)


def not_concurrent_bytes(activation_bytes, grad_bytes, step_temporary_bytes, layout: Layout, frees_gradients):
    """Per GPU, the bytes of the activations, the gradients and the optimizer step's temporaries that are never
    allocated at the same time: their sum less the step's allocated peak.

    The activations peak at the end of the forward (the loss's tensors) and are freed by the end of the backward;
    the optimizer step then holds the gradients and its temporaries (``TrainingState.step_temporary_bytes``).
    Where the framework's loop frees the gradients after each step (``zero_grad()``, ``set_to_none=True`` by
    default since PyTorch 2.0: torch/optim/optimizer.py, torch/nn/modules/module.py) and no micro-batch
    accumulates into them (grad_accum 1), no gradient exists at the forward peak and backward makes them as it
    frees the activations: the peak is weights + state + max(activations, gradients + temporaries). Otherwise
    the gradients live through the forward (accumulated, or a persistent buffer: Megatron-Core's grad buffer,
    DeepSpeed ZeRO-3's partitions; ZeRO-2's are freed by its step, ``deepspeed_memory.deepspeed_frees_gradients``)
    and the peak is weights + state + gradients + max(activations, temporaries).

    Published: fms-acceleration's full fine-tunes under the Hugging Face Trainer (validation/unseen_families_5.yaml,
    torch.cuda.max_memory_allocated) peak at 5 x the 16-bit parameter bytes on every line whatever the batch
    (Mistral 7B on one A100: 67.46 GiB at batch 4 and 8), the step's weights, gradients, two AdamW moments and
    foreach's denominator, not at the activations plus the gradients."""
    freed = gradients_freed(layout, frees_gradients)
    other = np.asarray(step_temporary_bytes, float) + np.where(freed, np.asarray(grad_bytes, float), 0.0)
    return np.minimum(np.asarray(activation_bytes, float), other)


def gradients_freed(layout: Layout, frees_gradients) -> np.ndarray:
    """Per layout, whether no gradient exists at the forward's peak (``not_concurrent_bytes``): the framework's loop
    frees them after each step and no micro-batch accumulates into them (grad_accum 1)."""
    return np.asarray(frees_gradients, bool) & (np.asarray(layout.grad_accum) <= 1)


def cached_beyond_peak_bytes(not_concurrent_bytes, total_bytes, capacity_bytes) -> np.ndarray:
    """What PyTorch's reserved counter holds beyond a plan's total: the freed activation segments
    (``not_concurrent_bytes``), which the larger gradient tensors made in backward do not fit, stay cached while
    the GPU has room, so a reserved or nvidia-smi reading keeps the parts' sum (torchtitan's and torchao's FSDP
    runs, validation/memory_runs.yaml); the allocator gives them back when a cudaMalloc fails (torch.cuda.memory_stats
    "num_alloc_retries"), so they are not part of what a plan needs to fit."""
    room = np.maximum(np.asarray(capacity_bytes, float) - np.asarray(total_bytes, float), 0.0)
    return np.minimum(np.asarray(not_concurrent_bytes, float), room)


def tp_replicated_state_bytes(
    train: TrainingState, layout: Layout, grad_buffer=1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per GPU, the weights, gradients and optimizer state of the parameters every TP rank holds whole
    (``train.tp_replicated_params``, job.embedding_parallel false) beyond the 1 / t share ``memory.state_bytes`` gives
    them: (1 - 1 / t) of their state, sharded by ZeRO / FSDP as the rest.

    KempnerForge kempnerforge/distributed/tensor_parallel.py @ 01b461a: "Token embedding: Replicated
    (SequenceParallel norm handles Replicate->Shard(1))", "The token embedding stays replicated because RowwiseParallel
    on nn.Embedding doesn't correctly redistribute output to Shard(1)"; its plan parallelises the blocks and the output
    head only, so the V x h embedding, its gradient and its AdamW moments are whole on each TP rank, and FSDP2's
    ``fully_shard`` (over dp_shard alone) shards them by the FSDP degree, not by t x FSDP."""
    tp, zero = np.asarray(layout.tp, float), np.asarray(layout.zero)
    shard = np.asarray(layout.shard, float)
    whole = train.tp_replicated_params * (1.0 - 1.0 / tp)

    def sharded(at_stage) -> np.ndarray:
        return whole / np.where(zero >= at_stage, shard, 1.0)

    trained = 0.0 if train.lora else 1.0  # LoRA leaves the embedding frozen: its weights alone
    grads = sharded(2) * train.grad_bytes * np.asarray(grad_buffer, float) * trained
    return sharded(3) * train.weight_bytes, grads, sharded(1) * train.optimizer_bytes_at(zero) * trained
