"""Fine-tune memory options people use: paged 8-bit optimizers, 16-bit embeddings under QLoRA, chunked and
fused cross-entropy, LoRA on attention only. Each changes the memory the way its source says."""

from __future__ import annotations

import pytest

from optimizer import CheckRequest, check, plan
from optimizer.errors import ArgumentError, GpuplanError
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Constraints, GpuFilter, Problem
from optimizer.physics.shapes import lora_adapter_params
from optimizer.planning.model_state import model_shape, training_state
from optimizer.present.exports import export

LLAMA_65B = {"params": "65.2B", "layers": 80, "hidden": 8192, "heads": 64, "ffn_hidden": 22016, "vocab": 32000}


def problem(**job) -> Problem:
    base = {"model": "llama-3.1-8b", "tokens": "10M", "seq_len": 2048, "global_batch": 16}
    return Problem.model_validate(expand_models({"catalog": "default", "job": {**base, **job}}))


def test_qlora_65b_fits_one_48gb_gpu_with_a_paged_optimizer():
    # Dettmers et al. 2023 (QLoRA), abstract: a 65B model finetuned on a single 48 GB GPU, with NF4 weights,
    # double quantisation and paged optimizers. With the Adam state resident it does not fit.
    paged = problem(model=LLAMA_65B, method="qlora", lora_rank=64, seq_len=512, optimizer="paged_adamw8bit")
    resident = problem(model=LLAMA_65B, method="qlora", lora_rank=64, seq_len=512, optimizer="adamw")
    fits = check(paged, CheckRequest("L40S", 1, micro_batch=1, recompute="full", compare=False))
    assert fits.fits and fits.plan.memory_gib.optimizer == 0.0
    assert not check(resident, CheckRequest("L40S", 1, micro_batch=1, recompute="full", compare=False)).fits


def test_qlora_keeps_embeddings_and_lm_head_in_16_bits():
    # bitsandbytes quantises nn.Linear layers; the embedding and the (untied) LM head stay bf16.
    p = problem(method="qlora")
    shape = model_shape(p.job.model)
    train = training_state(p.job, shape)
    embeddings = 2 * 128256 * 4096
    expected = (shape.params - embeddings) * (4.127 / 8) + embeddings * 2 + train.trainable_params * 2
    assert train.weights_total(shape.params) == pytest.approx(expected)


@pytest.mark.parametrize(("loss", "bytes_per_vocab"), [("standard", 12), ("chunked", 2), ("fused", 0), ("bf16", 6)])
def test_cross_entropy_memory_by_loss(loss, bytes_per_vocab):
    # One GPU, no pipeline: activations = layers + logits; the loss only changes the logits term.
    def activations(name):
        p = problem(method="lora", loss=name)
        return check(
            p, CheckRequest("H100", 1, micro_batch=1, recompute="none", compare=False)
        ).plan.memory_gib.activations

    logits_gib = 2048 * 128256 / 2**30
    # the fused loss keeps no logits: one backward's gradients in flight (2h + 4f a token, physics/memory_terms.py
    # backward_gradient_bytes_per_token) show in their place; under any other loss's larger tensors they do not
    grads_gib = 0.0 if loss == "fused" else 2048 * (2 * 4096 + 4 * 14336) / 2**30
    assert activations(loss) == pytest.approx(activations("fused") - grads_gib + bytes_per_vocab * logits_gib)


def test_lora_on_attention_only_counts_q_k_v_o():
    # Llama 3.1 8B, r = 16 on q, k, v, o: 32 layers x 16 x ((h + q) + 2 (h + kv) + (q + h)) = 13,631,488
    shape = model_shape(problem().job.model)
    assert lora_adapter_params(shape, 16, "attention") == 32 * 16 * (8192 + 2 * (4096 + 1024) + 8192)
    assert lora_adapter_params(shape, 16, "attention") < lora_adapter_params(shape, 16)


