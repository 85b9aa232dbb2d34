"""FSDP2 with expert parallelism (torchtitan's and NeMo AutoModel's composition): the experts are sharded over the
ranks EP leaves, on links of their own, and the all-to-all reaches the ranks the routing picks. Byte counts derived
by hand for named layouts, and the round-robin gate NeMo AutoModel's benchmarks publish with, replayed."""

from math import comb

import numpy as np
import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import JobSpec, ModelSpec, Problem
from optimizer.physics.layout import Cluster, Layout, RunSettings
from optimizer.physics.links import Links
from optimizer.physics.moe import all_to_all_s, round_robin_groups_hit
from optimizer.physics.shapes import ModelShape
from optimizer.physics.time import step_time
from optimizer.planning.model_state import training_state

NO_OVERLAP = RunSettings(seq_len=4096, overlap=0.0)
NIC_BYTES_PER_S = 50e9  # one 400 Gb/s NIC per GPU
NVLINK_BYTES_PER_S = 450e9  # 900 GB/s both directions

# GPT-OSS 120B (openai/gpt-oss-120b config.json): 36 layers, hidden 2880, 128 SwiGLU experts of 2880, top-4;
# the routed experts 36 x 128 x 3 x 2880 x 2880 parameters (biases left out), of 116.8B
GPT_OSS_EXPERT_PARAMS = 36 * 128 * 3 * 2880 * 2880
GPT_OSS = ModelShape(
    params=116.8e9,
    active_params=5.1e9,
    layers=36,
    hidden=2880,
    heads=64,
    kv_width=512,
    q_width=4096,
    ffn_active=4 * 2880,
    vocab=201088,
    has_shapes=True,
    experts=128,
    experts_per_token=4,
    expert_params=GPT_OSS_EXPERT_PARAMS,
    expert_ffn=2880,
)


def _cluster(nodes: int) -> Cluster:
    return Cluster(
        peak_flops=1e15,
        hbm_bytes_per_s=3e12,
        intra_bytes_per_s=2 * NVLINK_BYTES_PER_S,
        network_bytes_per_s=NIC_BYTES_PER_S,
        gpus_per_node=8,
        compute_efficiency=0.5,
        nodes=nodes,
    )


def _data_parallel_s(shape: ModelShape, layout: Layout, nodes: int) -> float:
    """Exposed communication of a step without overlap, less the expert all-to-all: the ZeRO / FSDP traffic."""
    train = training_state(JobSpec(model=ModelSpec(params=shape.params), tokens=1e9), shape)
    t = step_time(shape, train, _cluster(nodes), layout, NO_OVERLAP)
    return float(t.step_s - t.ideal_s - t.all_to_all_s)


def test_automodel_gpt_oss_shards_each_expert_over_four_ranks_a_node_apart():
    # NeMo AutoModel @ 89e3a9fd (the GPT-OSS 120B row of docs/performance-summary.mdx): 64 H100 on 8 nodes, EP 16,
    # FSDP2 over all 64. components/distributed/fsdp2.py builds the MoE mesh (pp, ep_shard, ep) with
    # ep_shard = dp / ep = 4, EP innermost; components/moe/parallelizer.py fully_shard-s each layer's experts over
    # ep_shard: 4 ranks 16 apart, each on its own node, so each ring runs through one GPU's NIC. The dense weights
    # shard over all 64 (8 whole nodes: 8 NICs a node, under NVLink's 450 GB/s). Per micro-batch FSDP2's default
    # (reshard_after_forward=True) gathers the weights for forward and backward and reduce-scatters the gradients.
    expert_bytes = 2.0 * GPT_OSS_EXPERT_PARAMS / 16  # bf16, each rank's 8 of the 128 experts
    dense_bytes = 2.0 * (GPT_OSS.params - GPT_OSS_EXPERT_PARAMS)
    experts_s = 3 * 3 / 4 * expert_bytes / NIC_BYTES_PER_S
    dense_s = 3 * 63 / 64 * dense_bytes / (8 * NIC_BYTES_PER_S)
    layout = Layout(dp=64, zero=3, shard=64, ep=16)
    assert _data_parallel_s(GPT_OSS, layout, nodes=8) == pytest.approx(experts_s + dense_s, rel=1e-6)
    assert 3 / 4 * expert_bytes == pytest.approx(10.75e9, rel=1e-3)  # received a transfer: 14.33 GB a rank
    assert experts_s > 10 * dense_s


