"""Plans a team can launch: layouts legal in the framework it names, the real optimum over whole-job
time, the batch the user meant, and a check that means what its flags say."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer import CheckRequest, GpuplanError, check, load_catalog, load_job, plan
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem, Strategy
from optimizer.inputs.units import batch_sequences
from optimizer.planning.frameworks import FRAMEWORKS
from optimizer.planning.runnable import why_not_runnable

NODUS = load_catalog("nodus-2026-11")


def job(**fields) -> Problem:
    data = {"catalog": "nodus-2026-11", "job": {"name": "j", "model": "llama-3.1-8b", "tokens": "10B", **fields}}
    return Problem.model_validate(expand_models(data))


def test_zero_paper_figure_1_by_stage():
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, K = 12, 64 GPUs: 120 / 31.4 / 16.6 / 1.9 GB per GPU.
    # "--zero 3" is full sharding over all 64 ranks, as ZeRO and FSDP mean it (not a shard inside a node).
    problem = Problem.model_validate(
        {
            "catalog": "nodus-2026-11",
            "job": {"model": {"params": "7.5B"}, "tokens": "1B", "bytes_per_param": 16, "activation_reserve": 0},
            "assumptions": {"framework_overhead": 0},
        }
    )
    for stage, expected_gb in zip(range(4), (120.0, 31.4, 16.6, 1.9)):
        result = check(problem, CheckRequest("B200", 64, nodes=8, zero=stage, compare=False), catalog=NODUS)
        m = result.plan.memory_gib
        state_gb = (m.weights + m.gradients + m.optimizer) * 2**30 / 1e9
        assert state_gb == pytest.approx(expected_gb, abs=0.05)
        assert result.plan.strategy.shard_degree == (1 if stage == 0 else 64)


def test_hybrid_shard_is_asked_for_by_shard_degree():
    result = check(
        job(global_batch=256), CheckRequest("B200", 64, nodes=8, shard_degree=8, compare=False), catalog=NODUS
    )
    s = result.plan.strategy
    assert s.zero_stage == 3 and s.shard_degree == 8 and s.dp == 64
    # ZeRO-1 shards over every data-parallel rank: a shard degree beside it is the DP degree (a plan's own
    # strategy fed back), here TP 8 x DP 8; with TP 1 there are 64 ranks, and 8 is a hybrid ZeRO-3 shard
    zero1 = check(
        job(), CheckRequest("B200", 64, nodes=8, zero=1, shard_degree=8, compare=False), catalog=NODUS
    ).plan.strategy
    assert (zero1.zero_stage, zero1.dp, zero1.shard_degree) == (1, 8, 8)
    with pytest.raises(GpuplanError, match="hybrid ZeRO-3"):
        check(
            job(), CheckRequest("B200", 64, nodes=8, tp=1, pp=1, zero=1, shard_degree=8, compare=False), catalog=NODUS
        )


def test_free_batch_optimum_is_the_shortest_whole_job():
    # Ranking layouts by time per optimizer step preferred small steps (TP 8, 4.5 h); over the whole job
    # ZeRO-3 DP 64 finishes in about 2.3 h (2.32 since the loss's kernels cost time, physics/loss_time.py), and the
    # answer says which batch it chose.
    free = job(method="full", seq_len=4096, global_batch="free")
    answer = plan(free.model_copy(update={"objective": "time"}), runners_up=False)
    assert answer.best is not None and answer.best.hours.p50 <= 2.35
    assert any("global batch chosen" in n for n in answer.notes)


def test_a_batch_in_tokens_is_the_power_of_two_it_means():
    assert batch_sequences(4e6, 4096) == 1024  # 976.6 sequences: 4M tokens mean 4 x 2^20
    assert batch_sequences(2e6, 2048) == 1024
    assert batch_sequences(3e6, 4096) == 736  # 732.4: no power of two within 5 %, a multiple of 8
    # 977 sequences (a prime) left only single-rank layouts; 1,024 lets data parallelism divide it.
    answer = plan(job(global_batch="4M tokens").model_copy(update={"objective": "time"}), runners_up=False)
    s = answer.best.strategy
    assert s.global_batch == 1024 and s.dp >= 8
    assert any("rounded to 1,024" in n for n in answer.notes)


@pytest.mark.parametrize("framework", ["deepspeed", "megatron", "torchtitan", "fsdp"])
def test_a_named_framework_only_gets_layouts_it_runs(problems, framework):
    from optimizer import load_job

    problem = load_job(problems / "llama-70b-within-5-days.yaml")
    problem = problem.model_copy(update={"job": problem.job.model_copy(update={"framework": framework})})
    answer = plan(problem, runners_up=False)
    for p in [answer.best, *answer.frontier]:
        if p is None:
            continue
        s = p.strategy
        assert s.framework == framework
        assert why_not_runnable(framework, s, problem.job.model.layers) == []
        if framework in ("deepspeed", "megatron"):  # Megatron-FSDP's ZeRO-2/3 without PP
            assert not (s.pp > 1 and s.zero_stage >= 2)


def test_every_bundled_plan_names_its_framework(problems):
    from optimizer import load_job

    for path in sorted(problems.glob("*.yaml")):
        if "portfolio" in path.name:
            continue
        problem = load_job(path)
        if problem.job.roles is not None:  # its GPUs split between roles: solve_roles answers it (docs/roles.md)
            continue
        answer = plan(problem, runners_up=False)
        for p in [answer.best, *answer.frontier]:
            if p is not None:
                assert p.strategy.framework in FRAMEWORKS
                assert p.model_dump(mode="json")["strategy"]["framework"] == p.strategy.framework


def test_check_says_when_the_framework_cannot_run_a_layout():
    problem = job(global_batch=256)
    result = check(
        problem, CheckRequest("B200", 32, nodes=4, tp=8, pp=4, framework="deepspeed", compare=False), catalog=NODUS
    )
    assert not result.runnable and result.plan.strategy.framework == "deepspeed"
    assert any("PP with TP" in why for why in result.not_runnable_because)
    ok = check(
        problem, CheckRequest("B200", 32, nodes=4, tp=8, pp=4, framework="megatron", compare=False), catalog=NODUS
    )
    assert ok.runnable and ok.plan.strategy.framework == "megatron"


@pytest.mark.parametrize("policy", ["never", "only"])
def test_spot_policy(policy):
    catalog = load_catalog("default")
    spot_offers = [o for o in catalog.offers if o.spot_price_usd_per_gpu_hour]
    if not spot_offers:
        pytest.skip("no spot prices in the default catalog")
    problem = job(method="lora", tokens="2B")
    problem = problem.model_copy(
        update={"catalog": "default", "constraints": problem.constraints.model_copy(update={"spot": policy})}
    )
    answer = plan(problem, runners_up=False)
    assert all(p.spot == (policy == "only") for p in [answer.best, *answer.frontier] if p is not None)
    assert any(f"constraints.spot: {policy}" in n for n in answer.notes)


# --------------------------------------------------------------------------- the real optimum

CHECKED: list[int] = []
DENSE = ["llama-3.1-8b", "qwen3-8b", "mistral-7b", "qwen3-14b"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(DENSE),
    method=st.sampled_from(["full", "lora"]),
    tokens_b=st.integers(1, 20),
    batch=st.sampled_from([None, 64, 256]),
    deadline_h=st.sampled_from([None, 24, 96]),
    layouts=st.lists(
        st.tuples(
            st.sampled_from(["B200", "B300", "H200"]),
            st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
            st.sampled_from([None, 1, 2, 4, 8]),
            st.sampled_from([None, 1, 2, 4]),
            st.sampled_from([None, 0, 1, 2, 3]),
            st.sampled_from([None, 1, 2, 4, 8]),
            st.sampled_from([None, "none", "full"]),
            st.sampled_from([None, 1, 2]),  # virtual stages: a 1 %-faster interleaving once lost to simplicity
            # gradient accumulation, any count: with the batch free, solve searches every batch up to its cap
            st.sampled_from([None, None, 1, 3, 8, 40, 300]),
            # a named framework: auto's optimum must beat every framework's layouts too
            st.sampled_from([None, None, "megatron", "torchtitan"]),
        ),
        min_size=6,
        max_size=6,
    ),
)
def test_no_layout_check_accepts_beats_the_optimum(model, method, tokens_b, batch, deadline_h, layouts):
    # Exactness over the real layout space, not over the candidate table: every fully specified layout
    # that check accepts as fitting, runnable and within the constraints, under any framework, costs at
    # least the cost optimum (framework: auto) and takes at least the fastest plan's time.
    fields = {"model": model, "method": method, "tokens": f"{tokens_b}B"}
    if batch:
        fields["global_batch"] = batch
    problem = job(**fields)
    if deadline_h:
        problem = problem.model_copy(
            update={"constraints": problem.constraints.model_copy(update={"deadline_s": deadline_h * 3600.0})}
        )
    answer = plan(problem, runners_up=False, catalog=NODUS)
    fastest = answer.frontier[0] if answer.frontier else None
    for sku, gpus, tp, pp, zero, micro_batch, recompute, virtual_stages, grad_accum, framework in layouts:
        nodes = max(1, gpus // 8)
        try:
            result = check(
                problem,
                CheckRequest(
                    sku,
                    gpus,
                    nodes=nodes,
                    tp=tp,
                    pp=pp,
                    zero=zero,
                    micro_batch=micro_batch,
                    recompute=recompute,
                    virtual_stages=virtual_stages,
                    grad_accum=grad_accum,
                    framework=framework,
                    compare=False,
                ),
                catalog=NODUS,
            )
        except GpuplanError:
            continue
        p = result.plan
        if not (result.fits and result.runnable) or p.meets_deadline is False:
            continue
        CHECKED.append(1)
        assert fastest is not None, "check found a plan the solver says does not exist"
        assert p.hours.p50 >= fastest.hours.p50 - 1e-9
        assert answer.best is not None
        # the cheapest plan (a near-tie may have chosen a faster one within the cost tolerance of it)
        assert p.cost_usd.p50 >= (answer.passed_over or answer.best).cost_usd.p50 - 0.01


def test_the_property_test_compared_real_layouts():
    # Guard against a vacuous property test: enough sampled layouts passed check to be compared.
    test_no_layout_check_accepts_beats_the_optimum()
    assert len(CHECKED) >= 20


@pytest.mark.parametrize("sku", ["L40S", "RTX-PRO-6000", "H100-SXM"])
def test_capacity_and_check_agree_on_the_job(problems, sku):
    # Without a job, capacity counts training state only (QLoRA 70B "fits" a 48 GB L40S at 0.52 bytes per
    # parameter); given the job, it runs check's own memory model, so the two verdicts cannot differ.
    from optimizer import capacity, load_job

    problem = load_job(problems / "llama-70b-qlora.yaml")
    verdict = check(problem, CheckRequest(sku, 1, compare=False))
    answer = capacity(sku, 1, problem=problem)
    assert answer.includes_activations and answer.job_fits == verdict.fits
    assert (answer.max_params >= problem.job.model.params) == verdict.fits


def test_a_measured_peak_above_the_gpu_is_bad_input(problems):
    from optimizer import apply_overrides, load_job

    job = load_job(problems / "seed-rtx-pro-vs-b200.yaml")
    problem = apply_overrides(job, measured=["4xRTX-PRO-6000:14.8k,300GB"])
    with pytest.raises(GpuplanError, match="measured peak") as err:
        check(problem, CheckRequest("B200", 4, compare=False))
    # the error names the --measured flag it came from, with its text
    assert err.value.field == "measured" and "4xRTX-PRO-6000:14.8k,300GB" in str(err.value)
    # and the same entry in the job file, its field there
    in_file = job.job.measured[0].model_copy(update={"peak_memory_bytes": 300e9})
    from_file = job.model_copy(update={"job": job.job.model_copy(update={"measured": [in_file]})})
    with pytest.raises(GpuplanError, match="measured peak") as err:
        check(from_file, CheckRequest("B200", 4, compare=False))
    assert err.value.field == "job.measured[0].peak_memory"


def test_deepspeed_runs_experts_split_by_ep_only_up_to_zero_2():
    # DeepSpeed 0.19.8's engine refuses its native MoE layers under ZeRO-3 ("Use AutoEP or choose ZeRO stage
    # 1/2"), and the DeepSpeed export writes native layers: a DeepSeek-V3 fine-tune planned for DeepSpeed
    # takes ZeRO-1 or 2 with EP, and the rule names its source when a layout asks for ZeRO-3.
    problem = Problem.model_validate(
        expand_models(
            {
                "catalog": "nodus-2026-11",
                "job": {
                    "name": "ds",
                    "model": "deepseek-v3",
                    "tokens": "2B",
                    "global_batch": 512,
                    "framework": "deepspeed",
                },
                "constraints": {"deadline": "7d"},
            }
        )
    )
    chosen = plan(problem, runners_up=False).best
    assert chosen is not None and not (chosen.strategy.ep > 1 and chosen.strategy.zero_stage == 3)
    s = chosen.strategy.model_copy(update={"ep": 8, "zero_stage": 3})
    assert any("EP with ZeRO-2 at most" in r and "AutoEP" in r for r in why_not_runnable("deepspeed", s, 61))


def test_a_plan_is_costed_with_the_kernels_of_the_framework_it_names():
    # Under framework: auto a layout only Megatron runs (TP with CP) is labelled megatron, and Megatron-Core runs
    # Transformer Engine's fused norms and SwiGLU: the plan keeps their activations, as check does for a team
    # that names megatron. Gemma 2 at 128k with activation offload makes the difference large (its eager
    # sandwich norms keep 36h bytes per token, fused 8h; the offloaded bytes cross PCIe).
    problem = Problem.model_validate(
        expand_models(
            {
                "catalog": "nodus-2026-11",
                "objective": "time",
                "job": {
                    "name": "j",
                    "model": "gemma-2-9b",
                    "method": "lora",
                    "lora_rank": 256,
                    "tokens": "200M",
                    "seq_len": 131072,
                    "activation_offload": True,
                },
            }
        )
    )
    best = plan(problem, time_limit_s=5).best
    assert best is not None and best.strategy.framework == "megatron"
    s = best.strategy
    layout = dict(nodes=best.nodes, tp=s.tp, pp=s.pp, cp=s.cp, micro_batch=s.micro_batch, recompute=s.recompute_label)
    layout["zero"] = s.zero_stage
    fields = dict(model="gemma-2-9b", method="lora", lora_rank=256, tokens="200M", seq_len=131072)
    for framework in ("megatron", "auto"):
        named = job(**fields, activation_offload=True, framework=framework)
        checked = check(named, CheckRequest(best.sku, best.gpus, **layout, compare=False), catalog=NODUS).plan
        assert checked.memory_gib.activations == pytest.approx(best.memory_gib.activations)
        assert checked.step_s == pytest.approx(best.step_s)
    eager = job(**fields, activation_offload=True, kernels="eager")
    assert (
        check(eager, CheckRequest(best.sku, best.gpus, **layout, compare=False), catalog=NODUS).plan.step_s
        > 1.2 * best.step_s
    )


@pytest.mark.parametrize("framework", ["auto", "fsdp", "deepspeed", "torchtitan", "megatron"])
def test_qlora_is_planned_only_where_4bit_base_weights_train(framework):
    # QLoRA trains LoRA adapters over 4-bit NF4 base weights: torchtune's FSDP2 recipes, PEFT with FSDP or
    # DeepSpeed ZeRO-3 (bitsandbytes' FSDP-QLoRA) run it; Megatron-Bridge and torchtitan have LoRA only.
    result = plan(job(model="llama-3.1-70b", method="qlora", tokens="100M", framework=framework), time_limit_s=5)
    if framework in ("auto", "fsdp", "deepspeed"):
        assert result.best is not None and result.best.strategy.framework in ("fsdp", "deepspeed")
        assert all(p.strategy.framework in ("fsdp", "deepspeed") for p in result.frontier)
    else:
        assert result.best is None
        (why,) = result.infeasible
        assert why.constraint == "framework" and "no QLoRA" in why.detail and framework in why.detail


def test_a_lora_plan_on_megatron_is_not_exported_as_pretraining():
    # Megatron-LM's pretrain_gpt.py trains every weight: a LoRA plan's Megatron export is refused, naming
    # Megatron-Bridge's PEFT, rather than written as a full-training command.
    from optimizer.errors import ArgumentError
    from optimizer.present.exports import export

    best = plan(job(model="llama-3.1-8b", method="lora", tokens="100M", framework="megatron"), time_limit_s=5).best
    assert best is not None
    assert "pretrain_gpt.py" in export(best, "megatron", method="full")
    with pytest.raises(ArgumentError, match="Megatron-Bridge's PEFT"):
        export(best, "megatron", method="lora")


def test_a_pinned_zero_stage_shards_when_a_layout_with_data_parallelism_exists(problems):
    """--zero 3 on 8 B200 for the 70B job: TP 8 with one data-parallel rank also fits, where every stage is
    ZeRO-0; the stage asked for is kept on a layout that has ranks to shard over. Only where the fixed
    TP leaves one rank is that layout taken, and the answer says the stage is moot."""
    job = problems / "llama-70b-within-5-days.yaml"
    free = check(load_job(job), CheckRequest("B200", 8, zero=3, compare=False))
    assert free.fits and free.plan.strategy.zero_stage == 3 and free.plan.strategy.dp > 1
    pinned = check(load_job(job), CheckRequest("B200", 8, zero=3, tp=8, compare=False))
    assert pinned.plan.strategy.dp == 1 and any("runs as ZeRO-0" in n for n in pinned.notes)


@pytest.mark.parametrize(("zero", "runs"), [(0, False), (3, True)])
def test_torchtitan_draws_expert_parallelism_from_the_shard_group(zero, runs):
    """torchtitan 0.3.0 builds its expert mesh as dp_shard x CP x TP // EP: with DDP (ZeRO-0) on 8 GPUs there
    is no shard group for EP 8 to come from, so the job does not start."""
    s = {"tp": 1, "pp": 1, "dp": 8, "zero_stage": zero, "shard_degree": 8 if zero else 1, "ep": 8}
    rules = why_not_runnable("torchtitan", Strategy(**s, micro_batch=1, grad_accum=1), 48)
    assert (not any("draws EP from the FSDP shard group" in r for r in rules)) == runs


def test_a_configuration_the_framework_refuses_cites_every_rule_it_breaks(problems):
    """PP 2 with ZeRO-3 under DeepSpeed: the verdict cited only the first rule of the layout check chose
    (TP with ZeRO-2 at most), not the PP rule the user's own flags break."""
    from optimizer import load_job

    job = load_job(problems / "llama-70b-within-5-days.yaml")
    verdict = check(job, CheckRequest("B200", 16, pp=2, zero=3, framework="deepspeed", compare=False))
    assert not verdict.runnable
    assert any("PP with ZeRO-1 at most" in rule for rule in verdict.not_runnable_because), verdict.not_runnable_because


