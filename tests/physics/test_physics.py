"""Each physics formula against an independent figure: a paper's table, a published count, or a
hand calculation written out here."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from optimizer.inputs.hf_models import model_fields, presets
from optimizer.inputs.schema import JobSpec, ModelSpec
from optimizer.physics.layout import Cluster, Layout, Recompute, RunSettings
from optimizer.physics.memory import activation_bytes, layer_activation_bytes, state_bytes
from optimizer.physics.pipeline import heaviest_stage_share
from optimizer.physics.shapes import ModelShape, lora_adapter_params
from optimizer.physics.time import StepTime, flops_per_token, step_time
from optimizer.planning.model_state import model_shape, training_state

LLAMA_8B = ModelSpec(params=8.03e9, layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256)
GPT3 = ModelSpec(params=175e9, layers=96, hidden=12288, heads=96, ffn_hidden=4 * 12288, vocab=51200, gated_mlp=False)


def _job(model, **kw):
    return JobSpec(model=model, tokens=1e9, **kw)


@pytest.mark.parametrize("stage, expected_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_figure_1(stage, expected_gb):
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, Adam (K = 12), 64 data-parallel GPUs.
    shape = ModelShape(params=7.5e9, active_params=7.5e9)
    train = training_state(_job(ModelSpec(params=7.5e9)), shape)
    w, g, o = state_bytes(shape, train, Layout(zero=stage, shard=64))
    assert float(w + g + o) / 1e9 == pytest.approx(expected_gb, abs=0.05)


def test_model_parallelism_divides_all_state():
    shape = ModelShape(params=7.5e9, active_params=7.5e9)
    train = training_state(_job(ModelSpec(params=7.5e9)), shape)
    w, g, o = state_bytes(shape, train, Layout(tp=4, pp=2))
    assert float(w + g + o) == pytest.approx(16 * 7.5e9 / 8)


def test_gpt_activations_are_korthikanti_34_sbh_less_dropout_masks():
    # Korthikanti et al. 2022 eq. (1): sbh(34 + 5as/h) per layer with dropout. Without dropout the two
    # 1-byte masks (sbh each) and the attention-dropout mask and output (3as^2b) are gone: 32 sbh + 2as^2b.
    shape = model_shape(GPT3)
    s, b, h, a = 2048, 1, 12288, 96
    assert float(layer_activation_bytes(shape, s, b, eager_attention=False)) == pytest.approx(32 * s * b * h)
    assert float(layer_activation_bytes(shape, s, b, eager_attention=True)) == pytest.approx(
        32 * s * b * h + 2 * a * s * s * b
    )


def test_gqa_and_gated_mlp_widths_enter_the_count():
    # Llama 3.1 8B: q = h = 4096, kv = 8 x 128 = 1024, SwiGLU f = 14336, bytes per token.
    # Fused kernels (Megatron-Core / Transformer Engine): attention 2h + 2h + 2q + 2kv + 2kv + 2q = 36,864;
    # MLP 2h + 2h + 6f = 102,400.
    shape = model_shape(LLAMA_8B)
    assert float(layer_activation_bytes(shape, 1, 1, False, fused_kernels=True)) == pytest.approx(36864 + 102400)
    # Eager PyTorch, as saved_tensors_hooks measures it (tests/validation/test_torch_accounting.py): two fp32-upcasting
    # RMSNorms 16h, attention 4q + 4kv, unfused SwiGLU 8f = 200,704 (measured 200,840).
    assert float(layer_activation_bytes(shape, 1, 1, False)) == pytest.approx(
        16 * 4096 + 4 * 4096 + 4 * 1024 + 8 * 14336
    )


def test_transformer_engine_fp8_keeps_linear_inputs_in_one_byte():
    # In FP8, Transformer Engine saves the FP8 cast of each linear's input for the weight gradient: the two
    # norm outputs (QKV and FC1 inputs), the output projection's input and the down projection's input lose
    # a byte per element each: h + h + q + f = 4096 + 4096 + 4096 + 14336 bytes per token on Llama 3.1 8B.
    shape = model_shape(LLAMA_8B)
    bf16 = float(layer_activation_bytes(shape, 1, 1, False, fused_kernels=True))
    fp8 = float(layer_activation_bytes(shape, 1, 1, False, fused_kernels=True, fp8_saved_inputs=True))
    assert bf16 - fp8 == pytest.approx(3 * 4096 + 14336)
    # An MoE layer (Qwen3-30B-A3B: h 2048, q 4096, top-8 experts of width 768): its MLP norm's output feeds the
    # 16-bit router, so the savings are the attention norm's output h, the output projection's input q, the
    # experts' down-projection inputs 8 x 768 and the permuted FC1 input h x 8.
    qwen = model_shape(ModelSpec(**model_fields(presets()["qwen3-30b-a3b"]["config"])))
    moe_bf16 = float(layer_activation_bytes(qwen, 1, 1, False, fused_kernels=True))
    moe_fp8 = float(layer_activation_bytes(qwen, 1, 1, False, fused_kernels=True, fp8_saved_inputs=True))
    assert moe_bf16 - moe_fp8 == pytest.approx(2048 + 4096 + 8 * 768 + 8 * 2048)
    # torchao's Float8Linear (eager kernels) keeps the bf16 input: nothing changes there.
    assert float(layer_activation_bytes(shape, 1, 1, False, fp8_saved_inputs=True)) == pytest.approx(
        float(layer_activation_bytes(shape, 1, 1, False))
    )


LOSS_BYTES = RunSettings(seq_len=1).logits_bytes_per_vocab  # the loss's logits terms, taken off to compare layers


def test_tensor_sequence_parallel_divides_and_full_recompute_keeps_inputs():
    shape = model_shape(GPT3)
    s = 2048
    one = (
        float(activation_bytes(shape, RunSettings(seq_len=s), Layout(tp=1, pp=1, grad_accum=1, recompute=0)))
        - LOSS_BYTES * s * shape.vocab
    )
    eight = (
        float(activation_bytes(shape, RunSettings(seq_len=s), Layout(tp=8, pp=1, grad_accum=1, recompute=0)))
        - LOSS_BYTES * s * shape.vocab / 8
    )
    assert eight == pytest.approx(one / 8)
    full = (
        float(activation_bytes(shape, RunSettings(seq_len=s), Layout(tp=1, pp=1, grad_accum=1, recompute=2)))
        - LOSS_BYTES * s * shape.vocab
    )
    # 2 sbh per layer (the layer input) plus one layer's working set during its backward
    assert full == pytest.approx(2 * s * shape.hidden * 96 + 32 * s * shape.hidden)


def test_one_f_one_b_first_stage_holds_all_layers_worth():
    # Korthikanti section 4.2.3: p micro-batches of L/p layers on the first stage = L layers' worth.
    shape = model_shape(GPT3)
    s = 2048
    flat = (
        float(activation_bytes(shape, RunSettings(seq_len=s), Layout(tp=1, pp=1, grad_accum=8, recompute=0)))
        - LOSS_BYTES * s * shape.vocab
    )
    piped = float(activation_bytes(shape, RunSettings(seq_len=s), Layout(tp=1, pp=4, grad_accum=8, recompute=0)))
    assert piped == pytest.approx(flat)
    # with fewer micro-batches than stages only m are in flight
    assert float(
        activation_bytes(shape, RunSettings(seq_len=s), Layout(tp=1, pp=4, grad_accum=2, recompute=0))
    ) == pytest.approx(flat / 2)


def test_lora_adapter_count_matches_peft_for_llama_3_8b():
    # PEFT prints "trainable params: 41,943,040" for r=16 on q,k,v,o,gate,up,down of Llama 3 8B.
    assert lora_adapter_params(model_shape(LLAMA_8B), 16) == 41_943_040


def test_qlora_stores_nf4_base_with_double_quantisation():
    shape = model_shape(LLAMA_8B)
    train = training_state(_job(LLAMA_8B, method="qlora"), shape)
    assert train.weight_bytes == pytest.approx(4.127 / 8)  # Dettmers et al. 2023: 0.127 bits of constants
    assert train.optimizer_bytes == 12.0 and train.trainable_params == 41_943_040


def test_palm_flops_per_token():
    # PaLM appendix B: 6N + 12 L H Q T with H Q = hidden; Llama 3.1 8B at 4,096 tokens.
    shape = model_shape(LLAMA_8B)
    train = training_state(_job(LLAMA_8B), shape)
    model, hardware = flops_per_token(shape, train, 4096)
    assert model == pytest.approx(6 * 8.03e9 + 12 * 32 * 4096 * 4096)
    _, with_recompute = flops_per_token(shape, train, 4096, recompute=Recompute.FULL)
    assert float(with_recompute) == pytest.approx(8 * 8.03e9 + 16 * 32 * 4096 * 4096)  # one more forward


def _hw(**kw):
    base = dict(
        peak_flops=1e15,
        hbm_bytes_per_s=8e12,
        intra_bytes_per_s=1.8e12,
        network_bytes_per_s=50e9,
        gpus_per_node=8,
        compute_efficiency=0.5,
    )
    base.update(kw)
    return Cluster(**{k: np.asarray(v, float) for k, v in base.items()})


def _step(shape, train, hw, *, seq_len=4096, nodes=1, gpus_per_node=1, explicit_efficiency=None, **layout):
    hw = Cluster(**{**vars(hw), "nodes": nodes, "gpus_per_node": gpus_per_node})
    return step_time(
        shape, train, hw, Layout(**layout), RunSettings(seq_len=seq_len), explicit_efficiency=explicit_efficiency
    )


def test_compute_bound_step_is_flops_over_peak_times_efficiency():
    shape = ModelShape(params=1e9, active_params=1e9)
    train = training_state(_job(ModelSpec(params=1e9)), shape)
    t = _step(shape, train, _hw(), micro_batch=8)
    flops = 6e9 * 8 * 4096
    assert float(t.compute_s) == pytest.approx(flops / (1e15 * 0.5))
    assert str(t.bound()) == "compute"


@given(
    st.lists(st.tuples(*[st.sampled_from([0.5, 1.0, 2.0])] * 3), min_size=1, max_size=8),
    st.sampled_from([None, 0.0, 1.0]),
)
def test_one_rows_bound_is_that_row_of_the_tables(rows, network_everywhere):
    # (plans read one row: ``bound_at``); ties go the same way, and a communication time given as one
    # number for the whole table counts for every row
    compute, memory, network = (np.array(column) for column in zip(*rows))
    t = StepTime(
        step_s=np.ones(len(rows)),
        ideal_s=np.ones(len(rows)),
        compute_s=compute,
        memory_s=memory,
        network_s=network if network_everywhere is None else np.float64(network_everywhere),
        bubble_s=np.zeros(len(rows)),
        tokens_per_step=np.ones(len(rows)),
        model_flops_per_token=1.0,
    )
    assert [t.bound_at(i) for i in range(len(rows))] == [str(b) for b in t.bound()]


def test_small_micro_batches_hit_the_hbm_roofline():
    # LoRA on 70B, 128-token micro-batches: 4N x 128 FLOPs against 2 reads x 2N bytes = 128 FLOP/byte,
    # below the ridge of 1e15 x 0.5 FLOP/s / 1e12 B/s = 500 FLOP/byte: HBM time dominates.
    shape = ModelShape(params=70e9, active_params=70e9)
    train = training_state(_job(ModelSpec(params=70e9), method="lora", trainable_params=1e8), shape)
    slow_hbm = _hw(hbm_bytes_per_s=1e12)
    t = _step(shape, train, slow_hbm, seq_len=128)
    assert str(t.bound()) == "memory"
    # HBM bytes: frozen + adapter weights read twice (forward, data gradient), adapter gradients read+written
    weights = 2 * 70e9 + 2 * 1e8
    assert float(t.memory_s) == pytest.approx((2 * weights + 2 * 2 * 1e8) / 1e12)


def test_ring_all_reduce_volume_for_data_parallel_gradients():
    # Ring all-reduce moves 2 (d-1)/d x gradient bytes per GPU; with no overlap it is all exposed.
    shape = ModelShape(params=1e9, active_params=1e9)
    train = training_state(_job(ModelSpec(params=1e9)), shape)
    hw = _hw()
    single = _step(shape, train, hw, gpus_per_node=8)
    eight = _step(shape, train, hw, gpus_per_node=8, dp=8)
    comm = 2 * 7 / 8 * 2e9 / (1.8e12 / 2)  # per direction NVLink
    assert float(eight.step_s - single.step_s) == pytest.approx(comm)


def test_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1():
    shape = ModelShape(
        params=1e9,
        active_params=1e9,
        layers=16,
        hidden=2048,
        heads=16,
        kv_width=2048,
        q_width=2048,
        ffn_active=8192,
        vocab=32000,
        has_shapes=True,
    )
    train = training_state(_job(ModelSpec(params=1e9)), shape)
    t = _step(shape, train, _hw(), gpus_per_node=4, pp=4, grad_accum=12)
    busy = float(t.ideal_s)
    # bubble share of the pipeline time: (p-1)/(m+p-1) = 3/15
    assert float(t.bubble_s) / (float(t.bubble_s) + busy) == pytest.approx(3 / 15, rel=0.01)


def test_explicit_scaling_efficiency_replaces_the_derived_one():
    shape = ModelShape(params=1e9, active_params=1e9)
    train = training_state(_job(ModelSpec(params=1e9)), shape)
    t = _step(shape, train, _hw(), nodes=2, gpus_per_node=8, dp=16, explicit_efficiency=0.79)
    assert float(t.scaling_efficiency) == pytest.approx(0.79)


def test_the_first_and_last_pipeline_stages_hold_the_embeddings():
    # Megatron-LM's functional-test GPT (validation/memory_runs.yaml mlm-gpt-tp1-pp4-local: 12 layers, hidden 512,
    # vocabulary 50,304 tied, 64.0M parameters) over PP 4: the row's note counts its last stage's 3 layers at 9.4M
    # parameters beside its copy of the 25.8M tied embeddings (gpuplan spreads the learned positions and the final
    # norm over the stages, hence the 0.5 %).
    gpt = ModelShape(params=64.0e6, active_params=64.0e6, layers=12, hidden=512, vocab=50304, tied_embeddings=True)
    assert heaviest_stage_share(gpt, 4) * 64.0e6 == pytest.approx(25.8e6 + 9.4e6, rel=0.005)
    assert heaviest_stage_share(gpt, 1) == 1.0
    # untied over 2 stages: the embedding on one, the LM head on the other, each stage half the model
    untied = ModelShape(params=8.03e9, active_params=8.03e9, layers=32, hidden=4096, vocab=128256)
    assert heaviest_stage_share(untied, 2) == pytest.approx(0.5)
    assert heaviest_stage_share(untied, 4, virtual_stages=3) == pytest.approx(0.25)
