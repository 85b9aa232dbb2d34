"""Mixtures of experts as the README describes them: given a model and a layout, the step time includes
the experts' all-to-all, their element-wise kernels and their short GEMMs, each for a stated reason; and
the layouts Megatron-Core publishes (parallel folding) run."""

import pytest

from optimizer import CheckRequest, GpuplanError, check, plan
from optimizer.inputs.files import expand_models
from optimizer.inputs.hf_models import count_params, model_fields, presets
from optimizer.inputs.schema import ModelSpec, Problem
from optimizer.physics.constants import GEMM_K_HALF_FP8, MOE_HOST_S_PER_LAYER, MOE_HOST_S_PER_LOCAL_EXPERT
from optimizer.physics.layout import Cluster, Layout
from optimizer.physics.moe import expert_k_factor, exposed_all_to_all_s, moe_elementwise_bytes_per_token
from optimizer.planning.model_state import model_shape
from optimizer.planning.runnable import why_not_runnable


def _problem(model: str, precision: str = "bf16", framework: str = "megatron", **assumptions) -> Problem:
    data = {
        "job": {
            "name": f"{model}-pretrain",
            "model": model,
            "method": "full",
            "tokens": "100B",
            "seq_len": 4096,
            "global_batch": 4096 if model == "deepseek-v3" else 8192,
            "precision": precision,
            "framework": framework,
        },
        "assumptions": assumptions,
    }
    return Problem.model_validate(expand_models(data))


def _preset_shape(name: str):
    return model_shape(ModelSpec(**model_fields(presets()[name]["config"])))


def _deepseek_b200(dispatcher: str, overlap: float = 0.0):
    """The Megatron-Bridge 26.04 DeepSeek-V3 row: 256 B200, PP 8 x 2 chunks, EP 32 (4 nodes), MBS 1, every layer
    recomputed (the recipe recomputes the MLA up-projections, a module recompute gpuplan does not model)."""
    problem = _problem("deepseek-v3", "fp8", moe_dispatcher=dispatcher, moe_overlap=overlap)
    fixed = {"tp": 1, "pp": 8, "virtual_stages": 2, "ep": 32, "zero": 1, "micro_batch": 1, "recompute": "full"}
    return check(problem, CheckRequest("B200", 256, compare=False, **fixed)).plan


def test_deepep_sends_a_token_once_per_remote_node_not_once_per_expert():
    # Megatron's alltoall dispatcher sends a token to each of its 8 experts: 8 x 24/32 = 6 copies leave the
    # node. DeepEP sends one copy per remote node that holds one of them: 3 x (1 - C(192, 8) / C(256, 8))
    # = 2.7 copies. The all-to-all crosses the NIC, so its time falls by about 2.7 / 6.
    alltoall, deepep = _deepseek_b200("alltoall"), _deepseek_b200("deepep")
    ratio = deepep.time_breakdown_s["all_to_all"] / alltoall.time_breakdown_s["all_to_all"]
    assert ratio == pytest.approx(2.7 / 6.0, rel=0.05)
    assert deepep.tokens_per_s > 1.5 * alltoall.tokens_per_s


def test_auto_dispatches_with_deepep_where_ep_leaves_the_node_and_alltoall_inside_it():
    # Megatron-Core's MoE README: DeepEP's flex dispatcher for "Cross-node EP", alltoall for "Standard EP > 1
    # setups". EP 32 on 8-GPU B200 nodes crosses four nodes: auto is DeepEP, to the last digit.
    assert _deepseek_b200("auto").tokens_per_s == _deepseek_b200("deepep").tokens_per_s
    # EP 8 stays in its node: auto is alltoall
    problem = _problem("deepseek-v3", "fp8")
    fixed = {"tp": 1, "pp": 8, "ep": 8, "zero": 1, "micro_batch": 1, "recompute": "full", "compare": False}
    inside = {d: check(_problem("deepseek-v3", "fp8", moe_dispatcher=d), CheckRequest("B200", 256, **fixed)).plan
              for d in ("alltoall", "deepep")}  # fmt: skip
    assert problem.assumptions.moe_dispatcher == "auto"
    assert check(problem, CheckRequest("B200", 256, **fixed)).plan.tokens_per_s == inside["alltoall"].tokens_per_s
    assert inside["deepep"].tokens_per_s != inside["alltoall"].tokens_per_s