def test_check_fills_in_around_broken_flags_without_breaking_more_rules(problems):
    """PP 2 with ZeRO-3 under DeepSpeed breaks one rule whatever else is chosen; check still chose TP 2 by
    speed, a second rule (AutoTP with ZeRO-2 at most) that TP 1 avoids. It now picks among the layouts that
    break the fewest rules."""
    from optimizer import load_job

    job = load_job(problems / "llama-70b-within-5-days.yaml")
    verdict = check(job, CheckRequest("B200", 16, pp=2, zero=3, framework="deepspeed", compare=False))
    assert not verdict.runnable and verdict.plan.strategy.tp == 1
    assert len(verdict.not_runnable_because) == 1 and "PP with ZeRO-1 at most" in verdict.not_runnable_because[0]


def test_the_optimum_is_the_fastest_layout_not_a_simpler_one_near_it(problems):
    """Llama 3.1 8B LoRA on 4 spot L40S: PP 2 with 2 interleaved chunks per GPU is 0.9 % faster than without
    interleaving. The solver kept the simpler layout (a 1 % tie-break), and check then found the interleaved
    one $0.27 cheaper and faster than the 'optimal' plan, which its own frontier point was dominated by."""
    from optimizer import load_job

    problem = load_job(problems / "llama-8b-lora.yaml")
    constraints = problem.constraints.model_copy(update={"deadline_s": 10 * 3600.0, "spot": "only"})
    constraints = constraints.model_copy(update={"gpu": constraints.gpu.model_copy(update={"types": ["L40S"]})})
    problem = problem.model_copy(update={"constraints": constraints})
    best = plan(problem, runners_up=False).best
    interleaved = check(problem, CheckRequest("L40S", 4, spot=True, pp=2, zero=1, virtual_stages=2, compare=False)).plan
    assert best is not None and interleaved.fits
    assert best.cost_usd.p50 <= interleaved.cost_usd.p50 and best.hours.p50 <= interleaved.hours.p50


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_capacity_replicates_frozen_weights_below_zero_3(method):
    """LoRA's frozen base is sharded only by ZeRO-3 (FSDP FULL_SHARD); at ZeRO-0 to 2 every GPU holds all of
    it, so 8 GPUs hold no larger a model than one. capacity had used ZeRO-3 for LoRA whatever --zero said:
    8 B200 at ZeRO-0 'held' 720B LoRA parameters."""
    from optimizer import capacity

    one = capacity("B200", 1, zero=0, method=method).max_params
    for zero in (0, 1, 2):
        assert capacity("B200", 8, zero=zero, method=method).max_params == pytest.approx(one)
    assert capacity("B200", 8, zero=3, method=method).max_params == pytest.approx(8 * one)


