"""Which framework each layout of a grid is costed under (``label_layouts``), and per layout the costing rules
of the framework it is labelled with: ZeRO-3 gathers per step, fused kernels, the loss's memory, partial
recompute and sequence parallelism (the rules themselves are ``frameworks.FRAMEWORKS``'; docs/design.md 3.5)."""

from __future__ import annotations

import numpy as np

from ..physics.constants import LOGITS_BYTES_PER_VOCAB
from ..physics.layout import RECOMPUTE_LEAST, Recompute
from ..physics.loss_time import LOSS_TRAFFIC_BYTES_PER_LOGIT
from .frameworks import CODES, FRAMEWORKS, PREFERENCE


def zero3_per_step(framework_codes, pp, policy: str = "auto") -> np.ndarray:
    """Per layout, whether ZeRO-3 gathers once per step (weights held unsharded over the micro-batches,
    gradients reduced once) rather than every micro-batch: ``policy`` (assumptions.zero3_gathers) 'step' or
    'micro_batch' for every layout, or 'auto' for the rule of the framework each layout is labelled with."""
    codes, pp = np.asarray(framework_codes), np.asarray(pp)
    if policy != "auto":
        return np.full(np.shape(codes), policy == "step")
    held = np.array([FRAMEWORKS[name].zero3_step_gathers_with_pp for name in PREFERENCE] + [False])
    return held[np.where(codes >= 0, codes, len(PREFERENCE))] & (pp > 1)


def _by_framework(framework_codes, attribute: str, framework: str, auto_value):
    """Per layout, ``Framework.<attribute>`` of the framework it is labelled with; a layout no framework runs
    (code -1) takes the job's framework's, ``auto_value`` under auto."""
    codes = np.asarray(framework_codes)
    unlabelled = getattr(FRAMEWORKS[framework], attribute) if framework != "auto" else auto_value
    table = np.array([getattr(FRAMEWORKS[name], attribute) for name in PREFERENCE] + [unlabelled])
    return table[np.where(codes >= 0, codes, len(PREFERENCE))]


def fused_kernels(framework_codes, kernels: str, framework: str, compiled: bool = False) -> np.ndarray:
    """Per layout, whether its activations are those of fused kernels: job.kernels 'fused' or 'eager' for
    every layout, or under 'auto' the kernels of the framework each layout is labelled with (so a plan
    labelled megatron is costed with the kernels Megatron runs), fused for every layout under torch.compile
    (``compiled``: job.compile; Inductor fuses the element-wise chains and saves what the fused kernels keep);
    a layout no framework runs takes the job's framework's."""
    if kernels != "auto" or compiled:
        return np.full(np.shape(framework_codes), kernels == "fused" or (kernels == "auto" and compiled))
    return _by_framework(framework_codes, "fused_kernels", framework, False)


def loss_bytes_per_vocab(framework_codes, loss: str, framework: str) -> np.ndarray:
    """Per layout, the loss's memory per token and vocabulary entry: job.loss chunked or fused for every layout,
    standard as the framework each layout is labelled with computes it (a layout no framework runs takes the job's
    framework's, PyTorch's under auto)."""
    if loss != "standard":
        return np.full(np.shape(framework_codes), LOGITS_BYTES_PER_VOCAB[loss])
    auto = LOGITS_BYTES_PER_VOCAB["standard"]
    return _by_framework(framework_codes, "standard_loss_bytes_per_vocab", framework, auto)