def test_overlapped_all_to_all_hides_behind_compute_but_never_more_than_the_compute():
    # overlap_moe_expert_parallel_comm hides one micro-batch's all-to-all behind another's compute: what
    # exceeds that compute stays exposed, and a partial overlap hides its share at most.
    assert float(exposed_all_to_all_s(0.10, 1.0, 0.25)) == 0.0
    assert float(exposed_all_to_all_s(0.30, 1.0, 0.25)) == pytest.approx(0.05)
    assert float(exposed_all_to_all_s(0.10, 0.5, 0.25)) == pytest.approx(0.05)
    hidden = _deepseek_b200("deepep", overlap=1.0)
    assert hidden.time_breakdown_s["all_to_all"] < 0.1 * _deepseek_b200("deepep").time_breakdown_s["all_to_all"]


def test_the_all_to_all_share_is_reported_for_moe_plans_only():
    moe = _deepseek_b200("deepep")
    assert 0 < moe.time_breakdown_s["all_to_all"] <= moe.time_breakdown_s["network"]
    dense = check(_problem("llama-3.1-8b"), CheckRequest("H100-SXM", 8, compare=False)).plan
    assert "all_to_all" not in dense.time_breakdown_s


def test_moe_element_wise_kernels_cost_hbm_traffic_per_routed_copy():
    # Qwen3-30B-A3B: 48 MoE layers, top-8, h 2048, f 768. Forward (3 h + 5 f) 16-bit elements per routed
    # copy (cast, GEMM outputs, SwiGLU), backward twice that; plus the dispatcher's permutations: DeepEP
    # permutes and unpermutes (3 h), Megatron's alltoall also sorts and un-sorts by local expert (7 h),
    # HybridEP permutes inside its kernels (0).
    shape = _preset_shape("qwen3-30b-a3b")
    for dispatcher, permute in (("hybridep", 0), ("deepep", 3), ("alltoall", 7)):
        expected = 48 * 8 * ((3 + permute) * 2048 + 5 * 768) * 3 * 2
        assert moe_elementwise_bytes_per_token(shape, dispatcher) == pytest.approx(expected)
    assert moe_elementwise_bytes_per_token(_preset_shape("llama-3.1-8b")) == 0.0
    # DeepSeek-V3's first 3 layers are dense: 58 of 61 layers route tokens.
    assert _preset_shape("deepseek-v3").moe_layer_share == pytest.approx(58 / 61)


def test_each_moe_layer_waits_for_the_host_once_per_micro_batch():
    # The host time is per MoE layer and micro-batch, not per token: DeepSeek-V3 on the 256-B200 layout holds
    # ceil(61 / 8) = 8 layers per stage, 58/61 of them MoE, and a step runs m + (p - 1) / v = 128 + 7/2
    # micro-batch slots (4,096 sequences over 32 data-parallel ranks at micro-batch 1), so each millisecond
    # per layer adds 8 x 58/61 x 131.5 ms to the step. A dense model pays nothing.
    def step(ms: float) -> float:
        problem = _problem("deepseek-v3", "fp8", moe_host_ms_per_layer=ms)
        return check(
            problem,
            CheckRequest("B200", 256, tp=1, pp=8, virtual_stages=2, ep=32, zero=1, micro_batch=1, compare=False),
        )

    without, with_host = step(0.0).plan, step(2.0).plan
    slots = with_host.strategy.grad_accum + 7 / 2
    assert with_host.step_s - without.step_s == pytest.approx(2e-3 * 8 * 58 / 61 * slots, rel=1e-6)
    dense = [
        check(
            _problem("llama-3.1-8b", moe_host_ms_per_layer=ms), CheckRequest("H100-SXM", 8, compare=False)
        ).plan.step_s
        for ms in (0.0, 5.0)
    ]
    assert dense[0] == dense[1]


