"""Distillation as a role job (issue 52, docs/roles.md): a frozen teacher's forward pass on some of a node's GPUs
hands its top-k logits to the others, which train the student (the job's model) on every teacher token.

Hand computations of the rate that binds (problems/distill-qwen3-32b-to-8b.yaml: Qwen3-32B teaching Qwen3-8B),
the bytes that cross, the names a distill job's roles take, and that the drafter workload and single-role jobs
are planned as before."""

from __future__ import annotations

import pytest
from paths import ROOT
from role_edits import load_with_roles

from optimizer import load_catalog, load_job
from optimizer.errors import ArgumentError, GpuplanError
from optimizer.inputs.catalog import find_sku
from optimizer.inputs.roles import DEFAULT_TOP_K, RolesSpec, parse_role_flag
from optimizer.physics.constants import DEFAULT_COMPUTE_EFFICIENCY, FALLBACK_COMPUTE_EFFICIENCY
from optimizer.planning.role_jobs import offer_hardware, role_job
from optimizer.planning.roles import (
    DEFAULT_LINK_EFFICIENCY,
    DoesNotFit,
    RoleSplit,
    all_splits,
    best_split,
    calibrated_producer,
    consumer_layout,
    evaluate_split,
    producer_tokens_per_s_per_gpu,
)
from optimizer.solver.roles import check_roles, solve_roles

JOB = ROOT / "problems" / "distill-qwen3-32b-to-8b.yaml"

# Qwen3-32B (Qwen/Qwen3-32B config.json, catalogs/models.yaml): 32.8B parameters, 64 layers of softmax
# attention, 64 heads x 128; the job's 4,096-token sequences, a causal query seeing half of them.
TEACHER_PARAMS, TEACHER_LAYERS, TEACHER_WIDTH, SEQ = 32.8e9, 64, 64 * 128, 4096
# Gemma 3's distillation keeps 256 logits a token (arXiv:2503.19786, section 2.2): bf16 values, int64 indices
# (torch.topk's index dtype).
TOP_K, VALUE_BYTES, INDEX_BYTES = 256, 2, 8
# One direction of a PCIe 5.0 x16 slot: 32 GT/s x 16 lanes x 128/130 / 8 bits (PCI-SIG).
PCIE5_X16 = 32e9 * 16 * 128 / 130 / 8


@pytest.fixture(scope="module")
def problem():
    return load_job(JOB)


@pytest.fixture(scope="module")
def catalog(problem):
    return load_catalog((JOB.parent / problem.catalog).resolve())


def _offer(catalog, name):
    return next(o for o in catalog.offers if o.name == name)


def _efficiency(catalog, sku):
    s = find_sku(catalog, sku)
    return s.default_mfu or DEFAULT_COMPUTE_EFFICIENCY.get(s.form_factor, FALLBACK_COMPUTE_EFFICIENCY)


def test_top_k_logits_cross_as_k_values_and_k_indices(problem):
    assert DEFAULT_TOP_K == TOP_K
    assert problem.job.roles.bytes_per_token == TOP_K * (VALUE_BYTES + INDEX_BYTES) == 2560
    spec = RolesSpec.model_validate(
        {"workload": "distill", "teacher": {"params": "8B", "hidden": 4096}, "passes": {"top_k_logits": {"k": 64}}}
    )
    assert spec.bytes_per_token == 64 * 10 and spec.target.name == "teacher" and spec.drafter.name == "student"