def loss_traffic_bytes_per_logit(framework_codes, loss: str, framework: str, compiled: bool = False) -> np.ndarray:
    """Per layout, the loss's kernels' HBM bytes per token and vocabulary entry (physics/loss_time.py): job.loss's,
    chunked as the framework each layout is labelled with runs it (Transformer Engine's fused cross-entropy under
    Megatron-Core: ``Framework.fused_chunked_loss``; a layout no framework runs takes the job's framework's), and
    under torch.compile (``compiled``) one fused pass over the bf16 logits as flash-attn's (Inductor fuses the upcast,
    log-softmax and gather: torchtitan and torchtune compile the loss with the model, OLMo-core's compile_loss, a
    Hugging Face model's loss inside its compiled forward) on the layouts torch.compile applies to: not Megatron-Core's,
    which runs Transformer Engine's layers uncompiled."""
    traffic = np.full(np.shape(framework_codes), LOSS_TRAFFIC_BYTES_PER_LOGIT[loss])
    if loss == "chunked":
        fused = _by_framework(framework_codes, "fused_chunked_loss", framework, False)
        traffic = np.where(fused, LOSS_TRAFFIC_BYTES_PER_LOGIT["flash"], traffic)
    if compiled and loss in ("standard", "chunked", "bf16"):
        eager_stack = ~_by_framework(framework_codes, "fused_kernels", framework, False)
        traffic = np.where(eager_stack, LOSS_TRAFFIC_BYTES_PER_LOGIT["flash"], traffic)
    return traffic


def fp32_reduce(framework_codes, framework: str, zero, gradient_dtype: str, master_weights: bool) -> np.ndarray:
    """Per layout, whether its data-parallel gradient reduce runs in fp32 (twice a bf16 reduce's traffic):
    job.gradient_dtype bf16 or fp32 for every layout, or under auto its framework's default with fp32 master weights
    (``Framework.fp32_reduce_below_zero``; a layout no framework runs takes the job's framework's, bf16 under auto)."""
    if gradient_dtype != "auto":
        return np.full(np.shape(framework_codes), gradient_dtype == "fp32")
    below = _by_framework(framework_codes, "fp32_reduce_below_zero", framework, 0)
    return (np.asarray(zero) < below) & master_weights


def fp32_gradient_buffer(framework_codes, framework: str, gradient_dtype: str) -> np.ndarray:
    """Per layout, whether its gradients take an fp32 buffer of their own (job.gradient_dtype fp32 under a framework
    that keeps one beside its 16-bit weights, ``Framework.fp32_gradient_buffer``: Megatron-Core's main_grad)."""
    if gradient_dtype != "fp32":
        return np.zeros(np.shape(framework_codes), bool)
    return _by_framework(framework_codes, "fp32_gradient_buffer", framework, True)


def gradient_dtype_of(framework: str, zero: int, gradient_dtype: str, master_weights: bool) -> str:
    """The dtype one plan's gradients reduce in (bf16 or fp32): ``fp32_reduce`` of its framework and ZeRO stage."""
    fp32 = fp32_reduce(np.array([CODES[framework]]), framework, np.array([zero]), gradient_dtype, master_weights)
    return "fp32" if bool(fp32[0]) else "bf16"


def partial_recompute(framework_codes, framework: str) -> np.ndarray:
    """Per layout, its framework's partial recompute (``Framework.partial_recompute``; a layout no framework runs
    takes the job's framework's, none under auto)."""
    return _by_framework(framework_codes, "partial_recompute", framework, "none")


def sequence_parallel(framework_codes, framework: str) -> np.ndarray:
    """Per layout, whether TP splits the sequence through the norms and residuals too: its framework's rule
    (a layout no framework runs takes the job's framework's, Megatron's under auto)."""
    return _by_framework(framework_codes, "sequence_parallel", framework, True)


def ddp_gradient_copy(framework_codes, framework: str) -> np.ndarray:
    """Per layout, whether its framework replicates without ZeRO through torch DDP, whose buckets copy every gradient
    (``Framework.ddp_gradient_copy``; physics/memory_terms.py ddp_bucket_bytes). Under auto, an unlabelled layout:
    no."""
    return _by_framework(framework_codes, "ddp_gradient_copy", framework, False)


def frees_gradients(framework_codes, framework: str) -> np.ndarray:
    """Per layout, whether its framework's loop frees the gradients after each optimizer step
    (``Framework.frees_gradients``; physics/memory_terms.py not_concurrent_bytes). Under auto, an unlabelled
    layout: no."""
    return _by_framework(framework_codes, "frees_gradients", framework, False)


