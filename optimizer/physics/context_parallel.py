"""Context parallelism: the exchange that lets cp ranks each hold 1 / cp of a sequence, per layer and micro-batch.

Two exchanges are modelled (``RunSettings.context_parallel``, the job's ``context_parallel``):

- ``ring`` (ring attention: Liu et al. 2023, "Ring Attention with Blockwise Transformers", arXiv:2310.01889;
  Megatron-Core's default ``--cp-comm-type p2p``, torchtitan's context_parallel): each rank keeps its queries and
  passes its K and V chunk around the ring, cp - 1 hops forward and K, V plus their gradients backward (3x the
  forward volume in all), overlapped with the attention of the chunk in hand; what exceeds the layer's attention
  compute is exposed.
- ``all_to_all`` and ``all_to_all_repeat_kv`` (Ulysses: Jacobs et al. 2023, "DeepSpeed Ulysses", arXiv:2309.14509,
  section 3.1; Megatron-Core's ``--cp-comm-type a2a``; XTuner's sequence_parallel): the sequence stays sharded
  everywhere but attention; an all-to-all re-shards q, k and v by heads before it (each rank then holds the whole
  sequence for heads / cp heads) and one brings the output back to sequence shards after it: 4 all-to-alls forward,
  their 4 mirrors backward (the gradients of the output, then of q, k and v), 4 more where the layer's forward is
  recomputed. Each moves (cp - 1) / cp of the rank's tensor and blocks (DeepSpeed's ``DistributedAttention`` and
  XTuner's ``sequence_parallel_wrapper`` wait on each before computing): nothing is overlapped.

Grouped-query attention under Ulysses (``ulysses_kv_heads``): the query heads must split over the cp ranks. DeepSpeed
(``deepspeed/runtime/sequence_parallel/ulysses_sp.py`` ``UlyssesSPAttentionHF``: "if we have 4 kv heads and sp 8, we
need to replicate kv heads 2x") sends K and V at their own head count when it divides by cp, else replicated up to
one head a rank (cp a multiple of the KV heads); Megatron-Core's a2a runs the same rule. XTuner
(``xtuner/model/modules/dispatch/llama.py`` ``llama_attn_forward``: ``repeat_kv`` before the sequence-parallel
``flash_attn``; ``mistral.py``: "repeat k/v heads if n_kv_heads < n_heads for sequence parallel") repeats K and V to
every query head before the exchange (``all_to_all_repeat_kv``).

Pure functions over floats or numpy arrays.
"""

from __future__ import annotations

import numpy as np

from .layout import Layout
from .links import Links

RING = "ring"
ALL_TO_ALL = "all_to_all"  # DeepSpeed-Ulysses / Megatron-Core a2a: K and V at max(kv heads, cp) heads
ALL_TO_ALL_REPEAT_KV = "all_to_all_repeat_kv"  # XTuner: K and V repeated to every query head first

BF16_BYTES = 2.0  # q, k, v and the attention output travel in bf16
# Ulysses' all-to-alls per layer and micro-batch (Jacobs et al. 2023, section 3.1): q, k, v before attention and the
# output after it in forward; the output's gradient, then q's, k's and v's in backward (the mirror image)
ULYSSES_FORWARD_ALL_TO_ALLS = 4
# Ring attention: K and V forward; K, V and their gradients backward (Liu et al. 2023; Megatron-Core's
# AttnFuncWithCPAndKVP2P sends dK and dV around the ring beside K and V): 3x the forward volume in all
RING_VOLUME_FORWARD_MULTIPLE = 3.0


def is_all_to_all(exchange: str) -> bool:
    """Whether ``exchange`` is one of Ulysses' all-to-all variants (not ring attention)."""
    return exchange in (ALL_TO_ALL, ALL_TO_ALL_REPEAT_KV)


def ulysses_kv_heads(heads: float, kv_heads: float, cp, exchange: str = ALL_TO_ALL) -> np.ndarray:
    """K (or V) heads each all-to-all carries before attention: every query head where the framework repeats K and V
    first (XTuner); else the KV heads, replicated up to cp where there are fewer (DeepSpeed's UlyssesSPAttentionHF
    kv_replication_factor = cp / kv heads, one KV head a rank)."""
    cp = np.asarray(cp, float)
    if exchange == ALL_TO_ALL_REPEAT_KV:
        return np.full_like(cp, float(heads))
    return np.maximum(float(kv_heads), cp)


def ulysses_heads_split(heads: float, kv_heads: float, tp, cp, exchange: str = ALL_TO_ALL) -> np.ndarray:
    """Whether a TP x CP layout's attention heads split for Ulysses: each TP rank's query heads over the cp ranks
    (DeepSpeed's "Attention head count ... is not divisible by SP size"; XTuner's "The number of attention heads
    should be divisible by sequence_parallel_world_size"), and, where K and V are not repeated to every query head,
    the KV heads over cp or cp over the KV heads (DeepSpeed's "KV attention head count ... is not divisible by SP
    size or vice versa")."""
    tp, cp = np.asarray(tp, float), np.asarray(cp, float)
    q_split = np.mod(heads, tp * cp) == 0
    if exchange == ALL_TO_ALL_REPEAT_KV or kv_heads <= 0:
        return q_split
    kv_per_tp = np.maximum(kv_heads / tp, 1.0)
    kv_split = (np.mod(kv_per_tp, cp) == 0) | (np.mod(cp, kv_per_tp) == 0)
    return q_split & kv_split


