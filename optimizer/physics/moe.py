"""Mixture-of-experts terms of a step: the experts' share of the FLOPs and their grouped GEMMs' rate, the routing's
element-wise kernels and the expert all-to-all (physics/time.py adds them to the dense step). Pure functions over
floats or numpy arrays; sources in each docstring and in physics/constants.py."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .constants import (
    GEMM_K_HALF_16BIT,
    GEMM_K_REFERENCE,
    GROUPED_GEMM_HALF_TOKENS,
    HF_EXPERT_ITERATION_S,
    MOE_ELEMENTWISE_BACKWARD_OVER_FORWARD,
    MOE_ELEMENTWISE_FORWARD_F,
    MOE_ELEMENTWISE_FORWARD_H,
    MOE_PERMUTE_FORWARD_H,
    ZERO3_MODULE_FETCH_S,
)
from .layout import Cluster, Layout, RunSettings
from .links import Links


def moe_elementwise_bytes_per_token(shape, dispatcher: str = "alltoall") -> float:
    """HBM bytes of the MoE layers' element-wise kernels per token, forward and backward, summed over the
    layers: top-k routed copies of (6 h + 5 f) 16-bit elements forward, twice that backward
    (physics/constants.py). They run between the grouped GEMMs, so their time adds to the GEMMs'."""
    if not shape.experts:
        return 0.0
    h = MOE_ELEMENTWISE_FORWARD_H + MOE_PERMUTE_FORWARD_H[dispatcher]
    forward = h * shape.hidden + MOE_ELEMENTWISE_FORWARD_F * (shape.expert_ffn or shape.hidden)
    per_layer = shape.experts_per_token * forward * (1.0 + MOE_ELEMENTWISE_BACKWARD_OVER_FORWARD) * 2.0
    return per_layer * shape.layers * shape.moe_layer_share


# What an ``auto`` dispatcher runs where the expert-parallel group leaves its node: Megatron-Core's MoE README
# (NVIDIA/Megatron-LM @ d98e8a64, megatron/core/transformer/moe/README.md, "Token Dispatching") names the flex
# dispatcher with the DeepEP backend for "Cross-node EP, fine-grained MoE" and alltoall for "Standard EP > 1
# setups"; Megatron-Bridge's performance recipes run a flex backend on 3 of their 4 cross-node EP rows
# (validation/throughput_runs.yaml).
AUTO_CROSS_NODE_DISPATCHER = "deepep"


def ep_spans_nodes(layout: Layout, links: Links, g) -> np.ndarray:
    """Whether each layout's expert-parallel group reaches beyond a node (the all-to-all goes over the NIC)."""
    ep = np.asarray(layout.ep, float)
    in_node = np.minimum(ep, np.where(links.multi_node, experts_ranks_in_node(layout, g), ep))
    return ep > in_node


def experts_ranks_in_node(layout: Layout, g) -> np.ndarray:
    """Expert-parallel peers that share a node: g / etp, at least the rank itself (a TP wider than a node)."""
    return np.maximum(1.0, np.asarray(g, float) / layout.expert_tp)


def by_dispatcher(dispatcher: str, spans, value):
    """``value(d)`` for the dispatcher a layout runs: the one named, or under ``auto`` the cross-node one
    (AUTO_CROSS_NODE_DISPATCHER) where its expert-parallel group ``spans`` nodes and alltoall inside one."""
    if dispatcher != "auto":
        return value(dispatcher)
    return np.where(spans, value(AUTO_CROSS_NODE_DISPATCHER), value("alltoall"))


def host_s_per_moe_layer(shape, layout: Layout, settings: RunSettings):
    """Host time per MoE layer and micro-batch the GPU waits for (physics/constants.py MOE_HOST_S_PER_LAYER):
    the layer's own, plus each of its experts / EP local experts' where the layout's framework loops over them
    on the host (Transformer Engine's GroupedLinear: ``settings.grouped_gemm_per_expert``)."""
    local_experts = shape.experts / np.asarray(layout.ep, float) if shape.experts else 0.0
    per_expert = np.where(settings.grouped_gemm_per_expert, settings.moe_host_s_per_local_expert, 0.0)
    return settings.moe_host_s_per_layer + per_expert * local_experts


