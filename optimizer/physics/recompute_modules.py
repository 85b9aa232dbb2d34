"""Selective recompute by module, as Megatron-Core names it (``--recompute-modules`` under
``--recompute-granularity selective``; megatron/core/transformer/transformer_config.py ``recompute_modules``,
default ``["core_attn"]``, and megatron/core/transformer/transformer_layer.py). Each named submodule's forward
re-runs in backward instead of keeping what it saved; what each frees, per token and layer, in the counts of
``memory.layer_activation_bytes`` under Transformer Engine's layers (``fused``):

- ``core_attn``: the attention core. FlashAttention keeps no s x s scores anyway (``memory.activation_bytes``
  drops that term under selective recompute); its score and value matmuls re-run: a third of the attention
  FLOPs (Korthikanti et al. 2022, section 5), as gpuplan's ``selective`` has always counted.
- ``layernorm`` (output-discarding checkpointing): the two norms' outputs, the inputs of the QKV projection and
  of the MLP (or the router and the dispatch), are freed once the matmul has read them and re-made from the kept
  norm input in backward: 2h + 2h bytes (a linear's input in one byte under FP8 where Transformer Engine keeps
  it so: ``memory._norm_bytes_per_token``). The norms re-run: read 2h, write 2h each.
- ``moe_act`` (output-discarding): the routed experts' activation output, the FC2 input: 2 f_routed bytes
  (f_routed = experts per token x expert width; one byte in FP8). The SwiGLU re-runs: reads the FC1 output
  (4 f_routed), writes 2 f_routed.
- ``mlp``: a dense MLP layer checkpointed from its input, its norm inside (Transformer Engine's LayerNormMLP):
  the norm's output (2h), FC1's output and the activation's (6f gated, 4f not; the activation's in one byte in
  FP8) are freed; its forward re-runs, 2 x its parameters in FLOPs.

Megatron-Bridge's MoE recipes set ``recompute_modules`` to ``[layernorm, moe_act]`` or ``[moe_act]`` (the
Megatron-MoE-ModelZoo's Qwen3-235B benchmark: ``--recompute-modules layernorm moe_act``). The savings are
counted where Transformer Engine's layers run (``fused``): the names and what each keeps are Megatron-Core's.
"""

from __future__ import annotations

import numpy as np

from .layout import Layout, Recompute
from .shapes import ModelShape

# Megatron-Core's default (TransformerConfig.recompute_modules)
DEFAULT_RECOMPUTE_MODULES: frozenset[str] = frozenset({"core_attn"})
# the modules modelled here (job.recompute_modules' Literal names the same: tests/physics/test_recompute_modules.py)
RECOMPUTE_MODULES = ("core_attn", "layernorm", "moe_act", "mlp")


def frees_beyond_flash(modules: frozenset[str]) -> bool:
    """Whether selective recompute of ``modules`` keeps less than FlashAttention alone (any module beyond the
    attention core): only then is it a layout of its own beside no recompute."""
    return bool(modules - DEFAULT_RECOMPUTE_MODULES)


def _routed_width(shape: ModelShape) -> float:
    """f_routed: the routed experts' MLP width a token passes through (experts per token x expert width)."""
    if not shape.experts:
        return 0.0
    return shape.experts_per_token * (shape.expert_ffn or shape.ffn_active / max(shape.experts_per_token, 1.0))


def _dense_width(shape: ModelShape) -> float:
    """The MLP width of a dense model's layers; 0 for an MoE model, whose few dense layers (DeepSeek-V3's first
    three) the shapes do not give apart."""
    return 0.0 if shape.experts else shape.ffn_active


def freed_bytes_per_token(shape: ModelShape, modules: frozenset[str], fused, fp8_inputs) -> np.ndarray:
    """Bytes per token one block (averaged over the model's dense and MoE layers) no longer keeps for backward."""
    fused = np.asarray(fused, bool)
    fp8 = fused & np.asarray(fp8_inputs, bool)
    h = shape.hidden
    moe_share = shape.moe_layer_share if shape.experts else 0.0
    freed = np.zeros(np.shape(fused))
    if "layernorm" in modules:
        # the attention norm's output (the QKV input: one byte in FP8) and the MLP norm's (a dense MLP's FC1
        # input: one byte in FP8; an MoE layer's router input and dispatch: 16 bits)
        freed = freed + 2.0 * h + 2.0 * h - np.where(fp8, h + h * (1.0 - moe_share), 0.0)
    if "moe_act" in modules and shape.experts:
        f = _routed_width(shape)
        freed = freed + moe_share * np.where(fp8, f, 2.0 * f)
    if "mlp" in modules:
        f = _dense_width(shape)
        internal = (6.0 if shape.gated_mlp else 4.0) * f - np.where(fp8, f, 0.0)
        norm_output = 0.0 if "layernorm" in modules else np.where(fp8, h, 2.0 * h)  # or freed above already
        freed = freed + (1.0 - moe_share) * (internal + norm_output)
    return np.where(fused, freed, 0.0)


def rerun_flops_per_token(shape: ModelShape, modules: frozenset[str]) -> float:
    """Forward FLOPs per token, all layers, that the modules other than ``core_attn`` re-run in backward: a dense
    MLP's matmuls (2 x its parameters); the norms and the activation are element-wise (``rerun_bytes_per_token``)."""
    if "mlp" not in modules:
        return 0.0
    f = _dense_width(shape)
    mlp_params = (3.0 if shape.gated_mlp else 2.0) * shape.hidden * f
    dense_layers = shape.layers * (1.0 - (shape.moe_layer_share if shape.experts else 0.0))
    return 2.0 * mlp_params * dense_layers


def rerun_bytes_per_token(shape: ModelShape, modules: frozenset[str]) -> float:
    """HBM bytes per token, all layers, of the element-wise kernels the modules re-run in backward: each norm
    reads its 2h input and writes its 2h output; the experts' SwiGLU reads FC1's 4 f_routed and writes 2."""
    moe_share = shape.moe_layer_share if shape.experts else 0.0
    per_layer = 0.0
    if "layernorm" in modules:
        per_layer += 2.0 * (2.0 * shape.hidden + 2.0 * shape.hidden)
    if "moe_act" in modules:
        per_layer += moe_share * 6.0 * _routed_width(shape)
    return shape.layers * per_layer


def rerun_bytes(shape: ModelShape, layout: Layout, tokens, modules: frozenset[str]) -> np.ndarray:
    """Half the HBM traffic of the element-wise kernels selective recompute re-runs (norms, the experts'
    activation), counted with the activations' (written and read: 2 x) under the roofline (physics/time.py)."""
    selective = np.asarray(layout.recompute) == Recompute.SELECTIVE
    return np.where(selective, tokens * rerun_bytes_per_token(shape, modules) / 2.0, 0.0)