def test_check_says_when_a_hand_picked_layout_lies_outside_what_solve_searches(problems):
    """Context parallelism at 4k tokens, which solve does not try (from 16k up), came out cheaper than solve's
    optimum with nothing said; check now says the layout lies outside the search, so the comparison is not a
    claim that the optimum beats it."""
    from optimizer import load_job

    job = load_job(problems / "llama-70b-within-5-days.yaml")
    assert job.job.seq_len < 16384
    outside = check(job, CheckRequest("B200", 32, nodes=4, tp=1, pp=4, cp=2, compare=False))
    assert outside.plan.strategy.cp == 2
    assert any("which solve does not search" in n and "context parallelism" in n for n in outside.notes)
    inside = check(job, CheckRequest("B200", 32, nodes=4, tp=1, pp=4, compare=False))
    assert not any("which solve does not search" in n for n in inside.notes)


# --------------------------------------------------------------------------- rules the frameworks check at start-up


def test_torchtitan_plain_1f1b_needs_a_micro_batch_per_stage():
    # torch.distributed.pipelining's Schedule1F1B raises with fewer micro-batches than stages, and torchtitan
    # only warns before building it: Llama 3.1 70B at a global batch of 8 on 32 H100s, TP 8 PP 4, micro-batch
    # 4 has 2 micro-batches for 4 stages. Megatron's 1F1B runs it (a longer bubble).
    small = job(model="llama-3.1-70b", global_batch=8, seq_len=4096)
    layout = {"tp": 8, "pp": 4, "micro_batch": 4, "virtual_stages": 1, "compare": False}
    refused = check(small, CheckRequest("H200", 32, framework="torchtitan", **layout), catalog=NODUS)
    assert not refused.runnable and "micro-batches per step" in refused.not_runnable_because[0]
    assert check(small, CheckRequest("H200", 32, framework="megatron", **layout), catalog=NODUS).runnable
    torchtitan_mb1 = CheckRequest("H200", 32, framework="torchtitan", **{**layout, "micro_batch": 1})
    assert check(small, torchtitan_mb1, catalog=NODUS).runnable