def test_check_reports_the_host_time_share_where_it_weighs():
    # Megatron-Bridge's Qwen3-30B-A3B H100 layout (EP 16 over 2 nodes, micro-batch 1): 48 MoE layers each wait
    # 0 ms (MOE_HOST_S_PER_LAYER, fitted) plus 0.2 ms for each of their 128 / 16 = 8 local experts (Transformer
    # Engine's GroupedLinear loops over them: MOE_HOST_S_PER_LOCAL_EXPERT) per micro-batch, 64 micro-batches per
    # step: 4.92 s, reported with its share and the fix.
    assert (MOE_HOST_S_PER_LAYER, MOE_HOST_S_PER_LOCAL_EXPERT) == (0.0, 0.2e-3)
    problem = _problem("qwen3-30b-a3b", "fp8")
    problem.job.global_batch = 1024
    problem.job.framework = "megatron"
    result = check(problem, CheckRequest("H100-SXM", 16, tp=1, pp=1, ep=16, micro_batch=1, compare=False))
    assert result.plan.time_breakdown_s["moe_host"] == pytest.approx(48 * (0.0 + 8 * 0.2e-3) * 64)
    note = next(n for n in result.notes if n.startswith("MoE host time: 4.92 s"))
    assert (
        "8 local experts" in note and "moe_host_ms_per_layer: 0" in note and "moe_host_ms_per_local_expert: 0" in note
    )


def test_the_per_expert_host_loop_is_transformer_engines_and_shrinks_with_ep():
    # Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP) loops over the rank's experts / EP local
    # experts on the host; torchtitan's torch._grouped_mm launches one kernel for all of them. On one layout both
    # run (EP 8 inside the FSDP shard group), Megatron's host time per MoE layer and micro-batch is the per-layer
    # part plus 16 local experts' (128 / 8); torchtitan's the per-layer part alone. Doubling EP halves the loop.
    def host_s(framework: str, gpus: int, ep: int) -> float:
        problem = _problem("qwen3-30b-a3b")
        problem.job.framework = framework
        request = CheckRequest("H100-SXM", gpus, tp=1, pp=1, ep=ep, zero=3, micro_batch=1, compare=False)
        plan = check(problem, request).plan
        return plan.time_breakdown_s["moe_host"] / (48 * plan.strategy.grad_accum)

    assert host_s("torchtitan", 8, 8) == pytest.approx(MOE_HOST_S_PER_LAYER)
    assert host_s("megatron", 8, 8) == pytest.approx(MOE_HOST_S_PER_LAYER + 16 * MOE_HOST_S_PER_LOCAL_EXPERT)
    assert host_s("megatron", 16, 16) == pytest.approx(MOE_HOST_S_PER_LAYER + 8 * MOE_HOST_S_PER_LOCAL_EXPERT)


def test_deepspeed_moe_loops_over_its_local_experts_and_transformers_experts_do_not():
    # DeepSpeed-MoE's Experts.forward runs one module per local expert in a Python loop (deepspeed/moe/experts.py):
    # at EP 8 under DeepSpeed (ZeRO-2: its MoE layers refuse ZeRO-3) the host time per MoE layer and micro-batch
    # carries 16 local experts' loop; at EP 1 DeepSpeed trains transformers' own experts (grouped_mm by default),
    # one launch for all of them.
    def host_s(gpus: int, ep: int) -> float:
        problem = _problem("qwen3-30b-a3b")
        problem.job.framework = "deepspeed"
        request = CheckRequest("H100-SXM", gpus, tp=1, pp=1, ep=ep, zero=2, micro_batch=1, compare=False)
        plan = check(problem, request).plan
        return plan.time_breakdown_s.get("moe_host", 0.0) / (48 * plan.strategy.grad_accum)

    assert host_s(8, 8) == pytest.approx(MOE_HOST_S_PER_LAYER + 16 * MOE_HOST_S_PER_LOCAL_EXPERT)
    assert host_s(8, 1) == pytest.approx(MOE_HOST_S_PER_LAYER)


def test_k_half_reproduces_deepgemm_fp8_table():
    # DeepGEMM README (H800, FP8, M = 4096): TFLOPS at K = 512, 1536, 2048, 7168, 16384.
    table = {512: 590, 1536: 990, 2048: 1025, 7168: 1304, 16384: 1358}
    long_k = table[16384] / (16384 / (16384 + GEMM_K_HALF_FP8))
    for k, tflops in table.items():
        assert long_k * k / (k + GEMM_K_HALF_FP8) == pytest.approx(tflops, rel=0.05)


