"""Context parallelism's exchanges (physics/context_parallel.py): Ulysses' all-to-all volume against DeepSpeed-Ulysses'
formula, the head rules of DeepSpeed and XTuner under grouped-query attention, ring attention's K/V passes as
docs/design.md section 5.4 writes them, and check taking CP above 8 (Llama 3's CP 16) with a refusal naming the rule."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer import CheckRequest, GpuplanError, check, load_job
from optimizer.physics.context_parallel import (
    ALL_TO_ALL,
    ALL_TO_ALL_REPEAT_KV,
    RING,
    context_parallel_s,
    ring_exchange_s,
    ulysses_bytes,
    ulysses_extra_kv_bytes,
    ulysses_heads_split,
    ulysses_kv_heads,
    ulysses_s,
)
from optimizer.physics.layout import Layout, Recompute
from optimizer.physics.links import Links
from optimizer.physics.shapes import ModelShape

# Llama 2 7B (multi-head: 32 heads of 128, K and V as wide as Q) and Llama 2 70B (GQA: 64 query heads, 8 KV heads)
LLAMA2_7B = ModelShape(params=6.738e9, active_params=6.738e9, layers=32, hidden=4096, heads=32, kv_width=4096,
                       q_width=4096, has_shapes=True)  # fmt: skip
LLAMA2_70B = ModelShape(params=68.977e9, active_params=68.977e9, layers=80, hidden=8192, heads=64, kv_width=1024,
                        q_width=8192, has_shapes=True)  # fmt: skip
NVLINK_BYTES_PER_S = 300e9  # per direction, as Links halves a bidirectional 600 GB/s
NIC_BYTES_PER_S = 25e9
ONE_NODE = Links(intra=np.asarray(NVLINK_BYTES_PER_S), net=np.asarray(NIC_BYTES_PER_S), multi_node=np.asarray(False))
FOUR_NODES = Links(intra=np.asarray(NVLINK_BYTES_PER_S), net=np.asarray(NIC_BYTES_PER_S), multi_node=np.asarray(True))


def test_ulysses_volume_is_the_papers_4_n_h_over_p_less_the_kept_shard():
    # DeepSpeed-Ulysses (Jacobs et al. 2023, section 3.1): the all-to-alls of q, k, v and the output move an aggregate
    # 4 N h / P per link for sequence N over P GPUs; a rank keeps its own 1 / P of each, so it sends (P - 1) / P of it.
    n, p, h = 131072, 8, 4096
    sent = ulysses_bytes(LLAMA2_7B, Layout(cp=p), n / p)
    assert float(sent) == pytest.approx(4 * n * h / p * (p - 1) / p * 2)  # bf16: 2 bytes a value
    # 469,762,048 bytes (448 MiB) a layer's forward for Llama 2 7B at 128k over 8 ranks
    assert float(sent) == 469_762_048


def test_ulysses_time_is_eight_all_to_alls_a_layer_and_four_more_recomputed():
    tokens = 131072 / 8
    one = float(ulysses_bytes(LLAMA2_7B, Layout(cp=8), tokens)) / NVLINK_BYTES_PER_S
    plain = ulysses_s(LLAMA2_7B, Layout(cp=8), tokens, 32, ONE_NODE, 8)
    assert float(plain) == pytest.approx(32 * 2 * one)  # forward and backward, not overlapped
    full = ulysses_s(LLAMA2_7B, Layout(cp=8, recompute=Recompute.FULL), tokens, 32, ONE_NODE, 8)
    assert float(full) == pytest.approx(32 * 3 * one)  # the recomputed forward runs its 4 all-to-alls again
    assert float(ulysses_s(LLAMA2_7B, Layout(cp=1), tokens, 32, ONE_NODE, 8)) == 0.0


def test_ulysses_across_nodes_waits_for_the_nic_share():
    # CP 32 over 4 nodes of 8 (TP 1): of 31 destinations 7 share the node, 24 are over the NIC, at the same time
    tokens = 1048576 / 32
    sent = float(ulysses_bytes(LLAMA2_7B, Layout(cp=32), tokens))
    expected = 32 * 2 * max(sent * 7 / 31 / NVLINK_BYTES_PER_S, sent * 24 / 31 / NIC_BYTES_PER_S)
    assert float(ulysses_s(LLAMA2_7B, Layout(cp=32), tokens, 32, FOUR_NODES, 8)) == pytest.approx(expected)


def test_kv_heads_under_gqa_follow_deepspeed_and_xtuner():
    # DeepSpeed's UlyssesSPAttentionHF: KV heads as they are when CP divides them, else replicated to one a rank
    assert float(ulysses_kv_heads(64, 8, 4)) == 8
    assert float(ulysses_kv_heads(64, 8, 16)) == 16
    # XTuner repeats K and V to every query head before the all-to-all (llama_attn_forward's repeat_kv)
    assert float(ulysses_kv_heads(64, 8, 4, ALL_TO_ALL_REPEAT_KV)) == 64
    n, p = 32768, 4
    deepspeed = float(ulysses_bytes(LLAMA2_70B, Layout(cp=p), n / p, ALL_TO_ALL))
    xtuner = float(ulysses_bytes(LLAMA2_70B, Layout(cp=p), n / p, ALL_TO_ALL_REPEAT_KV))
    assert deepspeed == pytest.approx((2 * 8192 + 2 * 1024) / (4 * 8192) * xtuner)


def test_the_heads_must_split_over_tp_x_cp():
    # DeepSpeed: "Attention head count ... is not divisible by SP size"; "KV attention head count ... is not divisible
    # by SP size or vice versa"
    assert ulysses_heads_split(64, 8, 1, 64) and ulysses_heads_split(64, 8, 8, 8)
    assert not ulysses_heads_split(64, 8, 1, 128)  # fewer query heads than ranks
    assert not ulysses_heads_split(56, 8, 1, 16)  # Yi-34B's 56 heads over 16
    assert not ulysses_heads_split(48, 12, 1, 8)  # 12 KV heads neither divide nor are divided by 8
    assert ulysses_heads_split(48, 12, 1, 8, ALL_TO_ALL_REPEAT_KV)  # repeated to 48 first


def test_ring_exchange_is_design_5_4s_formula():
    # docs/design.md 5.4: per layer (cp - 1) x 2 x (b s / cp) x k x 2 bytes / t forward, 3x in all with backward,
    # exposed beyond the layer's attention compute
    layout, tokens, layers = Layout(cp=2, tp=2), 65536 / 2, 80
    volume = (2 - 1) * 2 * tokens * 1024 * 2 / 2 * 3 * layers
    assert float(ring_exchange_s(LLAMA2_70B, layout, tokens, layers, ONE_NODE, 8, 0.0)) == pytest.approx(
        volume / NVLINK_BYTES_PER_S
    )
    hidden = volume / NVLINK_BYTES_PER_S / 2
    assert float(ring_exchange_s(LLAMA2_70B, layout, tokens, layers, ONE_NODE, 8, hidden)) == pytest.approx(hidden)
    assert float(context_parallel_s(LLAMA2_70B, layout, tokens, layers, ONE_NODE, 8, hidden, RING)) == pytest.approx(
        hidden
    )


@pytest.fixture
def long_job(problems):
    """Llama 3.1 70B at 1M tokens a sequence, 16 sequences a step (Llama 3's long-context stage ran CP 16)."""
    problem = load_job(problems / "llama-70b-within-5-days.yaml")
    job = problem.job.model_copy(update={"seq_len": 1048576, "global_batch": 16})
    return problem.model_copy(update={"job": job})


def _with(problem, **job):
    return problem.model_copy(update={"job": problem.job.model_copy(update=job)})


def test_check_takes_ring_cp_16_on_a_million_tokens(long_job):
    result = check(long_job, CheckRequest("B200", 256, nodes=32, tp=8, cp=16, recompute="full", compare=False))
    assert result.plan.strategy.cp == 16 and result.plan.strategy.tp == 8
    assert any("CP 16 as ring" in n for n in result.notes)
    assert any("CP 16 (solve tries 1, 2, 4, 8)" in n for n in result.notes)


def test_check_refuses_a_cp_that_does_not_divide_the_gpus(long_job):
    with pytest.raises(GpuplanError) as caught:
        check(long_job, CheckRequest("B200", 256, nodes=32, tp=8, cp=64, recompute="full", compare=False))
    message = str(caught.value)
    assert "context parallelism 64" in message and "TP x PP x CP = 8 x 1 x 64 does not divide the 256 GPUs" in message


def test_check_refuses_a_cp_that_does_not_split_the_sequence(long_job):
    with pytest.raises(GpuplanError) as caught:
        check(long_job, CheckRequest("B200", 192, nodes=24, tp=8, cp=24, recompute="full", compare=False))
    message = str(caught.value)
    assert "context parallelism 24" in message and "2 x 24 equal chunks" in message and "job.seq_len" in message


def test_check_refuses_ulysses_where_the_heads_do_not_split(long_job):
    ulysses = _with(long_job, context_parallel="all_to_all")
    with pytest.raises(GpuplanError) as caught:
        check(ulysses, CheckRequest("B200", 256, nodes=32, tp=8, cp=16, recompute="full", compare=False))
    message = str(caught.value)
    assert "job.context_parallel all_to_all" in message and "64 query heads" in message
    ok = check(ulysses, CheckRequest("B200", 256, nodes=32, tp=4, cp=16, recompute="full", compare=False))
    assert ok.plan.strategy.cp == 16 and any("CP 16 as all_to_all" in n for n in ok.notes)


def test_ring_is_the_default_and_its_step_time_is_unchanged(long_job):
    request = CheckRequest("B200", 64, nodes=8, tp=8, cp=2, recompute="full", compare=False)
    default = check(long_job, request).plan
    ring = check(_with(long_job, context_parallel="ring"), request).plan
    assert default.step_s == ring.step_s
    ulysses = check(_with(long_job, context_parallel="all_to_all"), request).plan
    assert ulysses.step_s != default.step_s


def test_ulysses_keeps_the_replicated_kv_heads_it_received():
    # Llama 2 70B at 32k over CP 4, no recompute: XTuner's K and V arrive at 64 heads where the model has 8, and
    # FlashAttention saves them: 80 layers x 8192 tokens x 2 x (8192 - 1024) x 2 bytes more a rank
    layout = Layout(cp=4)
    extra = ulysses_extra_kv_bytes(LLAMA2_70B, layout, 32768, ALL_TO_ALL_REPEAT_KV)
    assert float(extra) == 80 * 8192 * 2 * (8192 - 1024) * 2
    assert float(ulysses_extra_kv_bytes(LLAMA2_70B, layout, 32768, ALL_TO_ALL)) == 0.0  # 8 KV heads over 4: no copy
    assert float(ulysses_extra_kv_bytes(LLAMA2_70B, Layout(cp=16), 32768, ALL_TO_ALL)) > 0.0  # replicated to 16
    assert (
        float(ulysses_extra_kv_bytes(LLAMA2_70B, Layout(cp=4, recompute=Recompute.FULL), 32768, "all_to_all_repeat_kv"))
        == 0.0
    )
    assert float(ulysses_extra_kv_bytes(LLAMA2_70B, layout, 32768, RING)) == 0.0
