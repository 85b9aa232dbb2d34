"""From the input schema to the physics' structs: a job's ``ModelShape`` and ``TrainingState``."""

from __future__ import annotations

from dataclasses import replace

from ..errors import JobError
from ..inputs.schema import JobSpec, ModelSpec
from ..physics.adapters import ACTIVATION_BYTES, FP32_ADAPTER_BYTES
from ..physics.constants import (
    ADAFACTOR_FLAT_SECOND_MOMENT_BYTES,
    MIXED_PRECISION_ADAM_BYTES,
    OPTIMIZER_BYTES,
    PAGED_OPTIMIZERS,
    PURE_BF16_OPTIMIZER_BYTES,
    QLORA_BYTES_PER_PARAM,
)
from ..physics.optimizer_step import foreach_temporary_bytes, foreach_traffic_ratio
from ..physics.shapes import ModelShape, TrainingState, lora_adapter_params


def model_shape(model: ModelSpec) -> ModelShape:
    """The transformer's sizes as floats; a params-only model has ``has_shapes=False``."""
    active = float(model.active_params or model.params)
    if not (model.layers and model.hidden and model.heads and model.ffn_hidden and model.vocab):
        return ModelShape(params=float(model.params), active_params=active)
    head_dim = model.head_dim or model.hidden // model.heads
    kv_heads = model.kv_heads or model.heads
    experts = float(model.experts or 0)
    # MoE: moe_ffn_hidden is the expert width and ffn_hidden the dense layers' (without moe_ffn_hidden,
    # ffn_hidden is the expert width and every layer has experts).
    expert_ffn = float(model.moe_ffn_hidden or model.ffn_hidden) if experts else 0.0
    moe_layers = float(model.layers - model.dense_layers) if experts else 0.0
    per_token = (model.experts_per_token or 1) + model.shared_experts
    ffn_active = float(model.ffn_hidden)
    if experts:  # the MLP width a token passes through, averaged over dense and MoE layers
        ffn_active = (model.dense_layers * model.ffn_hidden + moe_layers * expert_ffn * per_token) / model.layers
    # Routed experts: gate, up and down (or two matrices) of the expert width in every MoE layer, at most
    # the parameters outside embeddings (docs/design.md 4.2).
    mlp_matrices = 3.0 if model.gated_mlp else 2.0
    expert_params = experts * moe_layers * mlp_matrices * model.hidden * expert_ffn
    expert_params = min(expert_params, max(0.0, float(model.params) - 2.0 * model.vocab * model.hidden))
    return ModelShape(
        params=float(model.params),
        active_params=active,
        layers=float(model.layers),
        hidden=float(model.hidden),
        heads=float(model.heads),
        kv_width=float(kv_heads * head_dim),
        q_width=float(model.heads * head_dim),
        ffn_active=ffn_active,
        vocab=float(model.vocab),
        gated_mlp=model.gated_mlp,
        has_shapes=True,
        experts=experts,
        experts_per_token=float(model.experts_per_token or 0) if experts else 0.0,
        expert_params=expert_params,
        expert_ffn=expert_ffn,
        moe_layers=moe_layers,
        qk_norm=model.qk_norm,
        sandwich_norms=model.sandwich_norms,
        linear_modules=float(model.linear_modules or 0),
        norm_fp32_weight=model.norm_fp32_weight,
        clamped_swiglu=model.swiglu_limit is not None,
        mla_ranks=float((model.q_lora_rank or 0) + (model.kv_lora_rank or 0)),
        router_fp32=model.router_fp32,
        tied_embeddings=model.tied_embeddings,
        attention_width=float(model.heads * (head_dim + (model.v_head_dim or head_dim)) / 2.0),
        sliding_window=float(model.sliding_window or 0),
        window_layers=float(model.window_layers if model.window_layers is not None else model.layers),
    )


def training_state(
    job: JobSpec,
    shape: ModelShape,
    lora_branches: bool = True,
    lora_adapter_dtype: str | None = None,
    lora_dropout: float | None = None,
) -> TrainingState:
    """Bytes per parameter of the job's method and optimizer, plus a frozen teacher if any; with ``lora_branches``
    (assumptions.lora_branch_traffic, on by default) the linears LoRA adapts, whose branch kernels the time counts,
    their adapters in ``lora_adapter_dtype`` (bf16, fp32, or auto: ``lora_adapter_element_bytes``; None: the job's)
    and with a dropout kernel where ``lora_dropout`` > 0 (PEFT's ``LoraConfig.lora_dropout``; None: the job's).

    QLoRA under a framework the job names as Hugging Face's stack (``fsdp``: HF Trainer / Accelerate, Lightning;
    ``deepspeed``) quantises through bitsandbytes' ``Linear4bit`` (PEFT's QLoRA guides, bitsandbytes' "FSDP-QLoRA"),
    which keeps its inputs for backward (``memory_terms.bnb_saved_input_bytes``); torchtune's QLoRA is torchao's
    NF4Tensor (``linear_nf4`` keeps the weight alone), so a job left at ``framework: auto`` is not charged it."""
    bnb = job.method == "qlora" and job.framework in ("fsdp", "deepspeed")
    return replace(
        _training_state(job, shape),
        bnb_saved_inputs=bnb,
        lora_targets=job.lora_targets if lora_branches and job.method != "full" and shape.has_shapes else "",
        lora_adapter_bytes=lora_adapter_element_bytes(
            job, job.lora_adapter_dtype if lora_adapter_dtype is None else lora_adapter_dtype
        ),
        lora_dropout=(job.lora_dropout if lora_dropout is None else lora_dropout) > 0.0,
        teacher_params=float(job.teacher_params or 0.0),
        paged_optimizer=job.optimizer in PAGED_OPTIMIZERS,
        optimizer_in_backward=job.optimizer_in_backward,
        pipeline_split=job.pipeline_split,
        gradient_accumulator=job.gradient_accumulator,
        tp_replicated_params=0.0 if job.embedding_parallel else float(shape.vocab * shape.hidden),
        update_traffic_ratio=(
            foreach_traffic_ratio(job.optimizer, job.master_weights)
            if job.optimizer_implementation == "foreach"
            else 1.0
        ),
        step_temporary_bytes=(
            foreach_temporary_bytes(job.optimizer, job.master_weights)
            if job.optimizer_implementation == "foreach" and job.bytes_per_param is None
            else 0.0
        ),
        # (a stated bytes_per_param stands as given)
        flat_optimizer_extra_bytes=(
            ADAFACTOR_FLAT_SECOND_MOMENT_BYTES[job.master_weights]
            if job.optimizer == "adafactor" and job.bytes_per_param is None
            else 0.0
        ),
    )