def exposed_all_to_all_s(a2a_s, moe_overlap: float, compute_s) -> np.ndarray:
    """The all-to-all time left over: (1 - overlap) of it, or what exceeds the compute it hides behind."""
    return np.maximum((1.0 - moe_overlap) * a2a_s, a2a_s - moe_overlap * np.asarray(compute_s, float))


# How a token's k experts are chosen, for the all-to-all's destinations. "topk": a learned router's top-k of E under
# balanced load, k distinct experts anywhere (hypergeometric: ``holds_one_of_k``). "round_robin": NeMo AutoModel's
# FakeBalancedGate, the gate its published benchmarks run (``fake_balanced_gate: true`` in every
# examples/llm_benchmark MoE config; NVIDIA-NeMo/Automodel nemo_automodel/components/moe/layers.py @ 89e3a9fd and
# cb976544, noise 0): ``indices = arange(n_tokens * k).view(-1, k) % E``, token i's experts i k ... i k + k - 1 mod E,
# consecutive, so with experts sharded contiguously over EP (ExpertParallel's Shard(0)) a token reaches a block of
# adjacent ranks (``round_robin_groups_hit``). Perfectly balanced either way.
MOE_ROUTINGS = ("topk", "round_robin")


def round_robin_groups_hit(experts: float, per_group, k: float) -> np.ndarray:
    """Expected distinct groups of ``per_group`` consecutive experts (a rank's E / ep, a node's) that a token's k
    experts fall in under the round-robin gate (MOE_ROUTINGS): token i picks experts (i k + j) mod E for j < k, so
    the tokens cycle through the E / gcd(E, k) first experts s = 0, k, 2k, ... mod E, each equally often over a
    micro-batch of many more tokens than E; averaged over them. Groups of the whole model or more: 1."""
    e, kk = int(experts), int(k)
    starts = [(i * kk) % e for i in range(e // np.gcd(e, kk))]
    held = np.clip(np.asarray(per_group, float), 1.0, float(e))
    sizes, inverse = np.unique(held, return_inverse=True)  # a layout table holds few distinct group sizes
    hit = [np.mean([len({((s + j) % e) // size for j in range(kk)}) for s in starts]) for size in sizes]
    return np.asarray(hit, float)[inverse].reshape(held.shape)


def all_to_all_s(
    shape, layout: Layout, tokens, layers, links: Links, g, dispatcher: str = "alltoall", routing: str = "topk"
) -> np.ndarray:
    """Expert parallelism's token dispatch and combine (Lepikhin et al. 2021, "GShard"; Megatron-Core MoE):
    per MoE layer and micro-batch, each token's hidden state goes to its top-k experts and comes back,
    forward and backward: 4 all-to-alls of tokens x k x h bf16 values, (ep - 1) / ep of them leaving the
    rank; inside a node when TP x EP fits one, else over the NIC. ``assumptions.moe_overlap`` of it hides
    behind compute: 0 by default (Megatron's default dispatcher); DeepSeek-V3's DualPipe hides it all
    (section 3.2.1 of its report).

    Copies per token: Megatron's ``alltoall`` dispatcher permutes tokens per expert, so a token travels once
    per routed expert (k copies, (ep - 1) / ep of them off the rank). DeepEP and HybridEP (``deepep``; the
    DeepSeek-V3 report section 3.2.2, DeepEP's README) send a token once to each rank that holds one of its
    experts, and across nodes once per node over RDMA, forwarded over NVLink inside the destination node.

    ``routing`` (MOE_ROUTINGS): which ranks and nodes a token's k experts sit on. Under "round_robin" a rank or
    node is hit by R / ep or N / nodes of the tokens, R and N the distinct ranks and nodes of k consecutive experts
    (every rank receives the same share: the routing stays balanced); Megatron's alltoall sends k copies either
    way, (ep - 1) / ep of them off the rank."""
    ep = np.asarray(layout.ep, float)
    if not shape.experts:
        return np.zeros_like(ep)
    if dispatcher == "auto":
        spans = ep_spans_nodes(layout, links, g)
        return by_dispatcher(
            dispatcher, spans, lambda d: all_to_all_s(shape, layout, tokens, layers, links, g, d, routing)
        )
    volume = 4.0 * tokens * shape.hidden * 2.0  # per copy: dispatch and combine, forward and backward, bf16
    # Of the ep destinations, those in the same node are reached over NVLink, the others over the NIC, at
    # the same time (NCCL's all-to-all posts every peer at once): the slower of the two sets the pace.
    in_node = np.minimum(ep, np.where(links.multi_node, experts_ranks_in_node(layout, g), ep))
    k = shape.experts_per_token
    if dispatcher in ("deepep", "hybridep"):
        nodes = ep / in_node
        rank_hit, node_hit = _hit_shares(shape, ep, in_node, nodes, routing)
        inter_copies = (nodes - 1.0) * node_hit
        # own node's other ranks, plus forwarding inside each destination node beyond the rank it lands on
        intra_copies = (in_node - 1.0) * rank_hit + (nodes - 1.0) * np.maximum(0.0, in_node * rank_hit - node_hit)
    else:
        intra_copies = k * (in_node - 1.0) / ep
        inter_copies = k * (ep - in_node) / ep
    intra_s = volume * intra_copies / links.intra
    inter_s = volume * inter_copies / links.net
    return np.where(ep > 1, layers * np.maximum(intra_s, inter_s), 0.0)


def _hit_shares(shape, ep, in_node, nodes, routing: str) -> tuple[np.ndarray, np.ndarray]:
    """(share of a token's destinations among the ep ranks, among the nodes): the chance that a given rank or
    node holds one of the token's k experts, under the ``routing`` (MOE_ROUTINGS)."""
    k = shape.experts_per_token
    if routing == "round_robin":
        ranks = round_robin_groups_hit(shape.experts, shape.experts / ep, k)
        node_ranks = round_robin_groups_hit(shape.experts, shape.experts * in_node / ep, k)
        return ranks / ep, node_ranks / nodes
    if routing != "topk":
        raise ValueError(f"unknown MoE routing {routing!r}: one of {', '.join(MOE_ROUTINGS)}")
    return (
        holds_one_of_k(shape.experts, shape.experts / ep, k),
        holds_one_of_k(shape.experts, shape.experts * in_node / ep, k),
    )


@dataclass(frozen=True)
class ExpertExchange:
    """How a layout's experts exchange tokens: the dispatcher (``all_to_all_s``), the routing (MOE_ROUTINGS) and
    the share of the all-to-all hidden behind compute (``exposed_all_to_all_s``)."""

    dispatcher: str = "alltoall"
    routing: str = "topk"
    overlap: float = 0.0


def exchange_exposed_s(shape, layout: Layout, tokens, layers, compute_s, links: Links, g, exchange: ExpertExchange):
    """The expert all-to-all and the expert-TP exchange of one micro-batch of ``tokens`` per rank over ``layers``
    layers, less what the micro-batch's ``compute_s`` hides."""
    sent, moe_layers = dispatched_tokens(layout, tokens), layers * shape.moe_layer_share
    a2a_s = all_to_all_s(shape, layout, sent, moe_layers, links, g, exchange.dispatcher, exchange.routing)
    a2a_s = a2a_s + expert_tp_gather_s(shape, layout, sent, moe_layers, links)
    return exposed_all_to_all_s(a2a_s, exchange.overlap, compute_s)


def dispatched_tokens(layout: Layout, tokens):
    """Tokens a rank sends through the expert-parallel all-to-all per micro-batch: its sequence-parallel share
    b s / (cp tp). Megatron-Core requires sequence parallelism for MoE under TP (TransformerConfig: "When using
    expert parallelism and tensor parallelism, sequence parallelism must be used"), and its alltoall dispatcher
    sends each rank's own shard across the EP group whatever the experts' TP (NVIDIA/Megatron-LM
    megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher: the EP all-to-all of the
    permuted local tokens, then ``gather_from_sequence_parallel_region`` over the expert-TP group; before
    Core 0.10 ``all_to_all_sp2hp`` turned [b s / tp, h] into [b s, h / tp] first: the same bytes)."""
    return np.asarray(tokens, float) / np.asarray(layout.tp, float)


def expert_tp_gather_s(shape, layout: Layout, tokens, layers, links: Links) -> np.ndarray:
    """The expert-TP group's exchange of the routed tokens after the all-to-all (``dispatched_tokens`` each):
    where the experts are split etp ways every member needs every routed token of its experts, so the dispatch
    all-gathers them over the etp ranks and the combine reduce-scatters them back, and backward transposes both
    (Megatron-Core's MoEAlltoAllTokenDispatcher, as ``dispatched_tokens``): 4 x (etp - 1) received copies of
    tokens x k bf16 hidden states per MoE layer, inside the node (the expert TP group is the innermost)."""
    etp = np.asarray(layout.expert_tp, float)
    if not shape.experts:
        return np.zeros_like(etp)
    volume = 4.0 * np.asarray(tokens, float) * shape.experts_per_token * (etp - 1.0) * shape.hidden * 2.0
    return layers * volume / links.intra


def expert_tokens(layout: Layout, tokens):
    """Tokens a rank's experts compute on per micro-batch (their rows, top-k routed copies aside): the sequence
    share b s / cp when the experts are split by the attention TP (the expert-TP group gathers its members'
    ``dispatched_tokens``); with parallel folding the tp ranks' own 1 / tp shares, gathered over etp of them
    (Megatron-Core MoE parallel folding)."""
    return np.asarray(tokens, float) * layout.expert_tp / np.asarray(layout.tp, float)


def holds_one_of_k(experts: float, held, k: float) -> np.ndarray:
    """Probability that a group holding ``held`` of the ``experts`` gets at least one of a token's k distinct
    experts under balanced routing: 1 - C(E - m, k) / C(E, k) (hypergeometric)."""
    held = np.asarray(held, float)
    miss = np.ones_like(held)
    for i in range(int(k)):
        miss = miss * np.clip((experts - held - i) / (experts - i), 0.0, 1.0)
    return 1.0 - miss


def active_expert_share(shape) -> float:
    """Share of a token's linear-layer FLOPs spent in the routed experts it visits."""
    if not shape.experts or shape.active_params <= 0:
        return 0.0
    return min(1.0, shape.expert_params * shape.experts_per_token / shape.experts / shape.active_params)


def grouped_gemm_factor(shape, hw: Cluster, layout: Layout, tokens) -> np.ndarray:
    """Relative efficiency of the experts' grouped GEMMs. Each expert sees t = tokens x top-k x ep / experts
    rows per micro-batch (its rank gathers them from the ep ranks): a GEMM of t rows reaches t / (t + t_half)
    of the large-GEMM efficiency (ASSUMPTION: t_half, physics/constants.py); and a narrow expert (h x f) is
    a GEMM of low arithmetic intensity, 2 t h f FLOPs over (t h + h f + t f) elements read or written, which
    is memory-bound below the GPU's ridge point peak / HBM bandwidth (Williams et al. 2009)."""
    if not shape.experts:
        return np.ones_like(np.asarray(tokens, float))
    t = np.asarray(tokens, float) * shape.experts_per_token * np.asarray(layout.ep, float) / shape.experts
    h, f = shape.hidden, (shape.expert_ffn or shape.hidden) / layout.expert_tp  # each rank's share of f
    element_bytes = (
        2.0
        * np.asarray(hw.attention_peak_flops if hw.attention_peak_flops is not None else hw.peak_flops)
        / np.asarray(hw.peak_flops)
    )
    intensity = 2.0 * t * h * f / (element_bytes * (t * h + h * f + t * f))
    ridge = np.asarray(hw.peak_flops) * np.asarray(hw.compute_efficiency) / np.asarray(hw.hbm_bytes_per_s)
    return t / (t + GROUPED_GEMM_HALF_TOKENS) * np.minimum(1.0, intensity / ridge) * expert_k_factor(shape, hw, layout)


def expert_k_factor(shape, hw: Cluster, layout: Layout) -> np.ndarray:
    """Relative rate of the experts' GEMMs for their reduction lengths K, against K = GEMM_K_REFERENCE that
    the dense efficiency stands for: each GEMM runs at K / (K + K_half) (physics/constants.py, DeepGEMM),
    K_half in 16-bit K steps times the precision's speed-up over 16 bits. Forward: gate + up (K = h, g f
    wide, g = 2 gated) and down (K = f, h wide); data gradient: K = g f and K = h; weight gradient: K = the
    expert's tokens (the t / (t + t_half) term). Time adds up per FLOP, so the rates combine harmonically.
    Tensor parallelism inside the experts splits f: each rank's GEMMs have f / etp."""
    h, f = shape.hidden, (shape.expert_ffn or shape.hidden) / layout.expert_tp
    g = 2.0 if shape.gated_mlp else 1.0
    peak = np.asarray(hw.peak_flops, float)
    peak16 = peak if hw.attention_peak_flops is None else np.asarray(hw.attention_peak_flops, float)
    k_half = GEMM_K_HALF_16BIT * np.where(np.isfinite(peak16) & (peak16 > 0), peak / peak16, 1.0)

    def rate(k: float) -> np.ndarray:
        return (k / (k + k_half)) / (GEMM_K_REFERENCE / (GEMM_K_REFERENCE + k_half))

    # (FLOP weight, K): forward up, forward down, data-gradient up, data-gradient down
    passes = ((g, h), (1.0, f), (g, g * f), (1.0, h))
    weight = sum(w for w, _ in passes) + (g + 1.0)  # the weight gradient at rate 1 here
    time = np.asarray(sum(w / rate(k) for w, k in passes), float) + (g + 1.0)
    return weight / time


def experts_hit(shape, tokens) -> np.ndarray:
    """Expected distinct routed experts ``tokens`` tokens pick, each choosing k of E under balanced routing:
    E (1 - (1 - k / E)^tokens)."""
    experts, k = float(shape.experts), float(shape.experts_per_token)
    return experts * (1.0 - (1.0 - k / experts) ** np.asarray(tokens, float))


def expert_loop_s(shape, layout: Layout, tokens, stage_layers, loop, module_fetch) -> np.ndarray:
    """Host time of a micro-batch the GPU waits for where the experts run as transformers' eager loop
    (``loop``, per layout): each MoE layer of the stage iterates over the experts its ``tokens`` tokens picked,
    ``HF_EXPERT_ITERATION_S`` each, in forward, backward and the recomputed forward; and, under DeepSpeed
    ZeRO-3 (``module_fetch``), every expert's linears (2, 3 gated) fetched one module at a time in each of
    those passes, ``ZERO3_MODULE_FETCH_S`` each (physics/constants.py; the rest of the model's modules are
    physics/zero3_hooks.py's)."""
    if not shape.experts:
        return np.zeros(np.shape(np.asarray(tokens, float)))
    passes = 2.0 + layout.recomputed_share(shape.layers)
    moe_layers = np.asarray(stage_layers, float) * shape.moe_layer_share
    linears = 3.0 if shape.gated_mlp else 2.0
    iterations = np.where(loop, moe_layers * experts_hit(shape, tokens), 0.0)
    fetches = np.where(np.asarray(loop) & np.asarray(module_fetch), moe_layers * shape.experts * linears, 0.0)
    return passes * (iterations * HF_EXPERT_ITERATION_S + fetches * ZERO3_MODULE_FETCH_S)
