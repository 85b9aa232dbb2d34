"""Generation (decode) throughput as inference engines run it: the rollout role of RL post-training (issue 52).

Pure functions over floats (docs/roles.md, GRPO). An engine (vLLM, SGLang) holds the model's weights split over
``tp`` GPUs of a node and decodes a batch of sequences together, one token each per step (continuous batching,
Yu et al. 2022, Orca, OSDI; Kwon et al. 2023, vLLM/PagedAttention, SOSP). Sources, formula by formula:

- KV cache a token: 2 (key and value) x layers x KV width x bytes a value (Kwon et al. 2023, section 3: "2 (key
  and value vectors) x 5120 (hidden state size) x 40 (number of layers) x 2 (bytes per FP16)" for OPT-13B; GQA
  stores kv_heads x head_dim, Ainslie et al. 2023).
- KV capacity: vLLM takes ``gpu_memory_utilization`` of each GPU's memory for weights, activations and the KV
  cache and gives the rest of that share to KV blocks (vLLM EngineArgs ``gpu_memory_utilization``; verl's rollout
  config ``gpu_memory_utilization``, NeMo RL's ``vllm_cfg.gpu_memory_utilization``).
- Concurrent sequences: the fewest of the KV capacity over a sequence's mean context, the engine's
  ``max_num_seqs`` and the sequences it is handed (vLLM scheduler: a sequence runs only with its blocks).
- Decode step, roofline (Williams et al. 2009; Pope et al. 2022, "Efficiently Scaling Transformer Inference",
  section 2: a decode step reads all weights and the KV cache, so small batches are memory-bound): the larger of
  (weights + the batch's KV cache) / tp / (HBM bandwidth x 0.8, a streaming kernel's share) and the batch's 2 N FLOPs (+ attention) / tp / (peak x
  efficiency), plus tensor parallelism's two all-reduces of the batch's activations per layer (Shoeybi et al.
  2019, Megatron-LM, section 3) over the node's link, a ring moving 2 (tp - 1) / tp of them.
- Prefill: the prompt's forward FLOPs at the same efficiency, once per prompt when its samples share the
  prefix (vLLM ``n`` samples per request share the prompt's KV blocks, Kwon et al. 2023, section 4.4).
- The host's share of a decode step: between two steps the engine's CPU gathers the sampled tokens, processes
  the outputs, schedules the next batch and prepares its inputs while the GPU waits, 5-13 ms of GPU idle a
  step as vLLM's maintainers measured it ("GPU is often idle, waiting for CPU operations (5-13ms of GPU
  bubble)", vllm-project/vllm#6854, the multi-step scheduling RFC) and about 5-6 ms between two decodes of
  Llama-2-7B at batch 256 with the output processor already asynchronous (vllm-project/vllm#10634); gpuplan
  takes the low end, 5 ms, on every step, which a RL rollout's engine pays (NeMo RL's and verl's rollouts run
  vLLM without multi-step or asynchronous scheduling by default).
- The long tail: a synchronous step's generation lasts until its longest response is done (Kimi k1.5,
  arXiv:2501.12599, section 2.6.2: long responses hold a rollout iteration; verl/HybridFlow generates a batch,
  then trains, Sheng et al. 2024). The batch's work takes its waves of full-batch steps; when the longest
  response needs more steps than that, the batch has drained and the engine runs on for the rest of them with
  that sequence nearly alone, each step paying the weights' read and the host's share again.
"""

from __future__ import annotations

from dataclasses import dataclass

from .constants import CAST_HBM_EFFICIENCY

KV_VALUES_PER_TOKEN_AND_LAYER = 2.0  # a key and a value vector per layer
# Achieved share of HBM bandwidth of a memory-bound kernel streaming large tensors: gpuplan's figure for such
# kernels (physics/constants.py CAST_HBM_EFFICIENCY: H100 78.6-86.5 % in pytorch/ao's benchmarks); a decode
# step's weight and KV reads are such streams.
DECODE_HBM_EFFICIENCY = CAST_HBM_EFFICIENCY
# Seconds the GPU waits on the engine's host a decode step: the low end of vLLM's measured 5-13 ms bubble
# (vllm-project/vllm#6854) and 5-6 ms gap between decodes (vllm-project/vllm#10634); see the module's sources.
HOST_S_PER_DECODE_STEP = 5e-3


def kv_bytes_per_token(layers: float, kv_width: float, bytes_per_value: float = 2.0) -> float:
    """KV cache one token takes: 2 x layers x KV width (kv_heads x head_dim) x bytes (vLLM paper section 3)."""
    return KV_VALUES_PER_TOKEN_AND_LAYER * layers * kv_width * bytes_per_value