def lora_adapter_element_bytes(job: JobSpec, adapter_dtype: str = "auto") -> float:
    """Bytes of a LoRA adapter element in the step's branch kernels (physics/adapters.py): as ``adapter_dtype`` states
    (bf16: 2, fp32: 4), else (auto) 4 where the job trains a 16-bit model without autocast (``master_weights: false``)
    through PEFT on transformers' eager modeling code (``kernels: eager`` under ``framework`` fsdp, deepspeed or auto:
    not Megatron's or torchtitan's), and 2 otherwise.

    PEFT's ``get_peft_model(..., autocast_adapter_dtype=True)`` (huggingface/peft src/peft/mapping.py @ v0.14.0 and
    5d602fd; ``BaseTuner._cast_adapter_dtype``) upcasts the adapters of a bf16 / fp16 model to fp32 and
    ``lora.Linear.forward`` casts each input to them, so without ``torch.autocast`` the branch runs in fp32. Under
    autocast (``master_weights`` true: HF Trainer's bf16) the GEMMs take 16-bit copies, and the branch is counted as
    16-bit: under by the input's casts (PyTorch's ops on PEFT's forward under ``torch.autocast``: 36 bytes a token and
    input element without recompute, against 12 in 16 bits and 30 in fp32; 20 an output element against 20 and 56).
    torchtune's ``LoRALinear`` (``kernels: fused`` in its rows) and Megatron's adapters keep the model's dtype."""
    if adapter_dtype in ("bf16", "fp32"):
        return FP32_ADAPTER_BYTES if adapter_dtype == "fp32" else ACTIVATION_BYTES
    peft_pure_16bit = (
        job.method in ("lora", "qlora")
        and job.framework in ("auto", "fsdp", "deepspeed")
        and job.kernels == "eager"
        and not job.master_weights
    )
    return FP32_ADAPTER_BYTES if peft_pure_16bit else ACTIVATION_BYTES


def optimizer_bytes_per_param(job: JobSpec) -> float:
    """Optimizer bytes per trained parameter of the job's optimizer; pure bf16 (torchtune dtype: bf16, no fp32
    master copy) keeps the optimizer state in the parameters' dtype."""
    return OPTIMIZER_BYTES[job.optimizer] if job.master_weights else PURE_BF16_OPTIMIZER_BYTES[job.optimizer]


def _training_state(job: JobSpec, shape: ModelShape) -> TrainingState:
    optimizer = optimizer_bytes_per_param(job)
    if job.method == "full":
        if job.bytes_per_param is not None:
            # Keep the ZeRO split (2 : 2 : 12) so sharding still divides the right parts.
            scale = job.bytes_per_param / MIXED_PRECISION_ADAM_BYTES
            return TrainingState(shape.params, 2.0 * scale, 0.0, 2.0 * scale, 12.0 * scale)
        return TrainingState(shape.params, 2.0, 0.0, 2.0, optimizer)
    if job.trainable_params is not None:
        adapters = float(job.trainable_params)
    elif shape.has_shapes:
        adapters = lora_adapter_params(shape, job.lora_rank, job.lora_targets)
    else:
        raise JobError(
            f"{job.method} needs the model's shapes (layers, hidden, heads, ffn_hidden, vocab) to size the "
            "adapters, or job.trainable_params (e.g. 40M)",
            field="job.model",
        )
    base = QLORA_BYTES_PER_PARAM if job.method == "qlora" else 2.0
    per_adapter = job.bytes_per_param if job.bytes_per_param is not None else 4.0 + optimizer
    scale = per_adapter / (4.0 + optimizer)
    return TrainingState(
        trainable_params=adapters,
        weight_bytes=base,
        adapter_weight_bytes=2.0 * scale,
        grad_bytes=2.0 * scale,
        optimizer_bytes=optimizer * scale,
        lora=True,
        quantized_base=job.method == "qlora",
        # bitsandbytes quantises nn.Linear layers only: the embeddings stay in 16 bits, and so does the LM
        # head (PEFT/transformers skip lm_head); untied models hold two V x h matrices.
        bf16_base_params=min(shape.embedding_params, 0.5 * shape.params) if job.method == "qlora" else 0.0,
    )