def test_teacher_rate_by_hand_binds_four_plus_four_b200(problem, catalog):
    # the teacher's forward FLOPs a token: 2 N + 4 L w s (s = 2,048 keys a query on average)
    flops = 2 * TEACHER_PARAMS + 4 * TEACHER_LAYERS * TEACHER_WIDTH * SEQ / 2
    sku = find_sku(catalog, "B200")
    peak, hbm = sku.dense_bf16_tflops * 1e12, sku.hbm_bandwidth_gb_per_s * 1e9
    # no measured MFU: the GPU's training efficiency; a 4,096-token batch reads the 65.6 GB of weights once
    compute_s = SEQ * flops / (peak * _efficiency(catalog, "B200"))
    memory_s = 2 * TEACHER_PARAMS / hbm
    assert compute_s > memory_s  # compute-bound
    per_gpu = SEQ / compute_s
    job = role_job(problem, catalog)
    hw = offer_hardware(catalog, _offer(catalog, "b200-3.4x"))
    assert producer_tokens_per_s_per_gpu(job.producer, hw, job.batch_tokens) == pytest.approx(per_gpu, rel=1e-9)
    plan = evaluate_split(job, hw, RoleSplit(4, 4))
    assert plan.binding == "producers" and plan.link == "peer"
    assert plan.tokens_per_s == pytest.approx(4 * per_gpu, rel=1e-9)
    # the student on 4 B200 keeps up (its 6 N of Qwen3-8B against the teacher's 2 N of 32.8B), at > 90 % busy
    assert 0.9 < plan.rate.utilisation("consumers") < 1.0
    # two billion teacher tokens at that rate
    assert plan.hours == pytest.approx(2e9 / (4 * per_gpu) / 3600, rel=1e-9)


def test_link_carries_top_k_logits_by_hand(problem, catalog):
    # a host bounce on the PCIe RTX PRO 6000: one slot's direction x 0.8 over 2,560 bytes a token, per GPU pair
    job = role_job(problem, catalog)
    hw = offer_hardware(catalog, _offer(catalog, "rtx-pro-6000-8x"))
    plan = evaluate_split(job, hw, RoleSplit(3, 2))
    assert plan.link == "host"
    assert plan.rate.link_tokens_per_s == pytest.approx(2 * PCIE5_X16 * DEFAULT_LINK_EFFICIENCY / 2560, rel=1e-9)
    # ~39M tokens/s: logits never bind a distillation pipeline at thousands of tokens/s
    assert plan.rate.link_tokens_per_s > 1000 * plan.tokens_per_s


def test_the_student_trains_every_teacher_token(problem, catalog):
    job = role_job(problem, catalog)
    assert job.consumer.trained_tokens_per_target_token == 1.0
    assert job.consumer.context_flops_per_target_token == 0.0
    assert job.consumer.shape.params == pytest.approx(8.19e9) == job.consumer.train.trainable_params


def _fitting(job, hw, split):
    try:
        return evaluate_split(job, hw, split).tokens_per_s
    except DoesNotFit:
        return None


def test_bisection_equals_every_split_the_student_fits(problem, catalog):
    job = role_job(problem, catalog)
    for offer in catalog.offers:
        hw = offer_hardware(catalog, offer)
        for gpus in range(2, offer.gpus_per_node + 1):
            rates = [r for s in all_splits(gpus) if (r := _fitting(job, hw, s)) is not None]
            if not rates:
                with pytest.raises(DoesNotFit):
                    best_split(job, hw, gpus)
                continue
            assert best_split(job, hw, gpus).tokens_per_s == pytest.approx(max(rates), rel=1e-12)


def test_a_student_that_does_not_fit_its_gpus_is_refused_with_what_it_needs(problem, catalog):
    # Qwen3-8B's full fine-tune (16 bytes a parameter: 131 GB of state) cannot train on one RTX PRO 6000 (97,887 MiB = 102.6 GB as nvidia-smi reports it)
    # even recomputing every layer; on two under ZeRO-3 it does, so solve never proposes the 1-GPU student
    job = role_job(problem, catalog)
    offer = next(o for o in catalog.offers if o.name == "rtx-pro-6000-8x")
    hw = offer_hardware(catalog, offer)
    with pytest.raises(DoesNotFit, match=r"training qwen3-8b does not fit 1 x RTX-PRO-6000: .* against 102.6 GB"):
        evaluate_split(job, hw, RoleSplit(1, 1))
    assert consumer_layout(job, hw, 2).zero == 3
    result = solve_roles(problem, catalog=catalog)
    assert all(p.plan.split.consumers >= 2 for p in result.plans if p.plan.sku == "RTX-PRO-6000")