def test_activation_offload_keeps_two_layers_on_the_gpu():
    # Llama 3.1 8B LoRA, one H100, micro-batch 1 x 2048, no recompute: 32 layers x 200,704 bytes per token
    # without offload; with torchtune's activation offload 2 of them (the layer in backward and the one in
    # transfer) plus the logits, which stay.
    def acts(offload):
        p = problem(method="lora", loss="chunked", activation_offload=offload)
        return check(
            p, CheckRequest("H100", 1, micro_batch=1, recompute="none", compare=False)
        ).plan.memory_gib.activations

    per_layer_gib = 2048 * 200704 / 2**30
    logits_gib = 2 * 2048 * 128256 / 2**30
    assert acts(False) == pytest.approx(32 * per_layer_gib + logits_gib, rel=1e-3)
    assert acts(True) == pytest.approx(2 * per_layer_gib + logits_gib, rel=1e-3)


def test_activation_offload_costs_pcie_time_only_beyond_compute():
    # Offloaded tensors cross PCIe (25 GB/s per GPU) out and back on a side stream. With full recompute only
    # the 30 offloaded layer inputs move (0.5 GB, well under the compute time): free. Without recompute all
    # 30 layers' saved tensors move (12 GB, about 1 s against about 0.25 s of compute): slower.
    def tokens_per_s(offload, recompute):
        p = problem(method="lora", loss="chunked", activation_offload=offload)
        return check(p, CheckRequest("H100", 1, micro_batch=1, recompute=recompute, compare=False)).plan.tokens_per_s

    assert tokens_per_s(True, "full") == pytest.approx(tokens_per_s(False, "full"))
    assert tokens_per_s(True, "none") < 0.5 * tokens_per_s(False, "none")


def test_optimizer_in_backward_refuses_gradient_accumulation():
    # 16 sequences per step on one GPU at micro-batch 1 is 16 micro-batches: torchtune raises
    # "Gradient accumulation is not supported with optimizer_in_bwd".
    p = problem(method="full", optimizer="paged_adamw8bit", optimizer_in_backward=True)
    with pytest.raises(GpuplanError, match="optimizer_in_backward"):
        check(p, CheckRequest("H100", 1, micro_batch=1, compare=False))
    fits = check(
        problem(method="full", optimizer="paged_adamw8bit", optimizer_in_backward=True, global_batch=1),
        CheckRequest("H100", 1, compare=False),
    )
    assert fits.plan.strategy.optimizer_in_backward and fits.plan.strategy.grad_accum == 1
    assert fits.plan.memory_gib.gradients == pytest.approx(128256 * 4096 * 2 / 2**30)


def test_memory_options_follow_each_frameworks_rules():
    # Megatron's distributed optimizer steps after the reduce-scatter (no optimizer in backward); its activation
    # offload (cpu_offloading) refuses recompute; torchtitan has no activation offload; torchtune (FSDP) has both.
    # torchtune steps the optimizer in backward in its full fine-tune recipes only (its LoRA recipes have no
    # optimizer_in_bwd).
    job = {"method": "full", "global_batch": 1, "optimizer_in_backward": True}
    assert check(problem(**job), CheckRequest("H100", 1, framework="fsdp", compare=False)).runnable
    refused = check(problem(**job), CheckRequest("H100", 1, framework="megatron", compare=False))
    assert not refused.runnable and "optimizer step in backward" in refused.not_runnable_because[0]
    lora = check(problem(**{**job, "method": "lora"}), CheckRequest("H100", 1, framework="fsdp", compare=False))
    assert not lora.runnable and "in full fine-tunes only" in lora.not_runnable_because[0]
    offload = {"method": "lora", "activation_offload": True}
    assert check(
        problem(**offload), CheckRequest("H100", 1, recompute="none", framework="megatron", compare=False)
    ).runnable
    assert not check(
        problem(**offload), CheckRequest("H100", 1, recompute="full", framework="megatron", compare=False)
    ).runnable
    assert not check(problem(**offload), CheckRequest("H100", 1, framework="torchtitan", compare=False)).runnable


