"""Fine-tune memory options people use: paged 8-bit optimizers, 16-bit embeddings under QLoRA, chunked and
fused cross-entropy, LoRA on attention only. Each changes the memory the way its source says."""

from __future__ import annotations

import pytest

from optimizer import check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.shapes import lora_adapter_params
from optimizer.planning.model_state import model_shape, training_state

LLAMA_65B = {"params": "65.2B", "layers": 80, "hidden": 8192, "heads": 64, "ffn_hidden": 22016, "vocab": 32000}


def problem(**job) -> Problem:
    base = {"model": "llama-3.1-8b", "tokens": "10M", "seq_len": 2048, "global_batch": 16}
    return Problem.model_validate(expand_models({"catalog": "default", "job": {**base, **job}}))


def test_qlora_65b_fits_one_48gb_gpu_with_a_paged_optimizer():
    # Dettmers et al. 2023 (QLoRA), abstract: a 65B model finetuned on a single 48 GB GPU, with NF4 weights,
    # double quantisation and paged optimizers. With the Adam state resident it does not fit.
    paged = problem(model=LLAMA_65B, method="qlora", lora_rank=64, seq_len=512, optimizer="paged_adamw8bit")
    resident = problem(model=LLAMA_65B, method="qlora", lora_rank=64, seq_len=512, optimizer="adamw")
    fits = check(paged, "L40S", 1, micro_batch=1, recompute="full", compare=False)
    assert fits.fits and fits.plan.memory_gib.optimizer == 0.0
    assert not check(resident, "L40S", 1, micro_batch=1, recompute="full", compare=False).fits


def test_qlora_keeps_embeddings_and_lm_head_in_16_bits():
    # bitsandbytes quantises nn.Linear layers; the embedding and the (untied) LM head stay bf16.
    p = problem(method="qlora")
    shape = model_shape(p.job.model)
    train = training_state(p.job, shape)
    embeddings = 2 * 128256 * 4096
    expected = (shape.params - embeddings) * (4.127 / 8) + embeddings * 2 + train.trainable_params * 2
    assert train.weights_total(shape.params) == pytest.approx(expected)


@pytest.mark.parametrize(("loss", "bytes_per_vocab"), [("standard", 6), ("chunked", 2), ("fused", 0)])
def test_cross_entropy_memory_by_loss(loss, bytes_per_vocab):
    # One GPU, no pipeline: activations = layers + logits; the loss only changes the logits term.
    def activations(name):
        p = problem(method="lora", loss=name)
        return check(p, "H100", 1, micro_batch=1, recompute="none", compare=False).plan.memory_gib.activations

    logits_gib = 2048 * 128256 / 2**30
    assert activations(loss) == pytest.approx(activations("fused") + bytes_per_vocab * logits_gib)


def test_lora_on_attention_only_counts_q_k_v_o():
    # Llama 3.1 8B, r = 16 on q, k, v, o: 32 layers x 16 x ((h + q) + 2 (h + kv) + (q + h)) = 13,631,488
    shape = model_shape(problem().job.model)
    assert lora_adapter_params(shape, 16, "attention") == 32 * 16 * (8192 + 2 * (4096 + 1024) + 8192)
    assert lora_adapter_params(shape, 16, "attention") < lora_adapter_params(shape, 16)