def test_narrow_experts_run_short_k_gemms_slower_than_wide_ones():
    # Qwen3-30B-A3B's experts reduce over K = 768 (down projection) and 2 x 768: in FP8 (K_half 725) they
    # run at about 80 % of a long-K GEMM; DeepSeek-V3's (h 7168, f 2048) at about 95 %.
    fp8 = Cluster(peak_flops=2e15, hbm_bytes_per_s=8e12, intra_bytes_per_s=1.8e12, network_bytes_per_s=5e10,
                  gpus_per_node=8, compute_efficiency=0.5, attention_peak_flops=1e15)  # fmt: skip
    qwen = float(expert_k_factor(_preset_shape("qwen3-30b-a3b"), fp8, Layout()))
    deepseek = float(expert_k_factor(_preset_shape("deepseek-v3"), fp8, Layout()))
    assert 0.75 < qwen < 0.85 < 0.93 < deepseek < 1.0
    # Tensor parallelism inside the experts halves their K again.
    assert float(expert_k_factor(_preset_shape("qwen3-30b-a3b"), fp8, Layout(tp=2))) < qwen


def test_parallel_folding_runs_megatrons_published_qwen3_235b_h100_layout():
    # Megatron-Bridge 26.04, Qwen3-235B-A22B on 256 H100: TP 2, PP 8 x 4 chunks, EP 32 with expert TP 1.
    # EP 32 does not divide the 16 data-parallel ranks; with folding EP x expert TP = 32 divides TP x DP. The
    # table prints no expert TP: left open, check folds with expert TP 1 as the recipe does, and says so.
    problem = _problem("qwen3-235b-a22b", "fp8", moe_overlap=1.0)
    layout = {"tp": 2, "pp": 8, "virtual_stages": 4, "ep": 32, "zero": 1, "micro_batch": 1, "compare": False}
    with pytest.raises(GpuplanError) as refused:
        check(problem, CheckRequest("H100-SXM", 256, **{**layout, "expert_tp": 2}))
    assert "--expert-tp" in str(refused.value)
    assert check(problem, CheckRequest("H100-SXM", 256, **layout)).plan.strategy.expert_tp == 1
    folded = check(problem, CheckRequest("H100-SXM", 256, expert_tp=1, **layout))
    assert folded.plan.fits and folded.plan.strategy.expert_tp == 1 and folded.plan.strategy.ep == 32
    # Folding is Megatron-Core's (--expert-tensor-parallel-size); torchtitan splits experts by the attention TP.
    rule = "splits the experts by the attention TP only"
    strategy = folded.plan.strategy
    assert not any(rule in why for why in why_not_runnable("megatron", strategy, 94))
    assert any(rule in why for why in why_not_runnable("torchtitan", strategy, 94))


def test_sliding_window_layers_count_fewer_keys_per_query():
    # GPT-OSS alternates 128-token windows with full attention: at 4,096 tokens a windowed layer counts
    # 2 x 128 - 128^2 / 4096 = 252 keys per query instead of 4,096.
    shape = _preset_shape("gpt-oss-120b")
    assert shape.sliding_window == 128 and shape.window_layers == 18
    assert shape.attention_span(4096) == pytest.approx(0.5 * 4096 + 0.5 * 252)
    assert shape.attention_span(100) == 100  # the window covers a short sequence whole
    # config.json: layer_types lists the windowed layers; Qwen2's use_sliding_window: false switches it off.
    cfg = {**presets()["gpt-oss-20b"]["config"], "layer_types": ["sliding_attention"] * 6 + ["full_attention"] * 18}
    assert count_params(cfg)["window_layers"] == 6
    qwen2 = {"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
             "intermediate_size": 4864, "vocab_size": 151936, "sliding_window": 32768, "use_sliding_window": False}  # fmt: skip
    assert count_params(qwen2)["sliding_window"] is None


def test_mla_scores_at_the_query_key_head_dim_and_values_at_the_value_head_dim():
    # DeepSeek-V3: 128 heads, q/k head dim 128 + 64 = 192, value head dim 128.
    shape = _preset_shape("deepseek-v3")
    assert shape.q_width == 128 * 192
    assert shape.attention_width == 128 * (192 + 128) / 2


def test_solve_chooses_expert_parallelism_where_it_pays_and_shows_its_all_to_all_share():
    # Qwen3-30B-A3B full fine-tune on 2B tokens in 45 minutes with DeepEP: about 56 B200, where splitting
    # the experts over 2 GPUs of a node (more rows per expert GEMM, fewer expert bytes for ZeRO to gather)
    # beats a plain hybrid shard, for an all-to-all of a few per cent of the step.
    problem = Problem.model_validate(
        expand_models(
            {
                "job": {
                    "name": "q30",
                    "model": "qwen3-30b-a3b",
                    "method": "full",
                    "tokens": "2B",
                    "seq_len": 4096,
                    "global_batch": "free",  # (the scaling law's batch: a fine-tune's recipe batch runs no 56 GPUs)
                },
                "constraints": {"deadline": "45m"},
                "assumptions": {"moe_dispatcher": "deepep"},
            }
        )
    )
    result = plan(problem)
    assert result.best is not None and result.best.strategy.ep > 1
    share = result.best.time_breakdown_s["all_to_all"] / result.best.step_s
    assert 0.005 < share < 0.5
    assert any(f"({share:.0%}) exposed" in note for note in result.notes)


