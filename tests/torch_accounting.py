"""PyTorch's own accounting of a preset's activations and FLOPs (helper for ``test_torch_accounting``).

Builds the preset's Hugging Face architecture from its bundled config (random weights, nothing
downloaded) at reduced depth and measures, in bf16:

- the bytes autograd saves for backward, from ``torch.autograd.graph.saved_tensors_hooks``, one count
  per storage (views share it) and parameters left out;
- the FLOPs of forward + backward, from ``torch.utils.flop_counter.FlopCounterMode``.

Dense models run under ``FakeTensorMode`` (shapes and dtypes without data: full width costs nothing);
mixture-of-experts routing depends on the data, so MoE models run for real at reduced width.
The per-layer figures are differences between depths 2 and 1, so the embedding, final norm, LM head
and loss cancel out; what remains of the depth-1 model is the model-level part (logits, loss).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import transformers
import transformers.masking_utils
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import flop_counter
from torch.utils.checkpoint import checkpoint

aten = torch.ops.aten

_CONFIGS = {
    "llama": transformers.LlamaConfig,
    "mistral": transformers.MistralConfig,
    "qwen3": transformers.Qwen3Config,
    "gemma2": transformers.Gemma2Config,
    "qwen3_moe": transformers.Qwen3MoeConfig,
    "mixtral": transformers.MixtralConfig,
    "deepseek_v3": transformers.DeepseekV3Config,
    "gpt_oss": transformers.GptOssConfig,
}


_MOE_TYPES = frozenset({"qwen3_moe", "mixtral", "deepseek_v3", "gpt_oss"})


def _cpu_flash(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_flash_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _grouped_mm(a_shape, b_shape, *args, **kwargs) -> int:
    """aten._grouped_mm (the MoE experts' grouped GEMM): every case (2-D x 3-D with ragged rows, 2-D x 2-D
    with a ragged contraction for the weight gradient, 3-D x 3-D batched) multiplies each element of the
    first operand by one column of the second: 2 x numel(a) x columns(b)."""
    numel = 1
    for d in a_shape:
        numel *= d
    return 2 * numel * b_shape[-1]


# FlopCounterMode knows the CUDA flash / efficient kernels but not SDPA's CPU flash kernel (PyTorch 2.13):
# count it with the same formula (full s x s, causal masking not subtracted, as for the CUDA kernels); nor
# the grouped GEMM of MoE experts.
_CUSTOM_FLOPS = {
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward,
    aten._grouped_mm: _grouped_mm,
}


def _flash(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """FlashAttention stand-in: causal SDPA, which on CPU runs the flash kernel (saves the output and the
    log-sum-exp, no s x s). Gemma 2's logit soft-capping is left out (FlashAttention 2 applies it inside
    the kernel at no extra memory; SDPA cannot), as is its 4,096-token sliding window (no effect at the
    sequence lengths measured here)."""
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, is_causal=True, scale=scaling, enable_gqa=key.shape[1] != query.shape[1]
    )
    return out.transpose(1, 2).contiguous(), None


transformers.AttentionInterface.register("fused_causal", _flash)
transformers.masking_utils.ALL_MASK_ATTENTION_FUNCTIONS.register("fused_causal", lambda *args, **kwargs: None)


@dataclass(frozen=True)
class Measured:
    saved_bytes: float  # saved for backward, whole model, one sequence
    flops: float  # forward + backward, whole model, one sequence


def hf_config(preset_config: dict, layers: int, **overrides):
    """The transformers config of a preset at ``layers`` depth (widths as given, or overridden)."""
    fields = {k: v for k, v in preset_config.items() if k != "model_type"}
    fields.update(num_hidden_layers=layers, **overrides)
    cfg = _CONFIGS[preset_config["model_type"]](**fields)
    cfg._attn_implementation = "fused_causal"
    # MoE experts as one grouped GEMM over the permuted tokens (torchtitan's and Megatron-Core's path), not
    # transformers' per-expert Python loop.
    if preset_config["model_type"] in _MOE_TYPES:
        cfg._experts_implementation = "grouped_mm"
    cfg.use_cache = False
    return cfg


def measure(cfg, seq_len: int, recompute: bool, fake: bool) -> Measured:
    """Saved bytes and FLOPs of one forward + backward of ``cfg``'s causal LM on one sequence."""
    mode = FakeTensorMode() if fake else contextlib.nullcontext()
    torch.manual_seed(0)
    with mode:
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        finally:
            torch.set_default_dtype(default)
        if recompute:
            _checkpoint_layers(model)
        ids = torch.randint(0, cfg.vocab_size, (1, seq_len))
        params = {p.untyped_storage()._cdata for p in model.parameters()}
        saved: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            storage = t.untyped_storage()
            if storage._cdata not in params:
                saved[storage._cdata] = storage.nbytes()
            return t

        with flop_counter.FlopCounterMode(display=False, custom_mapping=_CUSTOM_FLOPS) as counter:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
    return Measured(saved_bytes=float(sum(saved.values())), flops=float(counter.get_total_flops()))


def _checkpoint_layers(model) -> None:
    """Full recompute: every decoder layer re-runs its forward in backward and keeps only its inputs
    (reentrant checkpoint, so the inputs go through ``save_for_backward`` and the hooks see them)."""
    for layer in model.model.layers:
        forward = layer.forward

        def wrapped(hidden_states, *args, _forward=forward, **kwargs):
            return checkpoint(lambda h: _forward(h, *args, **kwargs), hidden_states, use_reentrant=True)

        layer.forward = wrapped
