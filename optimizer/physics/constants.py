"""Every sourced constant of gpuplan, defined once with its citation (docs/design.md section 12).

A leaf module: it imports nothing from gpuplan, so every layer (the input schema's defaults
included) may read it. Values without a published source are marked ``ASSUMPTION`` and are
overridable in a job's ``assumptions`` or a catalog row where the comment says so.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- units

GIB = 2.0**30  # bytes in a GiB (IEC 80000-13)
MIB = 2.0**20

# --------------------------------------------------------------------------- statistics

Z90 = 1.2815515655446004  # standard-normal 90th percentile, Phi^-1(0.9)

# --------------------------------------------------------------------------- training state

# Optimizer state bytes per trainable parameter, with an fp32 master copy (Transformer Math 101,
# EleutherAI 2023: AdamW 12 = 4 master + 4 m + 4 v; bitsandbytes 8-bit Adam 6 = 4 master + 1 + 1;
# SGD with momentum 8 = 4 master + 4 momentum; Adafactor ~4 = master copy + factored second moment).
OPTIMIZER_BYTES = {
    "adamw": 12.0,
    "adamw8bit": 6.0,
    "paged_adamw": 12.0,
    "paged_adamw8bit": 6.0,
    "sgd": 8.0,
    "adafactor": 4.0,
}
# Without a master copy (pure bf16 training, torchtune's dtype: bf16): torch.optim.AdamW keeps m and v in
# the parameters' dtype (zeros_like(param)): 2 + 2; bitsandbytes 8-bit AdamW 1 + 1; SGD momentum 2; Adafactor
# without momentum keeps only its factored second moment (rows + columns, about 0 per parameter).
PURE_BF16_OPTIMIZER_BYTES = {
    "adamw": 4.0,
    "adamw8bit": 2.0,
    "paged_adamw": 4.0,
    "paged_adamw8bit": 2.0,
    "sgd": 2.0,
    "adafactor": 0.0,
}
# Adafactor factors the second moment of a tensor with two or more dimensions only (torch.optim.Adafactor
# and transformers' Adafactor: factored = len(shape) >= 2). Under ZeRO >= 1 the optimizer steps flattened
# shards (DeepSpeed's stage_1_and_2.py hands it one flat partition per parameter group; FSDP1's sharded
# parameters are 1-D views of its FlatParameter), so it keeps a full second moment there: 4 bytes per
# parameter beside an fp32 master copy, 2 in the parameters' dtype without one.
ADAFACTOR_FLAT_SECOND_MOMENT_BYTES = {True: 4.0, False: 2.0}  # by master_weights

# bitsandbytes' paged optimizers keep their state in unified memory that pages to the CPU under GPU memory
# pressure (Dettmers et al. 2023, "QLoRA", section 3, "Paged Optimizers"): planned as not resident on the
# GPU. ASSUMPTION: paging costs no time (it happens only at memory spikes, the paper's case).
PAGED_OPTIMIZERS = frozenset({"paged_adamw", "paged_adamw8bit"})

# Mixed-precision Adam: 2 (bf16 weights) + 2 (bf16 gradients) + 12 (optimizer) = 16 bytes per
# parameter (Rajbhandari et al. 2020, "ZeRO", section 3.1).
MIXED_PRECISION_ADAM_BYTES = 16.0

# QLoRA stores frozen weights in NF4 with double quantisation: 4 bits + 0.127 bits of constants per
# parameter (Dettmers et al. 2023, "QLoRA", section 3: 0.127 bits after double quantisation).
QLORA_BYTES_PER_PARAM = (4.0 + 0.127) / 8.0

# Activation offload (torchtune OffloadActivations, training/_activation_offloading.py): saved tensors
# leave for pinned CPU memory as forward makes them (a stash of at most max_fwd_stash_size = 5 tensors,
# under one layer's) and come back during backward one layer ahead on a side stream, so the layer being
# differentiated and the one in transfer stay on the GPU. ASSUMPTION: 2 layers' saved tensors resident.
ACTIVATION_OFFLOAD_RESIDENT_LAYERS = 2.0

# ASSUMPTION: embeddings and LM head hold at most half of the parameters, so a block holds at least
# params / (2 L). True of every bundled preset (the largest share, Gemma 2 9B with a 256k vocabulary,
# is 8 %); it only guards params-and-vocabulary inputs that would otherwise leave nothing per block.
MIN_BLOCK_SHARE_OF_PARAMS = 0.5

# FSDP2 under gradient accumulation without gradient sync (weights held over the step, physics/time.py)
# keeps each parameter's unsharded gradient between micro-batches, upcast to the reduce dtype
# (torch/distributed/fsdp/_fully_shard/_fsdp_param.py, FSDPParam.to_accumulated_grad_if_needed): fp32 in
# torchtitan (training.mixed_precision_reduce = "float32") and NeMo AutoModel (FSDP2Config mp_policy
# reduce_dtype=torch.float32): 4 bytes per trainable parameter of the stage.
FSDP_UNSHARDED_GRAD_BYTES = 4.0

# --------------------------------------------------------------------------- memory reserve

# Memory outside PyTorch's caching allocator, fixed per GPU: the CUDA context (~0.5-1 GiB) and NCCL's own
# buffers (NCCL_BUFFSIZE, 4 MiB per channel and peer by default, NCCL's environment-variable docs; NCCL allocates
# them itself, so torch.cuda.memory_reserved does not count them, "CUDA semantics: memory management": reserved is
# the memory the caching allocator manages). Overridable: assumptions.framework_overhead.
FRAMEWORK_RESERVE_FIXED_BYTES = 1.5 * GIB
# Inside the allocator, its reserved-minus-allocated gap (fragmentation) does not grow with the GPU's capacity: a
# freed block is cached and split for smaller requests (c10/cuda/CUDACachingAllocator.cpp; "CUDA semantics":
# max_split_size_mb "prevents the native allocator from splitting blocks larger than this size ... This can reduce
# fragmentation"), so a request for the step's largest transient tensor may find no cached block whole and take a
# new segment of its size: the gap is about one largest transient (physics/memory.allocator_fragmentation_bytes).
# For a model given without shapes (no transient sizes known) the gap stays a planning margin of 5 % of capacity
# (cf. EleutherAI's Transformer Math 101 "miscellaneous memory" allowance).
FRAMEWORK_RESERVE_FRACTION = 0.05
# The loss's largest single tensor per token and vocabulary entry, by the loss's bytes (LOGITS_BYTES_PER_VOCAB and
# Megatron's 6): an fp32 copy of the logits (4) where the loss upcasts them whole (PyTorch's cross-entropy over
# upcast logits, 12 = three fp32 tensors; Megatron-Core's vocab-parallel one, 6 = fp32 + bf16), else the bf16 logits
# or their gradient (2: flash-attn's Triton loss and torch.compile's fused one, 2 + 2; torchtune's chunked one), and
# none where the logits are never whole (Liger's fused loss, 0).
LOSS_LARGEST_TENSOR_BYTES_PER_VOCAB_FP32 = 4.0
LOSS_LARGEST_TENSOR_BYTES_PER_VOCAB_BF16 = 2.0
LOSS_FP32_COPY_MIN_BYTES_PER_VOCAB = 6.0  # at or above: the loss holds an fp32 copy of the whole logits

# Loss memory per token and vocabulary entry at its peak, the loss's backward (every layer's activations still
# held): PyTorch's cross-entropy over the upcast logits (torchtitan's cross_entropy_loss, transformers'
# ForCausalLMLoss) keeps log_softmax's fp32 output (4) and, in backward, the fp32 gradient from nll_loss (4) and
# the one log_softmax's backward writes (4): 12, measured with a live-tensor count over forward and backward
# (tests/validation/test_torch_accounting.py; 14 while the bf16 logits stay referenced); torchtune's chunked loss
# (CEWithChunkedOutputLoss) keeps the bf16 logits and upcasts one chunk at a time (2); Liger Kernel's fused
# linear cross-entropy (Hsu et al. 2024, section 3.4) never materialises the full logits (0; its chunk's working
# set is within the reserve); flash-attn's Triton cross-entropy (flash_attn/losses/cross_entropy.py, llm-foundry's
# default loss) saves the bf16 logits with a per-token log-sum-exp and writes their bf16 gradient (2 + 2).
# Megatron-Core's own standard loss is Framework.standard_loss_bytes_per_vocab. PyTorch's cross-entropy on the model's
# 16-bit logits without an fp32 upcast (F.cross_entropy on a bf16 model's output: KempnerForge scripts/train.py @
# 01b461a, universal-llm-trainer) keeps the same three tensors in bf16 (aten log_softmax returns its input's dtype and
# saves its output; nll_loss_backward's zeros_like and _log_softmax_backward_data write bf16): 2 + 2 + 2 (bf16).
LOGITS_BYTES_PER_VOCAB = {"standard": 12.0, "chunked": 2.0, "flash": 4.0, "fused": 0.0, "bf16": 6.0}
# Megatron-Core's vocab-parallel cross-entropy (megatron/core/tensor_parallel/cross_entropy.py) turns the fp32
# logits into the softmax in place and writes the gradient over it: the fp32 copy (4) and the bf16 logits (2).
MEGATRON_CROSS_ENTROPY_BYTES_PER_VOCAB = 6.0

# --------------------------------------------------------------------------- time

# Achieved fraction of dense peak FLOPS, per form factor, when a SKU row gives no ``default_mfu``:
# Megatron-LM sustains 52 % of A100 peak at 1T parameters (Narayanan et al. 2021, abstract and
# Table 1) and up to 56 % MFU with selective recompute (Korthikanti et al. 2022, Table 5): 0.5 for
# SXM. ASSUMPTION: PCIe and OAM parts 0.45 (lower sustained clocks and power under load).
# Overridable: assumptions.mfu, catalog default_mfu.
DEFAULT_COMPUTE_EFFICIENCY = {"sxm": 0.5, "oam": 0.45, "pcie": 0.45}
FALLBACK_COMPUTE_EFFICIENCY = 0.45

# ASSUMPTION: a SKU row without ``network_gb_per_s_per_gpu`` gets one 100 Gb/s NIC per GPU
# (12.5 GB/s), the smallest scale-out link sold with current 8-GPU servers. Override in the catalog.
FALLBACK_NETWORK_GB_PER_S_PER_GPU = 12.5

# The GPUs of the server the default host memory (assumptions.host_memory_per_node, 2 TB: DGX H100/B200 ship
# 2 TB of DDR5 for 8 GPUs, NVIDIA DGX datasheets) is for; a SKU whose hosts are smaller trays gets their share
# when the job gives none (a GB200 compute tray of 4: 1 TB; OCI's BM.GPU.GB200.4 has 960 GiB, SkyPilot's OCI
# catalog).
HOST_MEMORY_SERVER_GPUS = 8

# GPU <-> host PCIe per GPU: PCIe Gen4 x16 is 32 GB/s per direction raw (PCI-SIG 4.0 specification),
# about 25 GB/s achieved; a Gen5 slot doubles both (physics/roles.py PCIE_GEN5_X16_BYTES_PER_S, 63 GB/s), which
# this conservative figure does not assume. ASSUMPTION: the host DRAM share per GPU, a 2-socket server's ~300-400 GB/s
# over 8 GPUs halved for the CPU Adam's read+write mix (ZeRO-Offload, Ren et al. 2021, section 4).
# Overridable: assumptions.host_link_gb_per_s_per_gpu, assumptions.host_memory_gb_per_s_per_gpu.
HOST_LINK_GB_PER_S_PER_GPU = 25.0
HOST_MEMORY_GB_PER_S_PER_GPU = 20.0

# QLoRA dequantises each frozen NF4 weight to bf16 before its matmul (Dettmers et al. 2023, "QLoRA",
# section 3): bitsandbytes' MatMul4Bit calls dequantize_4bit in forward and again in backward for the data
# gradient (bitsandbytes/autograd/_functions.py), as torchao's NF4Tensor linear does for torchtune; a full
# recompute re-runs the forward's. Each pass reads the 4-bit weights with their constants and writes bf16,
# an element-wise kernel at HBM bandwidth that runs between the matmuls, once per micro-batch whatever its
# tokens, so QLoRA's overhead shrinks as tokens per micro-batch grow (torchtune's README: Llama 3.2 3B at
# 2 x 4096 tokens on one A100, QLoRA 8,035 tokens/s against LoRA's 8,210).
QLORA_DEQUANT_BYTES_PER_PARAM = QLORA_BYTES_PER_PARAM + 2.0
QLORA_DEQUANT_PASSES = 2  # forward and the data gradient; full recompute adds one

# The step's final gradient all-reduce overlaps only the last micro-batch's backward pass, which is
# two of its three matmul passes (forward 1, backward 2: Chowdhery et al. 2022, appendix B).
LAST_BACKWARD_SHARE_OF_MICRO_BATCH = 2.0 / 3.0

# ASSUMPTION: with the global batch left free, pipeline layouts run 4 micro-batches per stage, which
# keeps the 1F1B bubble (p - 1) / (m + p - 1) under 20 % (Narayanan et al. 2021, section 2.2 and
# Figure 13: m >= 4p is where their throughput flattens).
FREE_BATCH_MICRO_BATCHES_PER_STAGE = 4

# A global batch given in tokens becomes a sequence count data-parallel layouts divide: the nearest power
# of two when within 5 % (batches are quoted in round tokens, e.g. Llama 3's "4M tokens" of 4,096-token
# sequences, Dubey et al. 2024, section 3.4.1, while data-parallel degrees are powers of two), else a
# multiple of a node's 8 GPUs. ASSUMPTION: the 5 % window.
BATCH_POWER_OF_TWO_TOLERANCE = 0.05
BATCH_SEQUENCE_MULTIPLE = 8

# With the global batch left free, gpuplan keeps it below twice the compute-optimal batch of DeepSeek's
# scaling law, B_opt = 0.2920 C^0.3271 tokens for C = 6 N D FLOPs (Bi et al. 2024, "DeepSeek LLM",
# section 3.1, eq. 1); ASSUMPTION: the factor 2, for the wide near-optimal band of their Figure 3.
# A fine-tune with job.global_batch unset (issue 46) trains at the batch the published recipes use, in tokens
# per optimizer step: Megatron-Bridge's performance recipes (src/megatron/bridge/recipes/llama/, 2026) run
# Llama 3 70B SFT on 32 H100 at 32 sequences of 4,096 tokens and Llama 3 70B LoRA on 8 B200, B300 and GB300 at
# 32 x 4,096 (on 8 GB200 at 64 x 2,048): 131,072 tokens a step each. The published SFT and LoRA runs in
# validation/finetune_runs.yaml use 2-32 sequences. (The scaling-law cap below, meant for pre-training, had
# planned a 70B LoRA on 2B tokens at 998 sequences, 4.1M tokens a step.)
FINETUNE_BATCH_TOKENS = 131_072
# A full-parameter run on fewer tokens than compute-optimal pre-training takes, about 20 per parameter
# (Hoffmann et al. 2022, "Chinchilla", Table 3), continues a pre-trained model: a fine-tune, not a pre-training.
COMPUTE_OPTIMAL_TOKENS_PER_PARAM = 20.0

OPTIMAL_BATCH_COEFFICIENT = 0.2920
OPTIMAL_BATCH_EXPONENT = 0.3271
FREE_BATCH_MAX_OVER_OPTIMAL = 2.0

# ASSUMPTION: an expert's grouped GEMM of t token rows reaches t / (t + 512) of the large-GEMM efficiency;
# 512 rows is where a 128 x 128-tile GEMM on a 132-SM GPU first fills every SM with a few waves (the
# grouped-GEMM kernels of Megatron-Core / TransformerEngine tile 128 rows).
GROUPED_GEMM_HALF_TOKENS = 512.0

# A GEMM tile's fixed cost (prologue, epilogue, pipeline fill) is amortised over its K loop, so a GEMM with
# a short reduction dimension K runs at K / (K + K_half) of the long-K rate. DeepGEMM's FP8 GEMMs on H800
# (README @ dd15f75, "Normal GEMMs", M = 4096: 590 / 990 / 1025 / 1304 / 1358 TFLOPS at K = 512 / 1536 /
# 2048 / 7168 / 16384) fit K_half = 725 within 3 % (least absolute log error). The fixed cost is time, not
# FLOPs: at the 16-bit rate, half the FP8 rate, it is worth half as many K steps.
GEMM_K_HALF_FP8 = 725.0
GEMM_K_HALF_16BIT = GEMM_K_HALF_FP8 / 2.0
# The reduction length the dense calibration's efficiency stands for (physics/efficiency.py REFERENCE_HIDDEN).
GEMM_K_REFERENCE = 8192.0
# A GEMM's output is cut into tiles, one thread block each; with fewer tiles than about a wave of the GPU's SMs,
# SMs sit idle (NVIDIA's "Matrix Multiplication Background" guide: tile and wave quantization). A GEMM of M x N
# outputs has T = M N / GEMM_TILE_ELEMENTS tiles and runs at T / (T + GEMM_TILES_HALF) of its many-tile rate.
# Fitted here on XLA's cuBLAS BF16 table for H100 (tensorflow/tensorflow @ 9bebee8e429e and 372d578bb861
# third_party/xla/xla/service/gpu/model/matmul_interpolator_data.h, kDefaultMatmulPTable "sm_90"), with K's rate k / (k + GEMM_K_HALF_16BIT) beside it, least absolute log error over the seven
# shapes with every dimension >= 256 that are neither memory-bound nor a few microseconds long: 4096^3 783,
# 4096x2048x4096 764, 512x4096x4096 653, 2048^3 632, 1024x2048x2048 524, 4096x4096x256 392, 256x2048x4096
# 286 TFLOP/s, each within 0.97-1.14x of the fit (T_half = 64 tiles: about half of H100's 132 SMs; not scaled
# by SM count, A100's 108 and B200's 148 being within 20 % of it).
GEMM_TILE_ELEMENTS = 128.0 * 128.0
GEMM_TILES_HALF = 64.0

# Low-precision matmuls (issue 48): FP8 speeds up the GEMM kernels only. The largest dense GEMM a GPU runs
# reaches this share of its 16-bit dense peak: the median of the "Maximum Achievable Matmul FLOPS" table
# (stas00/ml-engineering @ 7bc7c30, compute/accelerator/README.md), BF16
# on H100 80.3 %, GH200 83.8 %, B200 77.6 %, B300 78.6 %, GB200 72.9 % (H200 "the same" as H100).
GEMM_CEILING_16BIT = 0.794
# The low-precision GEMM's ceiling over the 16-bit one, each against its own peak: the median of the same
# table's FP8 / BF16 pairs (H100 70.9 / 80.3, H200 73.4 / 80.3, GH200 77.6 / 83.8, B200 76.3 / 77.6, B300
# 74.5 / 78.6, GB200 72.3 / 72.9 = 0.883-0.992). The FP8 peak is twice BF16's, so an FP8 GEMM runs 1.87x.
LOW_PRECISION_GEMM_CEILING_RATIO = 0.937
# An FP8 GEMM's operands are cast first: each linear layer's input (forward) and output gradient (backward)
# read in 16 bits and written in 8, once row-wise and once transposed for the other GEMM that reads it
# (Hopper's FP8 tensor cores take K-major operands only; Transformer Engine's cast_transpose, torchao's
# float8 dim0/dim1 casts): 2 + 1 + 1 bytes per element. The casts are memory-bound and run at about 80 %
# of HBM bandwidth on large tensors (pytorch/ao @ 260ac85 benchmarks/prototype/blockwise_fp8_training/README.md:
# H100 blockwise casts 78.6-86.5 %; pytorch/ao @ 5e79e5e torchao/prototype/moe_training/README.md: B200 MXFP8 68-82 %).
LOW_PRECISION_CAST_BYTES_PER_ELEMENT = 4.0
CAST_HBM_EFFICIENCY = 0.80

# The MoE layer's element-wise kernels run between the grouped GEMMs, memory-bound and not overlapped with
# them (NVIDIA, "Boosting MoE Training Throughput with Advanced Fusion Kernels", 2026: the activation, the
# token permutation and the quantization are separate HBM round trips that fused kernels remove, worth 93 %
# end to end on GPT-OSS). Elements read or written per routed token copy in the forward pass, as
# TransformerEngine's grouped MLP runs them: cast of the GEMM input (read h, write h), first GEMM's output
# (write 2 f), SwiGLU (read 2 f, write f), second GEMM's output (write h): 3 h + 5 f.
MOE_ELEMENTWISE_FORWARD_H, MOE_ELEMENTWISE_FORWARD_F = 3.0, 5.0
# Plus the dispatcher's own permutations, per routed copy forward (Megatron-Core
# megatron/core/transformer/moe/token_dispatcher.py @ d98e8a64): the alltoall dispatcher permutes tokens by
# destination (read h, write h), sorts the received ones by local expert (sort_chunks_by_idxs, read h,
# write h), un-sorts them after the experts (read h, write h) and unpermutes with the probabilities (read h):
# 7 h; DeepEP's manager permutes after dispatch and unpermutes before combine: 3 h; HybridEP permutes inside
# its dispatch and combine kernels ("permute tokens for communication, perform all-to-all communication, and
# permute tokens for experts in single step"): none outside them.
MOE_PERMUTE_FORWARD_H = {"alltoall": 7.0, "deepep": 3.0, "hybridep": 0.0}
# Backward: each element-wise op reads its saved input and the output gradient and writes the input
# gradient, twice the forward traffic (Korthikanti et al. 2022, section 4: backward = 2x forward).
MOE_ELEMENTWISE_BACKWARD_OVER_FORWARD = 2.0

# FITTED together (bench/throughput.py, on the MoE rows of Megatron-Bridge, NeMo and AutoModel and, since session 38,
# the first-seen Megatron-Core MoE tables of the Megatron-MoE-ModelZoo and XTuner (bench/throughput.py MOE_FOLDED):
# 27 rows of 5 source families; BENCHMARKS.md reports them held out by family): the host time per MoE layer and
# micro-batch, forward + backward, that the GPU waits for, in two parts. The per-layer part fits at 0 on the five
# families (0.25 ms on the first three alone; 0.5-1 ms with one of them held out), the per-local-expert part at
# 0.2 ms on both: the host waits where a rank runs many local experts.
# - Per layer: Megatron-Core's alltoall and flex dispatchers and DeepEP's normal kernels copy the token counts
#   per expert to the host to size their all-to-alls and grouped GEMMs (a host-device sync each way), after
#   which the GPU idles while Python launches the layer's next kernels; NVIDIA names "small expert GEMMs + host
#   overhead" the compute-efficiency wall of MoE training (Megatron Bridge, "MoE Training Optimization", after
#   "Scalable Training of MoE Models with Megatron Core"). Charged with or without EP.
# - Per local expert, where the layout's framework runs Transformer Engine's GroupedLinear
#   (planning/frameworks.py grouped_gemm_per_expert: Megatron-Core's TEGroupedMLP): it loops over its
#   num_gemms = experts / EP local experts on the host, forward and backward (one cuBLASLt GEMM launched per
#   expert on TE's multi-stream workspaces, TransformerEngine PR 853; per-expert weights, quantizers, biases,
#   main_grad and split bookkeeping in NVIDIA/TransformerEngine @ 3ea13561
#   transformer_engine/pytorch/module/grouped_linear.py; "the CPU overheads of PyTorch ops, such as
#   torch.split() and torch.empty() (2 x num_gemms calls)", TransformerEngine issue 1499); DeepSpeed-MoE's
#   Experts.forward runs one module per local expert in a Python loop (deepspeed/moe/experts.py), charged alike.
#   torchtitan's torch._grouped_mm and AutoModel's grouped GEMM launch one kernel for all the experts.
# Both per micro-batch, not per token, so they weigh most at micro-batch 1 (the published rows at micro-batch 1
# were over-predicted by 34-58 % without them). ``assumptions.moe_host_ms_per_layer`` and
# ``moe_host_ms_per_local_expert`` replace them (0 with full-iteration CUDA graphs and sync-free grouped MLPs).
MOE_HOST_S_PER_LAYER = 0.0
MOE_HOST_S_PER_LOCAL_EXPERT = 0.2e-3

# Host time of one iteration of transformers' eager experts loop (transformers 4.x's MoE blocks; 5.x's
# experts_implementation="eager"), forward: per routed expert a token has picked, a ``torch.where`` on its
# routing mask (a host-device sync: the GPU drains), an index, three small GEMMs, the activation, the routing
# weight and an ``index_add_``, each launched from Python. Derived from transformers PR 42697's A100 table
# (Qwen1.5-MoE-A2.7B: 24 MoE layers, 60 experts, top-4; forward of 1 x 16 tokens): eager 271.80 ms, grouped_mm
# 64.27 ms; 16 tokens pick 60 (1 - (1 - 4/60)^16) = 40.1 distinct experts a layer, 963 iterations, so
# (271.80 - 64.27) / 963 = 0.215 ms each. ASSUMPTION: backward replays as much host work per expert (autograd
# launches each op's gradient kernels; no sync, so it is counted once more, not twice).
HF_EXPERT_ITERATION_S = 2.15e-4
# A DeepSpeed ZeRO-3 parameter fetch the GPU waits for: 0.41 ms per module. DeepSpeed PR 1188 (bing_bert 5.1B,
# 64 pre-LN layers of 8 modules with weights, one p4d node of 8 A100 on NVLink): forward 270 ms under ZeRO-3
# against 60 ms under ZeRO-2, (270 - 60) / 512 modules: every fetched module of a dense model costs it
# (physics/zero3_hooks.py). It is exposed the more where ZeRO-3 cannot prefetch: the
# routed experts of a transformers 4.x MoE block, a module per expert's linear, whose order changes with the
# routing and invalidates ZeRO-3's parameter trace (DeepSpeed issue 4808, tjruwase: "the parameter trace cache
# is invalidated when the expert changes"), so every expert's linears are fetched one by one, forward,
# recomputed forward and backward.
ZERO3_MODULE_FETCH_S = 4.1e-4
# Parameters below DeepSpeed's stage3_param_persistence_threshold stay whole on every rank, never fetched; the
# Hugging Face integration sets it to 10 x hidden (transformers src/transformers/integrations/deepspeed.py,
# HfTrainerDeepSpeedConfig.trainer_config_finalize: fill_only("zero_optimization.stage3_param_persistence_
# threshold", 10 * hidden_size)), so norms persist and every linear is fetched (physics/zero3_hooks.py).
ZERO3_PERSISTENCE_PER_HIDDEN = 10.0

# FITTED (bench/throughput.py --fit, with the efficiency bases of physics/efficiency.py): the share of a
# micro-batch's compute that hides its data-parallel traffic (ZeRO / FSDP gathers and reductions, the gradient
# all-reduce; physics/time.py, docs/design.md 5.6). No published figure states it: the value of the grid whose
# best bases fit every dense row's e* best, held out by family like them. It binds where the network is slow
# for the compute (IBM's fms-fsdp tables on 400 Gb/s A100 and 800 Gb/s H100 nodes); it was an unsourced 0.7.
FITTED_OVERLAP = 0.5

# --------------------------------------------------------------------------- reliability

# Llama 3 (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.4): 419 unexpected
# interruptions in 54 days of pre-training on 16,384 H100s = 1.97e-5 per GPU-hour.
# Overridable: assumptions.failure_rate_per_gpu_hour.
FAILURES_PER_GPU_HOUR = 419 / (16384 * 54 * 24)