def test_an_export_names_the_dispatcher_auto_timed():
    # The Megatron export's flags are the dispatcher the plan's time assumed: under auto, DeepEP's flex dispatcher
    # for EP 16 across two B200 nodes, alltoall for EP 8 inside one (the flags' parse is tests/exports/test_exports_run.py)
    from optimizer.present.exports.megatron_run import plan_dispatcher

    problem = _problem("qwen3-30b-a3b")
    problem.job.global_batch = 96
    two_nodes = check(problem, CheckRequest("B200", 16, ep=16, zero=1, compare=False)).plan
    one_node = check(problem, CheckRequest("B200", 8, ep=8, zero=1, compare=False)).plan
    assert plan_dispatcher("auto", two_nodes) == "deepep" and plan_dispatcher("auto", one_node) == "alltoall"
    assert plan_dispatcher("hybridep", one_node) == "hybridep"


def _qwen3_30b_h100(tp: int, expert_tp: int, ep: int):
    """Qwen3-30B-A3B (128 experts, top 8) on 16 H100, one 4k sequence a micro-batch."""
    problem = _problem("qwen3-30b-a3b", moe_dispatcher="alltoall")
    layout = {"tp": tp, "pp": 1, "ep": ep, "zero": 1, "micro_batch": 1}
    return check(problem, CheckRequest("H100-SXM", 16, compare=False, expert_tp=expert_tp, **layout)).plan


def test_each_tensor_parallel_rank_dispatches_its_own_sequence_shard():
    # Megatron-Core runs MoE under TP with sequence parallelism only, and its alltoall dispatcher sends each rank's
    # own b s / tp tokens across the EP group; where the experts are split etp ways the group then gathers them
    # (and reduce-scatters them back): 4 x (etp - 1) copies of tokens / tp x top-k hidden states a layer, on NVLink.
    # TP 2 with the experts unsplit (folding) sends half TP 1's tokens a micro-batch through the same EP 8
    # all-to-all, and runs twice TP 1's micro-batches (half the data-parallel ranks): the step's all-to-all is TP 1's.
    tp1, folded = _qwen3_30b_h100(1, 1, 8), _qwen3_30b_h100(2, 1, 8)
    assert folded.strategy.grad_accum == 2 * tp1.strategy.grad_accum
    assert folded.time_breakdown_s["all_to_all"] == pytest.approx(tp1.time_breakdown_s["all_to_all"], rel=1e-6)
    # Splitting the experts by the attention TP adds their gather. At EP 4 x expert TP 2 inside a node the EP
    # all-to-all moves 3 / 4 of the shard's routed tokens x 4 over NVLink, the gather 1 x 4: (3/4 + 1) / (3/4).
    split, unsplit = _qwen3_30b_h100(2, 2, 4), _qwen3_30b_h100(2, 1, 4)
    ratio = split.time_breakdown_s["all_to_all"] / unsplit.time_breakdown_s["all_to_all"]
    assert ratio == pytest.approx((3 / 4 + 1) / (3 / 4), rel=1e-6)


def test_check_says_which_expert_split_it_chose_where_the_question_left_it_open():
    # the answer prints what it assumed: EP and the experts' TP chosen for a --tp 2 question on an MoE model
    problem = _problem("qwen3-30b-a3b")
    problem.job.global_batch = 32
    result = check(problem, CheckRequest("H100-SXM", 16, tp=2, compare=False))
    s = result.plan.strategy
    assert s.ep > 1 and f"EP {s.ep}" in result.chosen
    assert f"expert TP {s.expert_tp or s.tp}" in result.chosen
    pinned = check(problem, CheckRequest("H100-SXM", 16, tp=2, ep=s.ep, expert_tp=s.expert_tp or 2, compare=False))
    assert not any(c.startswith(("EP ", "expert TP")) for c in pinned.chosen)
