"""ZeRO-3 / FSDP traffic: which links a sharded collective uses, and when the weights are gathered under
gradient accumulation (per micro-batch or once per step), with the memory that holding them costs."""

import dataclasses

import numpy as np
import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import JobSpec, ModelSpec, Problem
from optimizer.physics.constants import FSDP_UNSHARDED_GRAD_BYTES
from optimizer.physics.layout import Cluster, Layout, RunSettings
from optimizer.physics.memory import state_bytes
from optimizer.physics.shapes import ModelShape
from optimizer.physics.time import step_time
from optimizer.planning.frameworks import FRAMEWORKS, PREFERENCE
from optimizer.planning.labels import zero3_per_step
from optimizer.planning.model_state import training_state

SHAPE = ModelShape(params=70e9, active_params=70e9)
NO_OVERLAP = RunSettings(seq_len=4096, overlap=0.0)


def _train(shape=SHAPE):
    return training_state(JobSpec(model=ModelSpec(params=shape.params), tokens=1e9), shape)


def _cluster(nodes: int) -> Cluster:
    return Cluster(
        peak_flops=1e15,
        hbm_bytes_per_s=3e12,
        intra_bytes_per_s=900e9,  # NVLink, both directions: 450 GB/s each way
        network_bytes_per_s=50e9,  # one 400 Gb/s NIC per GPU
        gpus_per_node=8,
        compute_efficiency=0.5,
        nodes=nodes,
    )


def _network_s(layout: Layout, nodes: int, settings=NO_OVERLAP, per_step=False) -> float:
    t = step_time(SHAPE, _train(), _cluster(nodes), layout, settings, zero3_per_step=per_step)
    return float(t.step_s - t.ideal_s)


def test_fsdp_over_whole_nodes_gathers_through_every_nic_of_the_node():
    # FSDP over 64 GPUs on 8 nodes: NCCL spreads its ring channels over the node's eight NICs, so the
    # weights a node receives (7/8 of them) come in at 8 x 50 GB/s, not through one GPU's NIC. Per micro-batch:
    # two all-gathers of the bf16 weights and one reduce-scatter of the bf16 gradients, 63/64 of each.
    fsdp64 = _network_s(Layout(dp=64, zero=3, shard=64), nodes=8)
    volume = 3 * 63 / 64 * 2 * 70e9
    assert fsdp64 == pytest.approx(volume / (8 * 50e9), rel=1e-6)


def test_a_group_with_one_gpu_per_node_has_one_nic():
    # TP 8 inside each node, FSDP 8 across the 8 nodes: each shard group holds one GPU per node, whose own
    # NIC carries the whole ring, 1/8 of the weights per GPU after TP.
    fsdp8_tp8 = _network_s(Layout(tp=8, dp=8, zero=3, shard=8), nodes=8)
    volume = 3 * 7 / 8 * 2 * 70e9 / 8
    assert fsdp8_tp8 > volume / 50e9 * 0.999  # plus the TP all-reduces inside the node
    # And the eight NICs never beat NVLink: every member forwards the ring over NVLink too.
    fast_nics = Cluster(**{**vars(_cluster(8)), "network_bytes_per_s": 100e9})
    t = step_time(SHAPE, _train(), fast_nics, Layout(dp=64, zero=3, shard=64), NO_OVERLAP)
    assert float(t.step_s - t.ideal_s) == pytest.approx(3 * 63 / 64 * 2 * 70e9 / 450e9, rel=1e-6)


def test_with_gradient_accumulation_fsdp2_regathers_every_micro_batch_unless_weights_are_held():
    # Eight micro-batches per step. FSDP2's default (reshard_after_forward=True, gradients synced every
    # micro-batch): 8 x (2 all-gathers + 1 reduce-scatter). Held over the step (torch.distributed.pipelining,
    # NeMo AutoModel's enable_fsdp_optimizations): 1 all-gather + 1 reduce-scatter per step.
    layout = Layout(dp=64, zero=3, shard=64, grad_accum=8)
    per_micro = _network_s(layout, nodes=8)
    per_step = _network_s(layout, nodes=8, per_step=True)
    assert per_micro / per_step == pytest.approx(8 * 3 / 2)


def test_fsdp2_without_gradient_sync_reduce_scatters_once_a_step():
    # A loop that skips the gradient sync on all but the last micro-batch (set_requires_gradient_sync(False):
    # job.gradient_accumulator unsharded) still regathers the weights twice a micro-batch, and reduce-scatters the
    # gradients once, after the last backward: 8 x 2 + 1 transfers of the weights' size where the default runs 8 x 3.
    layout = Layout(dp=64, zero=3, shard=64, grad_accum=8)
    train = _train()
    unsynced = dataclasses.replace(train, gradient_accumulator="unsharded")
    synced_s = step_time(SHAPE, train, _cluster(8), layout, NO_OVERLAP)
    unsynced_s = step_time(SHAPE, unsynced, _cluster(8), layout, NO_OVERLAP)
    ratio = (unsynced_s.step_s - unsynced_s.ideal_s) / (synced_s.step_s - synced_s.ideal_s)
    assert ratio == pytest.approx((8 * 2 + 1) / (8 * 3))