@pytest.mark.parametrize("seq_len", [2047, 18000])
def test_plans_split_the_sequence_as_each_framework_requires(seq_len):
    # Megatron's sequence parallelism (on with TP in its export) splits each CP rank's s / cp tokens over TP
    # (tensor_parallel/mappings.py asserts it); torchtitan checks s % (TP x 2 CP) with TP or CP on
    # (ParallelDims.seq_len_divisor). 2047 tokens allow no TP in either; 18000 allow TP 4 x CP 4 in neither.
    problem = job(model="llama-3.1-70b", seq_len=seq_len, global_batch=64, tokens="2B")
    for framework in ("megatron", "torchtitan"):
        s = plan(problem.model_copy(update={"job": problem.job.model_copy(update={"framework": framework})})).best
        assert s is not None
        tp, cp = s.strategy.tp, s.strategy.cp
        if framework == "megatron":
            assert tp == 1 or (seq_len % cp == 0 and (seq_len // cp) % tp == 0), (tp, cp)
        else:
            assert (tp == 1 and cp == 1) or seq_len % (tp * 2 * cp) == 0, (tp, cp)
    refused = check(problem, CheckRequest("H200", 8, tp=2, framework="megatron", compare=False), catalog=NODUS)
    assert (seq_len % 2 != 0) == (not refused.runnable)


def test_torchtitan_counts_the_sequence_divisor_gpuplan_uses():
    # the rule above, against torchtitan's own ParallelDims (0.3.0) at a sequence length it refuses and one it takes
    pytest.importorskip("torchtitan")
    from torchtitan.distributed.parallel_dims import ParallelDims

    dims = ParallelDims(dp_replicate=1, dp_shard=-1, cp=4, tp=4, pp=4, ep=1, world_size=64)
    assert dims.seq_len_divisor == 4 * 2 * 4 and 18000 % dims.seq_len_divisor != 0
    strategy = Strategy(tp=4, pp=4, dp=1, cp=4, zero_stage=3, micro_batch=1, grad_accum=64)
    assert any("sequence length" in rule for rule in why_not_runnable("torchtitan", strategy, 80, seq_len=18000))
    assert not any("sequence length" in rule for rule in why_not_runnable("torchtitan", strategy, 80, seq_len=16384))


@pytest.mark.parametrize("framework", ["fsdp", "deepspeed", "torchtitan"])
def test_nvfp4_trains_in_megatron_only(framework):
    """NVFP4 training is Transformer Engine's NVFP4BlockScaling recipe inside Megatron-Core's layers
    (--fp4-format e2m1); torchtitan, the HF Trainer and DeepSpeed have no such recipe, and their exports wrote
    bf16. An NVFP4 job planned with one of them was timed at the FP4 peak: 66 h for 8 B300 where their bf16
    run takes 291 h. Now none of their layouts runs it, and under auto the plan is Megatron's."""
    fp4 = job(precision="nvfp4", seq_len=4096, global_batch=64)
    named = plan(fp4.model_copy(update={"job": fp4.job.model_copy(update={"framework": framework})}), runners_up=False)
    assert named.status == "infeasible" and named.infeasible[0].constraint == "framework"
    assert "does not train in nvfp4" in named.infeasible[0].detail
    assert plan(fp4, runners_up=False).best.strategy.framework == "megatron"
    s = Strategy(tp=1, pp=1, dp=8, zero_stage=1, shard_degree=8, micro_batch=1, grad_accum=8, recompute="none")
    assert any("nvfp4" in r for r in why_not_runnable(framework, s, 32, precision="nvfp4"))
    assert not why_not_runnable("megatron", s, 32, precision="nvfp4")


def test_deepspeed_autotp_keeps_the_norms_whole_on_every_tp_rank():
    # AutoTP shards the Linear layers only; Megatron and torchtitan split the norms and the residual stream
    # along the sequence too (sequence parallelism). Korthikanti et al. 2022, eq. 2 against eq. 4: without it
    # the tensors of hidden width are not divided by t. Llama 3.1 8B at 4,096 tokens, micro-batch 1, TP 2 on
    # 2 GPUs (one data-parallel rank, so ZeRO plays no part), eager kernels in both: the norms keep 16h bytes a
    # token (measured, physics/memory.py), so deepspeed keeps (1 - 1/2) x 16h x s x L more.
    problem = job(global_batch=8, kernels="eager")
    layout = {"tp": 2, "pp": 1, "micro_batch": 1, "recompute": "none", "compare": False}
    autotp = check(problem, CheckRequest("B200", 2, framework="deepspeed", **layout), catalog=NODUS).plan
    split = check(problem, CheckRequest("B200", 2, framework="torchtitan", **layout), catalog=NODUS).plan
    h, s, layers = 4096, 4096, 32
    expected_gib = 0.5 * 16 * h * s * layers / 2**30
    assert autotp.memory_gib.activations - split.memory_gib.activations == pytest.approx(expected_gib, rel=1e-6)
    under_full = {**layout, "recompute": "full"}
    autotp_full = check(problem, CheckRequest("B200", 2, framework="deepspeed", **under_full), catalog=NODUS).plan
    split_full = check(problem, CheckRequest("B200", 2, framework="torchtitan", **under_full), catalog=NODUS).plan
    # full recompute keeps each layer's 2h input, whole without sequence parallelism, plus one layer's norms
    expected_full_gib = 0.5 * (2 * h * s * layers + 16 * h * s) / 2**30
    assert autotp_full.memory_gib.activations - split_full.memory_gib.activations == pytest.approx(
        expected_full_gib, rel=1e-6
    )


def test_interleaving_splits_the_layers_as_the_frameworks_do():
    """Llama 3.1 405B's 126 layers over PP 16 x 8 chunks run (Megatron-Bridge's GB200 NVFP4 recipe: the
    embedding and the loss hold a chunk each; torchtitan: 1 layer per stage, both counted); over PP 8 x 5 in
    Megatron's explicit layout only (no torchtitan layers_per_stage makes 40 stages of 126 or 128); DeepSeek-V3's 61
    over PP 4 x 8 in both (torchtitan: 2 per stage, NeMo AutoModel's published layout); 130 chunks in neither."""
    from optimizer.planning.layout_grid import _virtual_stages
    from optimizer.present.exports.megatron import pipeline_layout
    from optimizer.present.exports.torchtitan import layers_per_stage

    def rules(framework, layers, pp, v):
        s = Strategy(tp=1, pp=pp, dp=1, virtual_stages=v, micro_batch=1, grad_accum=pp * 4, recompute="full")
        return [r for r in why_not_runnable(framework, s, layers) if "interleav" in r]

    assert rules("megatron", 126, 16, 8) == rules("torchtitan", 126, 16, 8) == []
    assert rules("megatron", 126, 8, 5) == [] and rules("torchtitan", 126, 8, 5) != []
    assert rules("megatron", 61, 4, 8) == rules("torchtitan", 61, 4, 8) == []
    assert layers_per_stage(61, 32) == {
        "pipeline_parallel_layers_per_stage": 2,
        "pipeline_parallel_first_stage_less_layers": 1,
        "pipeline_parallel_last_stage_less_layers": 1,
    }
    layout = pipeline_layout(126, 16, 8).split("|")
    assert layout[0] == "E" and layout[-1] == "L" and layout[1:-1] == ["t"] * 126
    assert 8 in _virtual_stages(16, 64, 126, 8) and 8 not in _virtual_stages(16, 64, 125, 8)


@pytest.mark.parametrize(
    ("framework", "exchange", "runs"),
    [
        ("deepspeed", "all_to_all", True),  # DeepSpeed-Ulysses' DistributedAttention, UlyssesSPAttentionHF
        ("deepspeed", "all_to_all_repeat_kv", True),  # XTuner's sequence parallel on DeepSpeed
        ("deepspeed", "ring", False),  # no ring attention
        ("megatron", "all_to_all", True),  # --cp-comm-type a2a
        ("megatron", "all_to_all_repeat_kv", False),
        ("megatron", "ring", True),  # --cp-comm-type p2p
        ("torchtitan", "all_to_all", False),  # ring attention only
        ("fsdp", "all_to_all", False),
    ],
)
def test_each_framework_runs_the_context_parallel_exchanges_it_has(framework, exchange, runs):
    s = Strategy(tp=1, pp=1, dp=1, cp=8, zero_stage=3 if framework != "megatron" else 1, micro_batch=1, grad_accum=8)
    rules = why_not_runnable(framework, s, 32, seq_len=131072, context_parallel=exchange)
    cp_rules = [r for r in rules if "context parallelism" in r or "Ulysses" in r]
    assert (not cp_rules) == runs, rules


def test_deepspeeds_ulysses_runs_without_tensor_parallelism():
    # its sequence-parallel ranks are data-parallel ranks beside ZeRO (accelerate's ALST integration); Megatron-Core's
    # a2a CP combines with TP
    s = Strategy(tp=2, pp=1, dp=1, cp=4, zero_stage=2, micro_batch=1, grad_accum=8)
    rules = why_not_runnable("deepspeed", s, 32, seq_len=131072, context_parallel="all_to_all")
    assert any("without tensor parallelism" in r for r in rules), rules
    megatron = Strategy(tp=2, pp=1, dp=1, cp=4, zero_stage=1, micro_batch=1, grad_accum=8)
    rules = why_not_runnable("megatron", megatron, 32, seq_len=131072, context_parallel="all_to_all")
    assert not [r for r in rules if "Ulysses" in r], rules