def ulysses_bytes(shape, layout: Layout, tokens, exchange: str = ALL_TO_ALL) -> np.ndarray:
    """Bytes one rank sends in one layer's forward all-to-alls (q, k, v and the output) for ``tokens`` = b s / cp
    tokens of its sequence shard: (cp - 1) / cp of (2 q_width + 2 K/V width) x tokens bf16 values, the heads split
    by TP. With multi-head attention this is 4 (cp - 1) / cp x tokens x h x 2 bytes: Jacobs et al. 2023's 4 N h / P
    per link (section 3.1) with N / P = tokens, less the shard a rank keeps."""
    cp = np.asarray(layout.cp, float)
    tp = np.asarray(layout.tp, float)
    head_dim = shape.q_width / shape.heads if shape.heads else 0.0
    kv_heads = shape.kv_width / head_dim if head_dim else 0.0
    kv_width = ulysses_kv_heads(shape.heads, kv_heads, cp, exchange) * head_dim
    width = 2.0 * shape.q_width + 2.0 * kv_width
    return (cp - 1.0) / np.maximum(cp, 1.0) * np.asarray(tokens, float) * width * BF16_BYTES / tp


def ulysses_s(shape, layout: Layout, tokens, layers, links: Links, g, exchange: str = ALL_TO_ALL) -> np.ndarray:
    """Ulysses' all-to-alls of one micro-batch on the busiest stage, not overlapped: per layer 4 forward and 4
    backward, plus 4 for each recomputed forward (as TP's all-reduces re-run: Korthikanti et al. 2022, section 5).
    The cp ranks sit tp apart (TP first in the rank order); those inside the node are reached over NVLink, the others
    over the NIC at the same time (NCCL posts every peer at once), the slower set the pace, as the expert
    all-to-all (physics/moe.py all_to_all_s)."""
    cp = np.asarray(layout.cp, float)
    tp = np.asarray(layout.tp, float)
    g = np.asarray(g, float)
    recomputed = layout.recomputed_share(shape.layers)
    passes = 2.0 + recomputed  # forward, backward and the recomputed forward, each 4 all-to-alls
    per_pass = ulysses_bytes(shape, layout, tokens, exchange)
    # cp ranks in the node: the ranks of one node (g / tp) hold that many consecutive cp ranks, at most cp; of a
    # rank's cp - 1 destinations, in_node - 1 share its node
    in_node = np.minimum(cp, np.where(links.multi_node, np.maximum(g / tp, 1.0), cp))
    intra_share = np.where(cp > 1, (in_node - 1.0) / np.maximum(cp - 1.0, 1.0), 0.0)
    intra_s = per_pass * intra_share / links.intra
    inter_s = per_pass * (1.0 - intra_share) / links.net
    return np.where(cp > 1, layers * passes * np.maximum(intra_s, inter_s), 0.0)


def ring_exchange_s(shape, layout: Layout, tokens, layers, links: Links, g, attention_compute_s) -> np.ndarray:
    """Ring attention's K/V exchange of one micro-batch on the busiest stage that the layers' attention compute
    (``attention_compute_s``, the micro-batch's) does not hide: per layer (cp - 1) hops of K and V, bf16, the heads
    split by TP, 3x that with the backward; inside a node unless TP x CP spans nodes."""
    cp = np.asarray(layout.cp, float)
    tp = np.asarray(layout.tp, float)
    kv_bytes = (cp - 1.0) * 2.0 * tokens * shape.kv_width * BF16_BYTES / tp  # K and V, bf16, TP-split heads
    bw = np.where(links.multi_node & (tp * cp > g), links.net, links.intra)
    exchange_s = layers * RING_VOLUME_FORWARD_MULTIPLE * kv_bytes / bw
    return np.where(cp > 1, np.maximum(0.0, exchange_s - attention_compute_s), 0.0)


def context_parallel_s(
    shape, layout: Layout, tokens, layers, links: Links, g, attention_compute_s, exchange: str = RING
) -> np.ndarray:
    """The exposed context-parallel exchange of one micro-batch on the busiest stage: ring attention's K/V passes
    beyond the attention compute, or Ulysses' all-to-alls whole."""
    if is_all_to_all(exchange):
        return ulysses_s(shape, layout, tokens, layers, links, g, exchange)
    return ring_exchange_s(shape, layout, tokens, layers, links, g, attention_compute_s)


def ulysses_extra_kv_bytes(shape, layout: Layout, seq_len: float, exchange: str = RING) -> np.ndarray:
    """Activation bytes per rank Ulysses keeps beyond ring attention's 1 / cp share: FlashAttention saves K and V for
    backward as it received them, the whole sequence for the rank's heads, so where the all-to-all carried more KV
    heads than the model has (DeepSpeed's replication up to cp, XTuner's repeat to every query head) each kept layer
    holds b s / cp x 2 (K and V) x (sent - own) KV width x 2 bytes more, the heads split by TP. Fully recomputed
    layers keep only their input (none of it)."""
    cp = np.asarray(layout.cp, float)
    if not is_all_to_all(exchange) or not shape.heads:
        return np.zeros_like(cp)
    head_dim = shape.q_width / shape.heads
    sent = ulysses_kv_heads(shape.heads, shape.kv_width / head_dim, cp, exchange) * head_dim
    kept = layout.stage_layers(shape.layers) - layout.recomputed_layers(shape.layers)
    tokens = np.asarray(layout.micro_batch, float) * seq_len / cp
    extra = kept * tokens * 2.0 * (sent - shape.kv_width) * BF16_BYTES / np.asarray(layout.tp, float)
    return np.where(cp > 1, extra, 0.0)
