"""The attention kernels' own efficiency (issue 48, physics/attention.py): PyTorch SDPA's FlashAttention-2 and
Transformer Engine's cuDNN attention, by GPU family and sequence length, from their published figures."""

from __future__ import annotations

import math

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.attention import attention_efficiency


def test_cudnn_on_hopper_is_the_published_forward_and_backward_rates_weighted_by_their_flops():
    # cudnn-frontend's H200 CSV, causal BF16 at 8,192 tokens: forward 644 TFLOP/s (65 %), backward 541 (55 %);
    # a training step spends a third of its attention FLOPs forward
    assert attention_efficiency("cudnn", "hopper", 8192) == pytest.approx(1 / (1 / 3 / 0.65 + 2 / 3 / 0.55))
    # GB200 at 32,768: 1622 (65 %) and 1226 (49 %)
    assert attention_efficiency("cudnn", "blackwell", 32768) == pytest.approx(1 / (1 / 3 / 0.65 + 2 / 3 / 0.49))


def test_short_sequences_attend_less_efficiently_and_the_table_is_held_flat_past_its_ends():
    rates = [attention_efficiency("cudnn", "hopper", s) for s in (1024, 2048, 3000, 4096, 8192, 65536)]
    assert rates[0] == rates[1] < rates[2] < rates[3] < rates[4] <= rates[5]
    assert rates[5] == attention_efficiency("cudnn", "hopper", 32768)


def test_flash_attention_2_is_its_papers_figures_and_transformer_engine_on_ampere_runs_it():
    # FA3 paper: "FlashAttention-2 achieving only 35% utilization on the H100"; FA2 paper: "50-73%" on an A100
    assert attention_efficiency("flash2", "hopper", 4096) == 0.35
    assert attention_efficiency("flash2", "ampere", 4096) == pytest.approx(math.sqrt(0.50 * 0.73))
    assert attention_efficiency("cudnn", "ampere", 4096) == attention_efficiency("flash2", "ampere", 4096)
    # no published figure: the matmul efficiency applies (None)
    assert attention_efficiency("flash2", "cdna", 4096) is None
    assert attention_efficiency("flash2", "blackwell", 4096) is None
    with pytest.raises(ValueError):
        attention_efficiency("xformers", "hopper", 4096)


JOB = {"model": "llama-3.1-8b", "tokens": "2B", "seq_len": 32768, "global_batch": 16, "framework": "fsdp"}
LAYOUT = CheckRequest("H100-SXM", 8, tp=1, pp=1, zero=3, micro_batch=1, recompute="full", framework="fsdp")


def _plan(assumptions: dict | None = None, **job):
    data = {"catalog": "default", "job": {**JOB, **job}, "assumptions": assumptions or {}}
    return check(Problem.model_validate(expand_models(data)), LAYOUT).plan


def test_cudnn_attention_speeds_a_long_context_fsdp_run_by_at_most_its_kernels_ratio():
    flash, cudnn = _plan(), _plan(attention="cudnn")
    ratio = attention_efficiency("cudnn", "hopper", 32768) / attention_efficiency("flash2", "hopper", 32768)
    # at 32k tokens attention is most of an 8B model's FLOPs: most of the kernels' ratio shows in the step
    assert 1.3 < cudnn.tokens_per_s / flash.tokens_per_s < ratio


def test_a_stated_mfu_is_the_whole_steps_and_a_stated_matmul_efficiency_leaves_attention_its_own():
    stated = _plan({"mfu": 0.4})
    assert _plan({"mfu": 0.4}, attention="cudnn").tokens_per_s == pytest.approx(stated.tokens_per_s)
    matmul = _plan({"matmul_efficiency": 0.4})
    assert _plan({"matmul_efficiency": 0.4}, attention="cudnn").tokens_per_s > matmul.tokens_per_s * 1.3


def test_selective_recompute_and_context_parallelism_treat_cudnn_as_fused_attention():
    # cuDNN's attention never stores the s x s scores either (Megatron-Core's context parallelism runs on it)
    job = {**JOB, "attention": "cudnn"}
    data = {"catalog": "default", "job": job}
    result = check(
        Problem.model_validate(expand_models(data)),
        CheckRequest("H100-SXM", 8, tp=1, pp=1, cp=2, zero=3, micro_batch=1, recompute="selective", framework="fsdp"),
    )
    assert result.plan.strategy.cp == 2
    assert any("changes nothing under fused attention" in note for note in result.notes)


def test_sdpas_memory_efficient_kernel_under_a_mask_tensor_is_a_quarter_of_flashattention_2():
    # FA2 paper 4.1: FA2 "around 2x faster than ... FlashAttention in xformers (the 'cutlass' implementation)",
    # SDPA's memory-efficient kernel; under a mask tensor it computes every block, twice a causal kernel's
    for family in ("ampere", "hopper"):
        flash2 = attention_efficiency("flash2", family, 8192)
        assert attention_efficiency("efficient", family, 8192) == pytest.approx(flash2 / 4)
    assert attention_efficiency("efficient", "cdna", 8192) is None


def test_a_padded_batch_through_sdpa_attends_slower_on_every_gpu_including_one_without_a_published_figure():
    # transformers hands SDPA a 4-D mask for a padded batch: at 32k tokens attention is most of the step
    flash, efficient = _plan(), _plan(attention="efficient")
    assert 1.5 < flash.tokens_per_s / efficient.tokens_per_s < 4
    # RTX PRO 6000 (Blackwell, PCIe) has no published attention figure: the matmul rate, slowed by the same 4x
    data = {"catalog": "default", "job": {**JOB, "seq_len": 8192, "global_batch": 8}}
    layout = CheckRequest("RTX-PRO-6000", 1, tp=1, pp=1, zero=0, micro_batch=1, recompute="full", framework="fsdp")
    plain = check(Problem.model_validate(expand_models(data)), layout).plan
    data["job"]["attention"] = "efficient"
    masked = check(Problem.model_validate(expand_models(data)), layout).plan
    assert masked.tokens_per_s < plain.tokens_per_s


def test_the_answer_names_the_attention_kernel_it_assumed_and_how_to_state_a_padded_batch():
    data = {"catalog": "default", "job": JOB}
    notes = check(Problem.model_validate(expand_models(data)), LAYOUT).notes
    kernel = next(note for note in notes if note.startswith("kernels:"))
    assert "FlashAttention-2 (SDPA)" in kernel and "efficient for padded batches" in kernel
    data = {"catalog": "default", "job": {**JOB, "attention": "efficient"}}
    notes = check(Problem.model_validate(expand_models(data)), LAYOUT).notes
    kernel = next(note for note in notes if note.startswith("kernels:"))
    assert "memory-efficient attention under a mask tensor" in kernel and "padded batches" not in kernel


def test_flashattention_3_is_its_papers_speedup_over_flashattention_2_on_hopper_only():
    # FA3 paper, abstract: "speedup on H100 GPUs by 1.5-2.0x" over FlashAttention-2's 35 %
    assert attention_efficiency("flash3", "hopper", 8192) == pytest.approx(0.35 * math.sqrt(1.5 * 2.0))
    # no Hopper instructions elsewhere: FlashAttention-2's figure
    assert attention_efficiency("flash3", "ampere", 8192) == attention_efficiency("flash2", "ampere", 8192)
    assert _plan(attention="flash3").tokens_per_s > _plan().tokens_per_s