def test_each_framework_runs_the_optimizers_its_configuration_offers():
    # Megatron-LM's --optimizer offers adam (AdamW) and sgd, torchtitan's build_optimizers Adam and AdamW, and
    # neither a bitsandbytes optimizer; the Hugging Face Trainer (FSDP, DeepSpeed) runs them all. ZeRO-Offload
    # steps DeepSpeedCPUAdam whatever optimizer was asked for, and torchtune's FSDP2 distributed recipes step
    # the optimizer in backward with bitsandbytes optimizers on one GPU only.
    paged = problem(method="full", optimizer="paged_adamw8bit")
    for framework, runs in (("fsdp", True), ("deepspeed", True), ("torchtitan", False), ("megatron", False)):
        checked = check(paged, CheckRequest("H100", 8, framework=framework, compare=False))
        assert checked.runnable == runs, framework
    refused = check(paged, CheckRequest("H100", 8, framework="megatron", compare=False))
    assert "adamw/sgd optimizers only" in refused.not_runnable_because[0]
    assert check(
        problem(method="full", optimizer="sgd"), CheckRequest("H100", 8, framework="megatron", compare=False)
    ).runnable
    assert not check(
        problem(optimizer="adafactor"), CheckRequest("H100", 8, framework="torchtitan", compare=False)
    ).runnable
    offloaded = problem(method="full", optimizer="adamw8bit", offload="optimizer")
    refused = check(offloaded, CheckRequest("H100", 8, framework="deepspeed", compare=False))
    assert not refused.runnable and "offloads the adamw optimizer only" in refused.not_runnable_because[0]
    in_backward = {"method": "full", "optimizer": "paged_adamw8bit", "optimizer_in_backward": True, "global_batch": 8}
    assert check(problem(**in_backward), CheckRequest("H100", 1, framework="fsdp", compare=False)).runnable
    assert not check(problem(**in_backward), CheckRequest("H100", 8, framework="fsdp", compare=False)).runnable


def test_auto_costs_a_layout_under_the_framework_that_fits_it():
    # Llama 3.1 70B LoRA at 8k tokens on 8 H100, TP 4, PP 2, 8 interleaved chunks, no recompute: torchtitan and
    # Megatron both run the layout, and it fits only with Megatron's fused kernels (fewer saved activations).
    # Under framework: auto a layout runs in the simplest framework that runs it and holds it, so this one is
    # Megatron's (labelled torchtitan, it would not fit, and the cheaper plan would be lost); with full
    # recompute torchtitan holds it too, and keeps it.
    job = problem(model="llama-3.1-70b", method="lora", seq_len=8192, global_batch=16)
    layout = {"tp": 4, "pp": 2, "virtual_stages": 8, "micro_batch": 1, "compare": False}
    assert not check(job, CheckRequest("H100", 8, recompute="none", framework="torchtitan", **layout)).fits
    fused = check(job, CheckRequest("H100", 8, recompute="none", **layout))
    assert fused.fits and fused.plan.strategy.framework == "megatron"
    assert check(job, CheckRequest("H100", 8, recompute="full", **layout)).plan.strategy.framework == "torchtitan"
    best = plan(job.model_copy(update={"constraints": Constraints(gpu=GpuFilter(types=["H100-SXM"]))}))
    assert best.best.cost_usd.p50 <= fused.plan.cost_usd.p50 + 0.005


def test_exports_carry_optimizer_in_backward_or_refuse_it():
    # torchtitan writes optimizer.early_step_in_backward; accelerate's FSDP config has no such option, so its
    # export refuses the plan rather than write a config whose gradients would not fit as planned.
    plan = check(
        problem(method="full", optimizer_in_backward=True, global_batch=1), CheckRequest("H100", 1, compare=False)
    ).plan
    assert "early_step_in_backward = true" in export(plan, "torchtitan")
    with pytest.raises(ArgumentError, match="no optimizer step in backward.*the torchtitan export can"):
        export(plan, "accelerate")


def test_check_offers_the_optimizer_step_in_backward_as_a_fix():
    # Qwen3 14B full fine-tune with a paged 8-bit optimizer on one 48 GB L40S, batch 1 x 512, no recompute: 27.5 GiB
    # weights + 27.5 GiB gradients exceed 44.7 GiB before any activation (the loop frees the gradients each step,
    # so the 6.3 GiB of activations and the gradients are never held at once: tests/physics/test_gradient_lifetime.py);
    # stepping the optimizer in backward leaves one tensor's gradient, and check names that fix with its numbers.
    p = problem(model="qwen3-14b", method="full", optimizer="paged_adamw8bit", global_batch=1, seq_len=512)
    result = check(p, CheckRequest("L40S", 1, micro_batch=1, recompute="none", compare=False))
    assert not result.fits
    assert any("optimizer step in backward:" in note for note in result.notes)