def test_holding_the_weights_costs_the_unsharded_stage_and_its_fp32_gradient():
    # PP 4 x FSDP 8: each GPU holds 1/4 of the layers. Held over the step, it keeps that quarter's bf16
    # weights unsharded and accumulates an unsharded fp32 gradient for it (FSDP2 upcasts the accumulated
    # gradient to the reduce dtype), on top of its gradient shard.
    train = _train()
    layout = Layout(pp=4, dp=8, zero=3, shard=8)
    w, g, o = state_bytes(SHAPE, train, layout)
    w_held, g_held, o_held = state_bytes(SHAPE, train, layout, zero3_per_step=True)
    assert float(w_held) == pytest.approx(2 * 70e9 / 4)
    assert float(g_held - g) == pytest.approx(FSDP_UNSHARDED_GRAD_BYTES * 70e9 / 4)
    assert float(o_held) == float(o)
    assert float(w_held + g_held) > float(w + g) * 3  # the price of gathering once


def test_experts_split_by_ep_over_the_whole_shard_group_are_never_gathered():
    # EP 8 = FSDP 8 on one node: each rank holds its eighth of the experts whole, as NeMo AutoModel's MoE
    # parallelizer shards them (FSDP over the ranks EP leaves: none), so only the 2B dense weights travel:
    # 2 all-gathers + 1 reduce-scatter of 7/8 x 2 bytes x 2e9 over NVLink (450 GB/s each way).
    moe = ModelShape(
        params=30e9,
        active_params=3e9,
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
        expert_params=28e9,
        expert_ffn=768,
    )
    train = training_state(JobSpec(model=ModelSpec(params=30e9), tokens=1e9), moe)
    t = step_time(moe, train, _cluster(1), Layout(dp=8, zero=3, shard=8, ep=8), NO_OVERLAP)
    zero3_s = float(t.step_s - t.ideal_s - t.all_to_all_s)
    assert zero3_s == pytest.approx(3 * 7 / 8 * 2 * 2e9 / 450e9, rel=1e-6)


def test_torchtitan_keeps_weights_gathered_under_pipeline_parallelism_only():
    # torchtitan's reshard_after_forward_policy 'default' is 'not pp_enabled'; no other framework runs
    # ZeRO-3 with PP. The job's assumption overrides the rule either way.
    codes = np.array([PREFERENCE.index("torchtitan"), PREFERENCE.index("torchtitan"), PREFERENCE.index("fsdp"), -1])
    pp = np.array([4, 1, 1, 4])
    assert zero3_per_step(codes, pp).tolist() == [True, False, False, False]
    assert zero3_per_step(codes, pp, "step").tolist() == [True] * 4
    assert zero3_per_step(codes, pp, "micro_batch").tolist() == [False] * 4
    assert "pp_enabled" in FRAMEWORKS["torchtitan"].zero3_gathers_source


def test_check_of_a_torchtitan_pipeline_layout_gathers_once_and_says_so_in_memory():
    job = {
        "job": {
            "name": "pp",
            "model": "llama-3.1-70b",
            "tokens": "1B",
            "seq_len": 8192,
            "global_batch": 64,
            "framework": "torchtitan",
        },
    }

    def plan(gathers):
        problem = Problem.model_validate(expand_models({**job, "assumptions": {"zero3_gathers": gathers}}))
        return check(
            problem,
            CheckRequest("H100-SXM", 64, nodes=8, tp=1, pp=4, zero=3, micro_batch=1, recompute="full", compare=False),
        ).plan

    auto, micro = plan("auto"), plan("micro_batch")
    assert auto.time_breakdown_s["network"] < micro.time_breakdown_s["network"]
    assert auto.memory_gib.weights > micro.memory_gib.weights
    assert auto.memory_gib.gradients > micro.memory_gib.gradients


def test_held_weights_add_no_unsharded_gradient_for_experts_that_ep_already_splits():
    # EP 8 over the 8-rank shard group: FSDP leaves the experts out (AutoModel's MoE parallelizer passes
    # them as ignored_params), so holding the weights over the step adds an fp32 gradient for the 2B dense
    # parameters only, and the experts' weights and gradients stay as they are.
    moe = ModelShape(params=30e9, active_params=3e9, experts=128, experts_per_token=8, expert_params=28e9)
    train = training_state(JobSpec(model=ModelSpec(params=30e9), tokens=1e9), moe)
    layout = Layout(dp=8, zero=3, shard=8, ep=8)
    w, g, _ = state_bytes(moe, train, layout)
    w_held, g_held, _ = state_bytes(moe, train, layout, zero3_per_step=True)
    assert float(g_held - g) == pytest.approx(FSDP_UNSHARDED_GRAD_BYTES * 2e9)
    assert float(w_held) == pytest.approx(2 * 2e9 + 2 * 28e9 / 8)