def test_hybrid_sharding_all_reduces_each_ranks_whole_expert_shard_over_the_replicas():
    # torchtitan's HSDP with EP (ParallelDims: dp_replicate 2 x dp_shard 8, EP 8 borrowed from dp_shard, so
    # dp_shard_mod_ep = 1): on 2 nodes of 8 each rank holds its eighth of the experts whole and unsharded, its
    # twin on the other node the same eighth. After the step's reduce-scatter inside the node, the replicas
    # all-reduce 1/8 of the dense gradients and the whole local expert gradients (not 1/8 of them), 2 x 1/2 of
    # each over one NIC (the replicas are 8 ranks apart, one per node).
    shape = GPT_OSS
    expert_grad_bytes = 2.0 * GPT_OSS_EXPERT_PARAMS / 8
    dense_grad_bytes = 2.0 * (shape.params - GPT_OSS_EXPERT_PARAMS)
    in_node_s = 3 * 7 / 8 * dense_grad_bytes / NVLINK_BYTES_PER_S  # FSDP over the node: 2 gathers, 1 reduce-scatter
    replicas_s = 2 * 1 / 2 * (dense_grad_bytes / 8 + expert_grad_bytes) / NIC_BYTES_PER_S
    layout = Layout(dp=16, zero=3, shard=8, ep=8)
    assert _data_parallel_s(shape, layout, nodes=2) == pytest.approx(in_node_s + replicas_s, rel=1e-6)


def test_zero2_gathers_the_updated_experts_over_their_own_shard_group():
    # ZeRO-2 over 16 GPUs on 2 nodes with EP 8 (DeepSpeed-MoE's expert data-parallel group): the experts' gradients
    # are reduce-scattered and their updated weights all-gathered over the 2 ranks that hold the same eighth, one per
    # node (one NIC); the dense ones over all 16 (8 NICs a node). Each transfer is one bf16 copy.
    expert_bytes = 2.0 * GPT_OSS_EXPERT_PARAMS / 8
    dense_bytes = 2.0 * (GPT_OSS.params - GPT_OSS_EXPERT_PARAMS)
    one_transfer_s = 1 / 2 * expert_bytes / NIC_BYTES_PER_S + 15 / 16 * dense_bytes / (8 * NIC_BYTES_PER_S)
    layout = Layout(dp=16, zero=2, shard=16, ep=8)
    assert _data_parallel_s(GPT_OSS, layout, nodes=2) == pytest.approx(2 * one_transfer_s, rel=1e-6)


def _fake_balanced_gate_ranks(experts: int, k: int, per_rank: int, tokens: int = 4096) -> float:
    """Distinct ranks a token's experts sit on, averaged over a micro-batch, as NeMo AutoModel's FakeBalancedGate
    (nemo_automodel/components/moe/layers.py @ 89e3a9fd) routes: indices = arange(n * k).view(-1, k) % n_experts,
    the experts sharded over EP in contiguous blocks (ExpertParallel: distribute_tensor(..., [Shard(0)]))."""
    indices = np.arange(tokens * k).reshape(-1, k) % experts
    ranks = indices // per_rank
    return float(np.mean([len(set(row)) for row in ranks]))


@pytest.mark.parametrize(
    ("experts", "k", "per_rank"),
    [(128, 8, 16), (256, 8, 4), (256, 8, 32), (128, 4, 8), (160, 6, 20), (64, 6, 8), (8, 2, 1), (60, 4, 15)],
)
def test_round_robin_groups_hit_replays_the_fake_balanced_gate(experts, k, per_rank):
    simulated = _fake_balanced_gate_ranks(experts, k, per_rank, tokens=experts * k * 8)
    assert float(round_robin_groups_hit(experts, per_rank, k)) == pytest.approx(simulated, rel=1e-9)


def test_the_published_automodel_layouts_send_each_token_to_one_rank_or_node():
    # Qwen3-30B-A3B at EP 8 (16 experts a rank, top-8): one rank. DeepSeek-V3 at EP 64 on 8-GPU nodes (4 a rank,
    # top-8): two adjacent ranks, one node of 32 experts. GPT-OSS 120B at EP 16 (8 a rank, top-4): one rank.
    assert float(round_robin_groups_hit(128, 16, 8)) == 1.0
    assert float(round_robin_groups_hit(256, 4, 8)) == 2.0
    assert float(round_robin_groups_hit(256, 32, 8)) == 1.0
    assert float(round_robin_groups_hit(128, 8, 4)) == 1.0
    # a group of the whole model or more is one group
    assert float(round_robin_groups_hit(128, 128, 8)) == 1.0


QWEN3_30B = ModelShape(
    params=30.5e9,
    active_params=3.3e9,
    layers=48,
    hidden=2048,
    heads=32,
    kv_width=512,
    q_width=4096,
    ffn_active=8 * 768,
    vocab=151936,
    has_shapes=True,
    experts=128,
    experts_per_token=8,
    expert_params=48 * 128 * 3 * 2048 * 768,
    expert_ffn=768,
)


