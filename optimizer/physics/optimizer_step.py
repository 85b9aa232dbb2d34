"""The optimizer step's HBM traffic by implementation: one fused kernel, or PyTorch's foreach path (issue 48).

The step time (physics/time.py ``_update_s``) counts a fused step: every state, gradient and weight byte read and
written once (apex's and Transformer Engine's FusedAdam under Megatron-Core, DeepSpeed's FusedAdam,
``torch.optim.AdamW(fused=True)``, which torchtitan's ``optimizer.implementation = "fused"``, torchtune's configs'
``fused: True`` and the Hugging Face Trainer's ``adamw_torch_fused`` run). ``torch.optim.AdamW`` left at its defaults
takes the foreach path on CUDA (torch/optim/optimizer.py ``_default_to_fused_or_foreach``: fused only when asked),
as a plain PyTorch loop, Lightning and the Hugging Face Trainer's ``adamw_torch`` (its default until transformers
switched to ``adamw_torch_fused`` for torch >= 2.8, huggingface/transformers PR 37358) run it: one multi-tensor
kernel per operation, each a pass over every parameter. ``_multi_tensor_adamw`` (torch/optim/adamw.py, torch 2.x),
per element, in the passes each operation reads and writes:

- ``_foreach_mul_(params, 1 - lr wd)``: the parameter 2; ``_foreach_lerp_(exp_avgs, grads, 1 - beta1)``: the first
  moment 2 and the gradient 1; ``_foreach_mul_(exp_avg_sqs, beta2)`` then ``_foreach_addcmul_(exp_avg_sqs, grads,
  grads, 1 - beta2)``: the second moment 2 + 2 and the gradient 1;
- ``_foreach_sqrt(exp_avg_sqs)``: the second moment 1 and a new denominator 1; ``_foreach_div_`` and
  ``_foreach_add_(eps)`` on it: 2 + 2; ``_foreach_addcdiv_(params, exp_avgs, denom, step_size)``: the parameter 2,
  the first moment 1, the denominator 1.

That is 4 passes over the parameter, 14 over state-sized tensors (the moments and the denominator, in the state's
dtype) and 2 over the gradient, against the fused kernel's 2, 2 x 2 and 1; with an fp32 master copy the 16-bit
weights are written from it in either (2 + 4 bytes). SGD with momentum (``_multi_tensor_sgd``: the weight decay
into the gradient 3, the momentum buffer 2 + 3, the parameter 3) makes 11 passes where a fused step makes 5.
The other optimizers run their own kernels (bitsandbytes' 8-bit and paged Adam, Adafactor's factored state) and
keep the fused count.
"""

from __future__ import annotations

# Passes per element of foreach AdamW (the module's list): over the parameter (its master copy where there is
# one), over state-sized tensors (two moments and the denominator) and over the gradient
FOREACH_ADAMW_PARAM_PASSES = 4.0
FOREACH_ADAMW_STATE_PASSES = 14.0
FOREACH_ADAMW_GRAD_PASSES = 2.0
# SGD with momentum, foreach against fused (the module's list)
FOREACH_SGD_PASSES = 11.0
FUSED_SGD_PASSES = 5.0
MASTER_BYTES = 4.0  # an fp32 master copy
WEIGHT_COPY_BYTES = MASTER_BYTES + 2.0  # reading the master copy and writing the 16-bit weights


def foreach_traffic_ratio(optimizer: str, master_weights: bool, grad_bytes: float = 2.0) -> float:
    """The foreach step's HBM bytes over the fused step's that physics/time.py ``_update_s`` counts (2 x (state +
    gradient + weight) bytes a parameter): AdamW 2.56 with an fp32 master copy, 2.5 in pure bf16; SGD 11 / 5; 1 for
    the optimizers with kernels of their own."""
    if optimizer == "sgd":
        return FOREACH_SGD_PASSES / FUSED_SGD_PASSES
    if optimizer != "adamw":
        return 1.0
    param_bytes = MASTER_BYTES if master_weights else 2.0
    moment_bytes = 4.0 if master_weights else 2.0
    copy = WEIGHT_COPY_BYTES if master_weights else 0.0
    foreach = (
        FOREACH_ADAMW_PARAM_PASSES * param_bytes
        + FOREACH_ADAMW_STATE_PASSES * moment_bytes
        + FOREACH_ADAMW_GRAD_PASSES * grad_bytes
        + copy
    )
    state_bytes = (MASTER_BYTES if master_weights else 0.0) + 2.0 * moment_bytes
    fused = 2.0 * (state_bytes + grad_bytes + 2.0)
    return foreach / fused


def foreach_temporary_bytes(optimizer: str, master_weights: bool) -> float:
    """Bytes per parameter foreach AdamW allocates for its step: ``_foreach_sqrt(exp_avg_sqs)`` makes a new list,
    the denominator (the module's list), in the second moment's dtype (fp32 beside an fp32 master copy, else the
    parameters' 16 bits), freed when the step returns; the other operations work in place. 0 for the fused step
    and the optimizers with kernels of their own."""
    if optimizer != "adamw":
        return 0.0
    return MASTER_BYTES if master_weights else 2.0