def test_solve_splits_the_node_half_and_half(problem, catalog):
    # the teacher's forward (2 x 32.8B FLOPs a token) and the student's training (6 x 8.19B) cost about the same
    result = solve_roles(problem, catalog=catalog)
    assert result.best is not None and result.best.offer == "b200-3.4x"
    assert result.best.plan.split == RoleSplit(4, 4) and result.roles == ("qwen3-32b", "student")
    eight = next(p.plan for p in result.plans if p.offer == "rtx-pro-6000-8x" and p.plan.split.gpus == 8)
    assert eight.split == RoleSplit(4, 4) and eight.link == "host"


def test_check_takes_teacher_and_student(problem, catalog):
    split = [parse_role_flag("teacher=6xB200", "distill"), parse_role_flag("student=2xB200", "distill")]
    assert split == [("target", 6, "B200"), ("drafter", 2, "B200")]
    result = check_roles(problem, split, catalog=catalog)
    assert result.checked and result.best.plan.split == RoleSplit(6, 2) and result.best.plan.binding == "consumers"
    assert result.optimum.plan.tokens_per_s > result.best.plan.tokens_per_s
    # a drafter job's names stay its own: teacher is no role there, and target none in a distill job
    with pytest.raises(ArgumentError, match="no role 'teacher' in a drafter job"):
        parse_role_flag("teacher=3xB200")
    with pytest.raises(ArgumentError, match="no role 'target' in a distill job; its roles are teacher and student"):
        parse_role_flag("target=3xB200", "distill")


def test_calibration_sets_the_teachers_mfu(problem, catalog):
    job = role_job(problem, catalog)
    hw = offer_hardware(catalog, _offer(catalog, "b200-3.4x"))
    calibrated = calibrated_producer(job, hw, RoleSplit(4, 4), 50_000.0)
    assert evaluate_split(calibrated, hw, RoleSplit(4, 4)).tokens_per_s == pytest.approx(50_000.0, rel=1e-9)
    assert not calibrated.producer.mfu_is_training_efficiency


@pytest.mark.parametrize(
    "roles, expect",
    [
        (
            {"workload": "distill", "target": {"params": "8B", "hidden": 4096}, "passes": {"top_k_logits": {}}},
            "teacher: and student:, not target:",
        ),  # fmt: skip
        ({"workload": "distill", "passes": {"top_k_logits": {}}}, "needs teacher:"),
        (
            {
                "workload": "distill",
                "teacher": {"params": "8B", "hidden": 4096},
                "student": {"anchors": 512},
                "passes": {"top_k_logits": {}},
            },
            "anchors",
        ),  # fmt: skip
        (
            {
                "workload": "distill",
                "teacher": {"params": "8B", "hidden": 4096},
                "passes": {"top_k_logits": {}, "bytes_per_token": 10},
            },
            "one of them",
        ),  # fmt: skip
        (
            {
                "workload": "distill",
                "teacher": {"params": "8B", "hidden": 4096},
                "passes": {"top_k_logits": {}},
                "placement": "colocated",
            },
            "only a grpo job's",
        ),  # fmt: skip
    ],
)
def test_bad_distill_roles_name_the_field(tmp_path, roles, expect):
    with pytest.raises(GpuplanError) as info:
        load_with_roles(JOB, roles, tmp_path)
    assert "job.roles" in str(info.value) and expect in str(info.value)


def test_drafter_and_single_role_jobs_unchanged():
    drafter = load_job(ROOT / "problems" / "seed-003-drafter-roles.yaml")
    assert drafter.job.roles.workload == "drafter" and drafter.job.roles.target.mfu.value == 0.27
    single = load_job(ROOT / "problems" / "seed-14b-full-finetune.yaml")
    assert single.job.roles is None
