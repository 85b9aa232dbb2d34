"""LoRA's adapter kernels: the HBM traffic of the low-rank branch beside each adapted linear (issue 48).

PEFT's LoRA ``Linear.forward`` (huggingface/peft src/peft/tuners/lora/layer.py @ 5d602fd, the same at v0.14.0 and
v0.17.0) adds, per adapted linear, ``result = result + lora_B(lora_A(dropout(x))) * scaling``, and torchtune's
``LoRALinear`` the same branch (``out + (alpha / rank) * lora_b(lora_a(dropout(x)))``). At rank r the two GEMMs do
2 r (in + out) FLOPs per token over (in + out) elements read or written: r FLOPs per 2 bytes, under every GPU's
ridge point, so the branch runs at HBM bandwidth, not at the tensor cores, and its element-wise ops (the scaling,
the sum) are kernels of their own. Per token and adapted linear, ``a`` the bytes of an adapter element, ``e`` = 2
those of the 16-bit activations, ``c`` 1 where the two differ, ``d`` 1 where LoRA dropout is on, ``m`` = 1 byte of
dropout mask:

- forward, the input side: ``x = self._cast_input_dtype(x, lora_A.weight.dtype)`` (peft @ 5d602fd; ``x =
  x.to(lora_A.weight.dtype)`` at v0.14.0) reads e and writes a (c); ``dropout(x)`` reads a, writes a and its
  boolean mask (d: ``torch.nn.functional.dropout`` -> ``native_dropout``); ``lora_A`` reads a:
  c (e + a) + d (2 a + m) + a;
- forward, the output side: ``lora_B`` writes a, ``* scaling`` reads and writes 2 a, ``result +`` reads the base
  result (e) and the branch (a) and writes the promoted sum (a), ``result.to(torch_result_dtype)`` reads a and
  writes e (c): 5 a + e + c (a + e);
- backward, the output side: the cast back's gradient (e -> a, c), the sum's gradient to the base result (a -> e,
  c), the scaling's (2 a), ``lora_B``'s data and weight gradients each reading the output gradient (2 a):
  2 c (a + e) + 4 a;
- backward, the input side: ``lora_A``'s data gradient written and its weight gradient reading the saved input
  (2 a), dropout's backward (d: reads the gradient and the mask, writes a), the input cast's gradient (a -> e, c),
  and autograd summing the branch's input gradient into the base layer's (reads two, writes one: 3 e):
  2 a + d (2 a + m) + c (a + e) + 3 e;
- a recomputed layer runs the forward again (rho, the recomputed share of the layers).

With 16-bit adapters and no dropout (a = e = 2, c = d = 0) that is (12 + 2 rho) in + (20 + 12 rho) out bytes. PEFT
keeps the adapters of a 16-bit model in fp32 (a = 4): ``get_peft_model(..., autocast_adapter_dtype=True)`` by
default since v0.12 (src/peft/mapping.py; ``BaseTuner._cast_adapter_dtype`` in src/peft/tuners/tuners_utils.py:
"Currently, this only upcasts float16 and bfloat16 to float32"); without ``torch.autocast`` around the model the
branch and its sum then run in fp32: (30 + 10 rho) in + (56 + 28 rho) out bytes, (48 + 19 rho) in with dropout.
Under autocast (Hugging Face Trainer's bf16, fp32 master weights) the GEMMs take 16-bit copies and the branch is
counted as 16-bit. The routed experts of an MoE are not adapted (``lora_adapter_params``), nor is anything where the
targets are the attention projections only.
"""

from __future__ import annotations

import numpy as np

from .shapes import ModelShape

ACTIVATION_BYTES = 2.0  # the 16-bit activations (bf16 / fp16) a LoRA branch reads and adds to
DROPOUT_MASK_BYTES = 1.0  # torch's native_dropout keeps a torch.bool mask: one byte an element
FP32_ADAPTER_BYTES = 4.0  # PEFT's autocast_adapter_dtype=True: adapters of a bf16 / fp16 model upcast to fp32


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


def branch_bytes_per_element(
    adapter_element_bytes: float = ACTIVATION_BYTES, dropout: bool = False
) -> tuple[float, float, float, float]:
    """(forward in, forward out, backward in, backward out) bytes per element of an adapted linear's input and
    output width, per token (module docstring)."""
    a, e = float(adapter_element_bytes), ACTIVATION_BYTES
    cast = 1.0 if a != e else 0.0
    drop = (2.0 * a + DROPOUT_MASK_BYTES) if dropout else 0.0
    forward_in = cast * (e + a) + drop + a
    forward_out = 5.0 * a + e + cast * (a + e)
    backward_in = 2.0 * a + drop + cast * (a + e) + 3.0 * e
    backward_out = 2.0 * cast * (a + e) + 4.0 * a
    return forward_in, forward_out, backward_in, backward_out


def lora_bytes_per_token(
    shape: ModelShape,
    targets: str,
    recomputed_share=0.0,
    adapter_element_bytes: float = ACTIVATION_BYTES,
    dropout: bool = False,
) -> np.ndarray:
    """HBM bytes of the adapters' branch per token over all layers, forward and backward (module docstring)."""
    inputs, outputs = adapted_widths(shape, targets)
    forward_in, forward_out, backward_in, backward_out = branch_bytes_per_element(adapter_element_bytes, dropout)
    rho = np.asarray(recomputed_share, float)
    per_in = (1.0 + rho) * forward_in + backward_in
    per_out = (1.0 + rho) * forward_out + backward_out
    return shape.layers * (per_in * inputs + per_out * outputs)