def grouped_gemm_per_expert(framework_codes, framework: str, ep) -> np.ndarray:
    """Per layout, whether its framework's expert GEMMs loop over the local experts on the host
    (``Framework.grouped_gemm_per_expert``; a layout no framework runs takes the job's framework's, none under
    auto): not at EP 1 under a framework that then trains transformers' own experts (``Framework.hf_experts``:
    DeepSpeed-MoE's layers come with EP)."""
    looped = _by_framework(framework_codes, "grouped_gemm_per_expert", framework, False)
    hf = _by_framework(framework_codes, "hf_experts", framework, False)
    return looped & ~(hf & (np.asarray(ep) == 1))


def expert_loop(framework_codes, framework: str, ep, zero, eager: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per layout, whether an MoE's experts run as transformers' eager loop (``eager``: assumptions.experts_
    implementation; a framework training transformers' modules at EP 1, ``Framework.hf_experts``), and whether
    ZeRO-3 fetches each module's parameters in a hook of its own (``Framework.zero3_module_fetch`` at ZeRO-3:
    physics/zero3_hooks.py; the experts' linears too where they loop)."""
    fetched = _by_framework(framework_codes, "zero3_module_fetch", framework, False) & (np.asarray(zero) >= 3)
    if not eager:
        return np.zeros(np.shape(framework_codes), bool), fetched
    return _by_framework(framework_codes, "hf_experts", framework, False) & (np.asarray(ep) == 1), fetched


def label_layouts(
    grid: dict[str, np.ndarray], layers: int, framework: str, kernels: str = "auto", zero3_gathers: str = "auto"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which frameworks each layout is costed under: (layout index, framework code into ``PREFERENCE``) pairs,
    ordered by layout, and the indices of the layouts no framework runs.

    Under a named framework, a layout it runs is labelled with it. Under ``auto``, a layout is labelled with the
    first framework in ``PREFERENCE`` order that runs it (the simplest tool) and again with the first of any
    other framework that runs it but that gpuplan costs differently (fused kernels under job.kernels auto, ZeRO-3
    gathers once per step with PP under assumptions.zero3_gathers auto, sequence parallelism with TP, the fewest
    layers recomputed under full recompute), so that a layout that fits or runs
    faster only under a less-preferred framework is still a candidate (docs/design.md section 3.5)."""
    names = PREFERENCE if framework == "auto" else (framework,)
    n = len(grid["tp"])
    per_step_with_pp = (grid["pp"] > 1) & (grid["zero"] >= 3)
    least = (grid["recompute"] == Recompute.FULL) & (grid.get("recompute_layers", 0 * grid["tp"]) == RECOMPUTE_LEAST)
    # per layout, which costings (fused kernels x per-step gathers x sequence parallelism x partial recompute)
    # are taken
    labelled = np.zeros((n, 16), dtype=bool)
    index, codes = [], []
    for name in names:
        fw = FRAMEWORKS[name]
        costing = (
            (2 * (kernels == "auto" and fw.fused_kernels))
            + ((zero3_gathers == "auto" and fw.zero3_step_gathers_with_pp) & per_step_with_pp)
            + 4 * (fw.sequence_parallel & (grid["tp"] > 1))
            + 8 * ((fw.partial_recompute != "none") & least)
        )
        costing = np.broadcast_to(np.asarray(costing, dtype=np.int64), (n,))
        new = fw.runnable(grid, layers) & ~labelled[np.arange(n), costing]
        labelled[np.flatnonzero(new), costing[new]] = True
        index.append(np.flatnonzero(new))
        codes.append(np.full(int(new.sum()), CODES[name]))
    index_all, codes_all = np.concatenate(index), np.concatenate(codes)
    order = np.lexsort((codes_all, index_all))
    return index_all[order], codes_all[order], np.flatnonzero(~labelled.any(axis=1))