def test_check_offers_pure_bf16_and_an_8bit_adamw_as_fixes():
    """torchtune's Llama 3.2 3B full fine-tune on one A100 (its README's packed row: batch 2 x 4096, no
    recompute) runs in pure bf16 (its recipes' dtype bf16: no fp32 master copy, bf16 Adam moments), which its
    table does not say: with gpuplan's default fp32 master weights it does not fit, and check names the recipe's
    setting, and an 8-bit AdamW, as fixes with the numbers check gives when asked with them."""
    model = {
        "params": "3.21B",
        "layers": 28,
        "hidden": 3072,
        "heads": 24,
        "kv_heads": 8,
        "ffn_hidden": 8192,
        "vocab": 128256,
        "tied_embeddings": True,
    }
    job = {"model": model, "method": "full", "seq_len": 4096, "global_batch": 2, "kernels": "eager"}
    request = CheckRequest("A100-80GB", 1, micro_batch=2, recompute="none", compare=False)
    result = check(problem(**job), request)
    assert not result.fits
    fixes = next(note for note in result.notes if note.startswith("does not fit; nearest fixes"))
    for label, setting in (
        ("pure bf16, no fp32 master weights", {"master_weights": False}),
        ("8-bit AdamW", {"optimizer": "adamw8bit"}),
    ):
        asked = check(problem(**job, **setting), request).plan
        assert asked.fits and f"{label}: {asked.memory_gib.total:,.1f} of" in fixes, fixes
        assert asked.memory_gib.optimizer < result.plan.memory_gib.optimizer


def test_adafactor_keeps_a_full_second_moment_where_zero_flattens_the_parameters():
    # torch.optim.Adafactor factors a matrix's second moment into a row and a column vector, but keeps a
    # full one for a 1-D tensor; DeepSpeed's ZeRO-1/2 and FSDP1 hand the optimizer flattened shards. So
    # Llama 3.1 8B with an fp32 master copy holds 4 bytes per parameter of Adafactor state under DDP and
    # 4 + 4 under ZeRO, divided over the 8 ranks.
    torch = pytest.importorskip("torch")

    def state_elements(shape):
        weight = torch.nn.Parameter(torch.zeros(*shape))
        optimizer = torch.optim.Adafactor([weight])
        weight.grad = torch.ones(*shape)
        optimizer.step()
        return sum(v.numel() for v in optimizer.state[weight].values() if torch.is_tensor(v) and v.dim())

    assert state_elements((64, 32)) == 64 + 32 and state_elements((2048,)) == 2048
    job = problem(optimizer="adafactor")
    params = job.job.model.params

    def optimizer_gib(zero):
        return check(
            job, CheckRequest("H100", 8, tp=1, pp=1, zero=zero, framework="deepspeed", compare=False)
        ).plan.memory_gib.optimizer

    assert optimizer_gib(0) == pytest.approx(4 * params / 2**30, rel=1e-3)
    assert optimizer_gib(1) == pytest.approx((4 + 4) * params / 8 / 2**30, rel=1e-3)


def test_adafactor_state_counts_its_full_second_moment_wherever_gpuplan_sums_the_state():
    # The infeasibility message and capacity's bytes per parameter sum the state sharded over the GPUs:
    # 2 (weights) + 2 (gradients) + 4 (master) + 4 (unfactored second moment) = 12 bytes per parameter.
    job = problem(model="llama-3.1-70b", optimizer="adafactor", global_batch=64, seq_len=4096)
    params = job.job.model.params
    job = job.model_copy(update={"constraints": Constraints(gpu=GpuFilter(types=["L40S"]))})
    answer = plan(job)
    memory = next(r for r in answer.infeasible if r.constraint == "memory")
    assert f"needs {12 * params / 1e9:,.1f} GB" in memory.detail
    assert any(
        "leave out every offer that could run" in r.detail for r in answer.infeasible if r.constraint == "filter"
    )


def test_qlora_shows_its_dequantisation_in_the_time_breakdown():
    qlora = check(problem(method="qlora"), CheckRequest("L40S", 1, micro_batch=1, compare=False)).plan
    lora = check(problem(method="lora"), CheckRequest("L40S", 1, micro_batch=1, compare=False)).plan
    assert qlora.time_breakdown_s["dequant"] > 0 and "dequant" not in lora.time_breakdown_s