def test_deepep_sends_a_round_robin_token_to_one_other_rank_in_eight():
    # EP 8 in one node: DeepEP sends a token once to each other rank holding one of its 8 experts. A learned
    # top-8 of 128 reaches a given rank of 16 experts with probability 1 - C(112, 8) / C(128, 8) (0.67): 7 x 0.67
    # copies leave the rank; the round-robin gate's 8 consecutive experts sit on one rank, another one for 7 of 8
    # tokens: 7/8 of a copy. Megatron's alltoall sends 8 copies, 7/8 of them off the rank, either way.
    links = Links.of(_cluster(1), 1.0)
    layout = Layout(dp=8, ep=8)

    def seconds(dispatcher: str, routing: str) -> float:
        return float(all_to_all_s(QWEN3_30B, layout, 16384, 48, links, 8, dispatcher, routing))

    topk_copies = 7 * (1 - comb(112, 8) / comb(128, 8))
    assert topk_copies == pytest.approx(4.67, abs=0.01)
    assert seconds("deepep", "round_robin") / seconds("deepep", "topk") == pytest.approx(7 / 8 / topk_copies)
    one_copy_s = 48 * 4 * 16384 * 2048 * 2 / NVLINK_BYTES_PER_S
    assert seconds("deepep", "round_robin") == pytest.approx(7 / 8 * one_copy_s)
    assert seconds("alltoall", "round_robin") == seconds("alltoall", "topk") == pytest.approx(7 * one_copy_s)


def test_deepep_across_nodes_sends_a_round_robin_token_to_one_node():
    # DeepSeek-V3 at EP 64 on 8 nodes of 8 (NeMo AutoModel's 256-GPU row, PP 4): a learned top-8 of 256 reaches
    # a given node of 32 experts with probability 1 - C(224, 8) / C(256, 8) (0.66), so 7 x 0.66 copies cross the
    # NIC; the round-robin gate's 8 consecutive experts sit in one node: 7/8 of a copy crosses.
    shape = ModelShape(
        params=671e9,
        active_params=37e9,
        layers=61,
        hidden=7168,
        has_shapes=True,
        experts=256,
        experts_per_token=8,
        expert_params=650e9,
        expert_ffn=2048,
    )
    links = Links.of(_cluster(8), 1.0)
    layout = Layout(dp=64, ep=64)
    one_copy_s = 4 * 4096 * 7168 * 2 / NIC_BYTES_PER_S
    round_robin_s = float(all_to_all_s(shape, layout, 4096, 1, links, 8, "deepep", "round_robin"))
    topk_s = float(all_to_all_s(shape, layout, 4096, 1, links, 8, "deepep", "topk"))
    assert round_robin_s == pytest.approx(7 / 8 * one_copy_s)
    assert topk_s == pytest.approx(7 * (1 - comb(224, 8) / comb(256, 8)) * one_copy_s)


def test_an_unknown_routing_is_refused():
    links = Links.of(_cluster(1), 1.0)
    with pytest.raises(ValueError, match="round_robin"):
        all_to_all_s(QWEN3_30B, Layout(dp=8, ep=8), 16384, 48, links, 8, "deepep", "hashed")


def test_a_step_under_the_round_robin_gate_spends_a_fifth_of_the_all_to_all():
    # NeMo AutoModel's Qwen3-30B-A3B row (8 H100, EP 8, DeepEP, local batch 4 of 4096): the step's all-to-all under
    # the round-robin gate is 7/8 of a copy a token where a learned top-8 sends 7 x 0.67, and nothing else moves.
    train = training_state(JobSpec(model=ModelSpec(params=QWEN3_30B.params), tokens=1e9), QWEN3_30B)
    settings = RunSettings(seq_len=4096, moe_dispatcher="deepep")
    layout = Layout(dp=8, ep=8, zero=3, shard=8, micro_batch=4)
    topk = step_time(QWEN3_30B, train, _cluster(1), layout, settings)
    round_robin = step_time(QWEN3_30B, train, _cluster(1), layout, settings, moe_routing="round_robin")
    copies = 7 * (1 - comb(112, 8) / comb(128, 8))
    assert float(round_robin.all_to_all_s / topk.all_to_all_s) == pytest.approx(7 / 8 / copies)
    saved_s = float(topk.all_to_all_s - round_robin.all_to_all_s)
    assert float(topk.step_s - round_robin.step_s) == pytest.approx(saved_s)
    assert float(round_robin.ideal_s) == float(topk.ideal_s)


def test_the_assumption_reaches_a_check():
    # assumptions.moe_routing round_robin (AutoModel's fake_balanced_gate) costs the same layout's all-to-all as the
    # gate sends it: DeepEP's one copy a destination rank, one EP rank a token at EP 8 within a node, where a learned
    # top-8 reaches most of the 8
    def exchange_s(routing: str) -> float:
        job = {"name": "qwen3", "model": "qwen3-30b-a3b", "tokens": "10B", "seq_len": 4096, "global_batch": 64}
        problem = Problem.model_validate(
            expand_models({"job": job, "assumptions": {"moe_routing": routing, "moe_dispatcher": "deepep"}})
        )
        request = CheckRequest("H100-SXM", 8, tp=1, pp=1, ep=8, zero=3, micro_batch=1, compare=False)
        return check(problem, request).plan.time_breakdown_s["all_to_all"]

    assert 0.0 < exchange_s("round_robin") < 0.5 * exchange_s("topk")
