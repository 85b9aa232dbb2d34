"""LoRA's adapter kernels: the HBM traffic of the low-rank branch beside each adapted linear (issue 48).

PEFT's LoRA ``Linear.forward`` (huggingface/peft src/peft/tuners/lora/layer.py @ 5d602fd) adds, per adapted
linear, ``result = result + lora_B(lora_A(dropout(x))) * scaling``, and torchtune's ``LoRALinear`` the same
branch (``out + (alpha / rank) * lora_b(lora_a(dropout(x)))``). At rank r the two GEMMs do 2 r (in + out) FLOPs
per token over (in + out) elements read or written: r FLOPs per 2 bytes, under every GPU's ridge point, so the
branch runs at HBM bandwidth, not at the tensor cores, and its element-wise ops (the scaling, the sum) are
kernels of their own. Per token, in 16-bit elements (2 bytes; dropout at its default 0, the identity):

- forward: ``lora_A`` reads x (in), ``lora_B`` writes its output (out), ``* scaling`` reads and writes it (2 out),
  ``result +`` reads two and writes one (3 out): in + 6 out;
- backward: the scaling's gradient (2 out), ``lora_B``'s data and weight gradients each read the output gradient
  (2 out), ``lora_A``'s data gradient writes an input gradient and its weight gradient reads x (2 in), and
  autograd sums the branch's input gradient into the base layer's (reads two, writes one: 3 in): 5 in + 4 out;
- a recomputed layer runs the forward again.

So (12 + 2 rho) in + (20 + 12 rho) out bytes per token and adapted linear, rho the recomputed share of the
layers. The routed experts of an MoE are not adapted (``lora_adapter_params``), nor is anything where the
targets are the attention projections only.
"""

from __future__ import annotations

import numpy as np

from .shapes import ModelShape


def adapted_widths(shape: ModelShape, targets: str) -> tuple[float, float]:
    """(sum of inputs, sum of outputs) over one layer's adapted linears: q, k, v, o; and gate, up, down (or fc1,
    fc2) where ``targets`` is all_linear; Megatron's fused linear_qkv alone (h in, q + 2 kv out) where it is qkv;
    (0, 0) without the model's shapes or targets."""
    if not shape.has_shapes or shape.hidden <= 0 or not targets:
        return 0.0, 0.0
    h, f = shape.hidden, shape.ffn_active
    q = shape.q_width or h
    kv = shape.kv_width or h
    if targets == "qkv":
        return h, q + 2.0 * kv
    inputs, outputs = 3.0 * h + q, q + 2.0 * kv + h
    if targets == "all_linear":
        inputs += (2.0 * h + f) if shape.gated_mlp else (h + f)
        outputs += (2.0 * f + h) if shape.gated_mlp else (f + h)
    return inputs, outputs


def lora_bytes_per_token(shape: ModelShape, targets: str, recomputed_share=0.0) -> np.ndarray:
    """HBM bytes of the adapters' branch per token over all layers, forward and backward (module docstring)."""
    inputs, outputs = adapted_widths(shape, targets)
    rho = np.asarray(recomputed_share, float)
    return shape.layers * ((12.0 + 2.0 * rho) * inputs + (20.0 + 12.0 * rho) * outputs)