def kv_capacity_tokens(
    memory_bytes: float, memory_utilization: float, weight_bytes: float, tp: int, kv_bytes: float
) -> float:
    """Tokens of KV cache an engine of ``tp`` GPUs holds: its share of their memory less the weights (each GPU
    holds 1 / tp of them), over a token's KV bytes (spread over the tp GPUs alike); 0 where the weights fill it."""
    free_per_gpu = memory_bytes * memory_utilization - weight_bytes / tp
    return max(0.0, free_per_gpu * tp / kv_bytes)


def concurrent_sequences(kv_tokens: float, context_tokens: float, max_num_seqs: float, sequences: float) -> float:
    """Sequences an engine decodes at once: its KV cache over a sequence's mean context, its scheduler's cap and
    the sequences it was handed, the fewest of them."""
    return max(0.0, min(kv_tokens / context_tokens, max_num_seqs, sequences))


@dataclass(frozen=True)
class DecodeEngine:
    """One engine: its model (bytes, FLOPs and KV bytes a token) on ``tp`` GPUs of one SKU (base units)."""

    weight_bytes: float
    flops_per_token: float  # 2 N + attention: one token's forward pass
    kv_bytes_per_token: float
    layers: float
    hidden: float
    tp: int
    peak_flops_per_s: float  # one GPU's dense 16-bit peak
    efficiency: float  # achieved share of the peak on the step's matmuls
    hbm_bytes_per_s: float
    link_bytes_per_s: float  # one direction of one GPU's link to the others of its engine
    host_s_per_step: float = HOST_S_PER_DECODE_STEP  # the GPU idle between two steps (scheduling, outputs)


def decode_step_s(engine: DecodeEngine, batch: float, context_tokens: float) -> float:
    """One decode step of ``batch`` sequences at ``context_tokens`` of context each: max(memory, compute) over
    the engine's tp GPUs (roofline; Pope et al. 2022), plus two all-reduces a layer (Megatron-LM) and the
    host's share of the step (vLLM's scheduling and output processing)."""
    e = engine
    memory_s = (e.weight_bytes + batch * context_tokens * e.kv_bytes_per_token) / e.tp / e.hbm_bytes_per_s
    memory_s /= DECODE_HBM_EFFICIENCY
    compute_s = batch * e.flops_per_token / (e.tp * e.peak_flops_per_s * e.efficiency)
    reduce_s = 0.0
    if e.tp > 1:
        activation_bytes = batch * e.hidden * 2.0  # bf16
        reduce_s = 2.0 * e.layers * 2.0 * (e.tp - 1) / e.tp * activation_bytes / e.link_bytes_per_s
    return max(memory_s, compute_s) + reduce_s + e.host_s_per_step


def prefill_s(engine: DecodeEngine, prompt_tokens: float) -> float:
    """A prompt's forward pass over the engine's GPUs, compute-bound (thousands of tokens a pass)."""
    return prompt_tokens * engine.flops_per_token / (engine.tp * engine.peak_flops_per_s * engine.efficiency)


@dataclass(frozen=True)
class Generation:
    """What one engine's share of a rollout batch takes: its sequences, the batch it decodes, the time."""

    sequences: float
    batch: float
    seconds: float
    tail_bound: bool  # the longest response, not the batch's work, set the time

    @property
    def waves(self) -> float:
        return self.sequences / self.batch


def generate_s(
    engine: DecodeEngine,
    sequences: float,
    samples_per_prompt: float,
    prompt_tokens: float,
    response_tokens: float,
    kv_tokens: float,
    max_num_seqs: float,
    max_response_tokens: float = 0.0,
) -> Generation:
    """Time an engine takes to generate ``sequences`` responses of ``response_tokens`` on average: prefills of
    their prompts (one per ``samples_per_prompt`` samples) and waves of decode steps, each wave as many
    sequences as fit (``concurrent_sequences``) at the mean context (prompt + half the response); with
    ``max_response_tokens``, the steps the longest response needs beyond the waves', each of a single
    sequence (the drained batch's long tail)."""
    context = prompt_tokens + response_tokens / 2.0
    batch = concurrent_sequences(kv_tokens, prompt_tokens + response_tokens, max_num_seqs, sequences)
    if batch <= 0.0:
        return Generation(sequences, 0.0, float("inf"), False)
    work_steps = sequences / batch * response_tokens
    decode = work_steps * decode_step_s(engine, batch, context)
    work_s = prefill_s(engine, sequences / samples_per_prompt * prompt_tokens) + decode
    tail_steps = max(0.0, max_response_tokens - work_steps)
    tail_s = tail_steps * decode_step_s(engine, 1.0, prompt_tokens + max_response_tokens - tail_steps / 2.0)
    return Generation(sequences, batch, work_s + tail_s, tail_s > work_s)
