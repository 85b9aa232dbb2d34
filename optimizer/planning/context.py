"""A job resolved against a catalog: the numbers the physics needs, and the hardware rows it may use.

``JobContext`` is built once per query from a ``Problem`` and a ``Catalog``; it checks the
cross-file rules (a params-only model needs an explicit activation reserve, a precision the GPU
supports) and knows each row's usable memory under the chosen memory basis.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GpuplanError, JobError
from ..inputs import units
from ..inputs.catalog import host_gpus, offers_for, usable_memory_bytes
from ..inputs.schema import Catalog, Offer, Problem, Sku
from ..physics.attention import KERNEL_NAMES, attention_efficiency, speed_over_flash2
from ..physics.constants import (
    COMPUTE_OPTIMAL_TOKENS_PER_PARAM,
    DEFAULT_COMPUTE_EFFICIENCY,
    FALLBACK_COMPUTE_EFFICIENCY,
    FINETUNE_BATCH_TOKENS,
    FREE_BATCH_MAX_OVER_OPTIMAL,
    LOGITS_BYTES_PER_VOCAB,
    MOE_HOST_S_PER_LAYER,
    MOE_HOST_S_PER_LOCAL_EXPERT,
    OPTIMAL_BATCH_COEFFICIENT,
    OPTIMAL_BATCH_EXPONENT,
)
from ..physics.efficiency import COMPILED_RATIO, FITTED_FUSED_RATIO, family_of, matmul_efficiency, ridge
from ..physics.layout import RunSettings
from ..physics.recompute_modules import DEFAULT_RECOMPUTE_MODULES
from ..physics.shapes import ModelShape, TrainingState
from . import anchors as anchoring
from .anchors import Anchor
from .frameworks import FRAMEWORKS
from .model_state import model_shape, training_state


@dataclass(frozen=True)
class HardwareRow:
    """One way to rent hardware: an offer (or a bare SKU), a node count and GPUs per node."""

    sku: Sku
    offer: Offer | None
    nodes: int
    gpus_per_node: int
    spot: bool = False

    @property
    def price_usd_per_gpu_hour(self) -> float | None:
        if self.offer is None:
            return None
        return self.offer.spot_price_usd_per_gpu_hour if self.spot else self.offer.price_usd_per_gpu_hour

    @property
    def preemptions_per_node_hour(self) -> float:
        return self.offer.spot_preemptions_per_node_hour if self.spot and self.offer else 0.0

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def gpus_per_host(self) -> int:
        """GPUs per operating-system host: the SKU's (NVL72: a compute tray of 4), or the largest divisor of the
        GPUs per node below it; the whole node where NVLink does not span hosts."""
        return host_gpus(self.gpus_per_node, self.sku.gpus_per_host)

    @property
    def billed_gpus(self) -> int:
        if self.offer is not None and self.offer.whole_nodes and self.nodes > 1:
            return self.nodes * self.offer.gpus_per_node
        return self.gpus

    @property
    def offer_name(self) -> str:
        """The offer's name, or the SKU's for a bare (unpriced) row."""
        return self.offer.name if self.offer is not None else self.sku.name

    @property
    def key(self) -> str:
        return f"{self.offer.name if self.offer else self.sku.name}{':spot' if self.spot else ''}:{self.nodes}x{self.gpus_per_node}"


def capacity_bytes(row: HardwareRow, basis: str) -> tuple[float, str]:
    """Usable memory per GPU and the basis actually used (falls back delivered > reported > label)."""
    sku, offer = row.sku, row.offer
    if basis == "board" and sku.board_memory_bytes:
        return sku.board_memory_bytes / sku.gpus_per_node, "board"
    if basis == "label":
        return sku.memory_label_bytes, "label"
    if basis in ("delivered", "board"):
        return usable_memory_bytes(sku, offer)
    if sku.memory_reported_bytes:
        return sku.memory_reported_bytes, "reported"
    return sku.memory_label_bytes, "label"


@dataclass(frozen=True)
class Calibration:
    """Multipliers fitted to measurements (``planning.calibration``); identity when nothing was measured."""

    compute: float = 1.0  # on the compute efficiency
    memory: float = 1.0  # on the achieved HBM bandwidth
    network: float = 1.0  # on the link efficiency
    reserve_delta_bytes: float = 0.0  # measured peak minus predicted, added to the framework reserve
    points: tuple = ()  # (sku name, gpus, nodes) of each measured configuration
    # |log(predicted / measured)| at each point after the fit: 0 where one measurement sets its own factor,
    # more where measurements sharing a bound share the geometric mean of their factors
    misses: tuple = ()
    # (point, memory bytes, capacity bytes) of each measured configuration whose best layout does not fit
    # gpuplan's memory model: the run saved memory in a way gpuplan does not model
    unfit: tuple = ()
    # what the shared factors still miss at each measured configuration (``anchors``): every row takes a
    # correction from those it is nearest to, so a measured configuration predicts its measurement
    anchors: tuple[Anchor, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.points)

    def speed_factor(self, row: HardwareRow) -> float:
        """The row's throughput correction from the anchors (1 without any)."""
        if not self.anchors:
            return 1.0
        return anchoring.speed_factor(self.anchors, row.sku.name, row.sku.architecture, row.gpus, row.nodes)

    def reserve_delta(self, row: HardwareRow) -> float:
        """The row's framework-reserve correction in bytes: the anchors' measured peaks it leans on, else the
        shared ``reserve_delta_bytes``."""
        if not self.anchors:
            return self.reserve_delta_bytes
        return anchoring.reserve_delta(
            self.anchors, self.reserve_delta_bytes, row.sku.name, row.sku.architecture, row.gpus, row.nodes
        )

    def leaning(self, row: HardwareRow) -> anchoring.Leaning | None:
        """The measurements a row's prediction leans on."""
        return anchoring.leaning(self.anchors, row.sku.name, row.sku.architecture, row.gpus, row.nodes)


@dataclass(frozen=True)
class JobContext:
    """One job resolved against one catalog: what every planning step reads (data only)."""

    problem: Problem
    catalog: Catalog
    shape: ModelShape
    train: TrainingState
    activation_reserve: str | float  # "auto", bytes, or a fraction of capacity (< 1)
    framework_overhead: str | float
    calibration: Calibration = Calibration()

    @property
    def job(self):
        return self.problem.job

    @property
    def assumptions(self):
        return self.problem.assumptions

    @property
    def constraints(self):
        return self.problem.constraints

    def compute_efficiency(self, sku: Sku) -> float:
        """Achieved share of the 16-bit dense peak on the matmuls: the job's stated value, the catalog row's, the
        fitted model for the SKU's family, the model's width and the SKU's 16-bit ridge (its peak over the HBM
        bandwidth; physics/efficiency.py) for a dense model, or the per-form-factor default;
        times a calibration from measurements. A mixture of experts keeps the default: the model is fitted on
        dense rows, and the MoE terms (the host time per layer, the grouped GEMMs) were fitted with it."""
        if self.assumptions.mfu != "auto":
            base = float(self.assumptions.mfu)
        elif self.assumptions.matmul_efficiency != "auto":
            base = float(self.assumptions.matmul_efficiency)
        elif sku.default_mfu:
            base = sku.default_mfu
        else:
            # a share of the 16-bit peak whatever the precision: a low one speeds up the GEMM kernels' share of
            # the time (physics/precision.py)
            ridge_point = ridge(self.attention_peak_flops(sku), sku.hbm_bandwidth_gb_per_s * 1e9)
            fitted = None
            if not self.shape.experts:
                fitted = matmul_efficiency(
                    sku.architecture, sku.form_factor, self.job.precision, self.shape.hidden, ridge_point
                )
            default = DEFAULT_COMPUTE_EFFICIENCY.get(sku.form_factor, FALLBACK_COMPUTE_EFFICIENCY)
            base = fitted if fitted is not None else default
        return base * self.calibration.compute

    @property
    def framework_named(self) -> bool:
        """Whether the job names its framework (a check's pin on a framework-auto question,
        job.framework_pinned, costs as the auto question does): the named framework's kernels apply."""
        return self.job.framework != "auto" and not self.job.framework_pinned

    def stated_efficiency(self, sku: Sku) -> bool:
        """Whether the job or the catalog row states the efficiency as the stack ran it (assumptions.mfu or
        matmul_efficiency, a row's default_mfu): no kernel ratio (fused, compiled) then applies on top."""
        a = self.assumptions
        return a.mfu != "auto" or a.matmul_efficiency != "auto" or bool(sku.default_mfu)

    def fused_efficiency_ratio(self, sku: Sku) -> float:
        """How much more of the peak a layout running fused Transformer Engine kernels (Megatron-Core) reaches
        than ``compute_efficiency``, which stands for eager kernels: the fitted ratio (physics/efficiency.py,
        FITTED_FUSED_RATIO) where the efficiency is gpuplan's model or default and the job names its framework;
        1 where the job or the catalog row states the efficiency, and under framework auto, where each layout
        runs in the simplest framework that holds it and every layout is costed at the eager kernels'
        efficiency (a faster framework's copy of a layout would otherwise lose to a slower one that fits, and
        win once a measured peak moves the reserve). It applies where a layout's framework runs Transformer
        Engine's layers (planning/frameworks.py fused_kernels) and the job does not state eager kernels
        (``kernel_speed``)."""
        stated = self.stated_efficiency(sku)
        # measured on Hopper and Blackwell rows only: GPUs with an FP8 rate, Transformer Engine's generation
        measured_on = bool(sku.dense_fp8_tflops)
        fused = self.framework_named or self.kernels_stated_fused
        return FITTED_FUSED_RATIO if fused and measured_on and not stated else 1.0

    @property
    def kernel_speed(self) -> str:
        """Whose kernels' speed every layout is costed at: 'fused' (Transformer Engine's: kernels_stated_fused),
        'eager' (job.kernels eager: an eager PyTorch stack even on a Megatron-style layout, nanotron's for one)
        or 'auto' (each layout's framework's; planning/labels.py fused_kernels)."""
        if self.kernels_stated_fused:
            return "fused"
        return "eager" if self.job.kernels == "eager" else "auto"

    @property
    def kernels_stated_fused(self) -> bool:
        """Whether the job states its stack runs Transformer Engine's fused kernels whatever the framework
        (job.kernels fused without compile: NeMo AutoModel's te backend under FSDP2, for one): every layout is
        then costed at the fused-kernel ratio, as a Megatron layout is (under compile the ratio is Inductor's)."""
        return self.job.kernels == "fused" and not self.job.compile

    def attention_efficiency(self, sku: Sku, fused: bool) -> float | None:
        """The attention kernels' share of the 16-bit peak on this GPU at the job's sequence length, times the
        calibration (physics/attention.py), for a layout whose framework runs Transformer Engine's layers
        (``fused``: cuDNN attention where the job names that framework; under framework auto every layout is
        costed at the eager stack's kernels, as the matmuls are) or not (PyTorch SDPA's FlashAttention-2), or
        cuDNN's (SDPA's memory-efficient kernel's) for every layout under job.attention cudnn (efficient). None
        where no figure is published for the GPU's family (the matmul efficiency then applies; the efficient
        kernel's slowdown over FlashAttention-2 is taken off it), under eager attention, or where the job or the
        catalog row states the whole step's efficiency."""
        if self.assumptions.mfu != "auto" or sku.default_mfu or self.job.attention == "eager":
            return None
        family = family_of(sku.architecture, sku.form_factor)
        kernel = self.attention_kernel(fused)
        efficiency = attention_efficiency(kernel, family, float(self.job.seq_len))
        if (
            efficiency is None
        ):  # no figure for the GPU: the matmuls' rate, times the kernel's own ratio where it has one
            ratio = speed_over_flash2(kernel, family)
            return None if ratio == 1.0 else self.compute_efficiency(sku) * ratio
        return efficiency * self.calibration.compute

    def attention_kernel(self, fused: bool) -> str:
        """The attention kernel a layout runs (physics/attention.py KERNELS): the one job.attention names (cudnn,
        efficient, flash3), else Transformer Engine's cuDNN attention where the named framework runs its layers
        (Megatron-Core; a PyTorch stack on Transformer Engine's linears and norms, kernels: fused, attends as
        job.attention says), else PyTorch SDPA's FlashAttention-2."""
        if self.job.attention in KERNEL_NAMES:  # a kernel named as such (flash and eager are not)
            return self.job.attention
        te_attention = fused and self.framework_named and FRAMEWORKS[self.job.framework].fused_kernels
        return "cudnn" if te_attention else "flash2"

    def compiled_efficiency_ratio(self, sku: Sku) -> float:
        """How much more of the peak a compiled eager PyTorch stack reaches than ``compute_efficiency``
        (physics/efficiency.py COMPILED_RATIO: published compiled over eager speed-ups) under job.compile; 1
        without it, and where the job or the catalog row states the efficiency (a stated figure is the stack's
        as it ran). It applies to every layout whose framework does not run Transformer Engine's fused layers,
        on every GPU (Inductor fuses on any)."""
        stated = self.stated_efficiency(sku)
        return COMPILED_RATIO if self.job.compile and not stated else 1.0

    @property
    def compiled_loss(self) -> bool:
        """Whether job.compile fuses the loss's kernels (physics/loss_time.py): not where the job states the whole
        step's efficiency (assumptions.mfu), which is the stack's as it ran, compiled loss included."""
        return self.job.compile and self.assumptions.mfu == "auto"

    def host_link_bytes_per_s(self, sku: Sku) -> float:
        """GPU-host bandwidth per GPU per direction (activation and optimizer offload): the job's
        assumptions.host_link_gb_per_s_per_gpu where it states one, else the SKU's own link (a Grace
        superchip's NVLink-C2C: catalogs/hardware.yaml host_link_gb_per_s), else the PCIe default."""
        a = self.assumptions
        stated = "host_link_gb_per_s_per_gpu" in a.model_fields_set
        return 1e9 * ((None if stated else sku.host_link_gb_per_s) or a.host_link_gb_per_s_per_gpu)

    def is_measured(self, row: HardwareRow) -> bool:
        return (row.sku.name, row.gpus, row.nodes) in self.calibration.points

    def measured_miss(self, row: HardwareRow) -> float:
        """How far the calibrated model misses this measured configuration's throughput, as |log ratio|."""
        misses = dict(zip(self.calibration.points, self.calibration.misses))
        return misses.get((row.sku.name, row.gpus, row.nodes), 0.0)

    def attention_peak_flops(self, sku: Sku) -> float | None:
        """The 16-bit peak attention kernels run at (fp16 takes the bf16 rate)."""
        tflops = sku.dense_tflops("bf16")
        return None if tflops is None else tflops * 1e12

    def peak_flops(self, sku: Sku) -> float | None:
        tflops = sku.dense_tflops(self.job.precision)
        return None if tflops is None else tflops * 1e12

    @property
    def max_free_batch_sequences(self) -> int:
        """With job.global_batch unset, the largest global batch gpuplan chooses: twice DeepSeek's
        compute-optimal batch for this job's compute, in sequences (docs/design.md section 3.2)."""
        compute_flops = 6.0 * self.shape.active_params * self.job.total_tokens
        optimal_tokens = OPTIMAL_BATCH_COEFFICIENT * compute_flops**OPTIMAL_BATCH_EXPONENT
        return max(1, int(FREE_BATCH_MAX_OVER_OPTIMAL * optimal_tokens / self.job.seq_len))

    @property
    def is_finetune(self) -> bool:
        """Adapters (LoRA, QLoRA), a teacher, or a full-parameter run on fewer tokens than compute-optimal
        pre-training takes (``COMPUTE_OPTIMAL_TOKENS_PER_PARAM``): a pre-trained model trained further."""
        job = self.job
        if job.method != "full" or job.teacher_params:
            return True
        return job.total_tokens < COMPUTE_OPTIMAL_TOKENS_PER_PARAM * self.shape.params

    @property
    def recipe_batch_sequences(self) -> int | None:
        """With job.global_batch unset, a fine-tune's batch as the published recipes set it
        (``FINETUNE_BATCH_TOKENS`` a step, in sequences as a batch in tokens is read), at most the job's
        tokens; None for a pre-training (its batch is free). Layouts make it exactly; a hand-picked one
        (``check``) whose GPUs do not divide it makes the least batch above it (``candidates._accumulations``:
        33 sequences on 3 GPUs, 64 on 64 data-parallel ranks)."""
        job = self.job
        if job.global_batch is not None or not self.is_finetune:
            return None
        most = max(1, int(job.total_tokens // job.seq_len))
        return min(units.batch_sequences(FINETUNE_BATCH_TOKENS, job.seq_len), most)

    def explicit_efficiency(self, nodes: int) -> float | None:
        return self.assumptions.scaling_efficiency.get(nodes)

    @property
    def modules(self) -> frozenset[str]:
        """What selective recompute re-runs (job.recompute_modules; Megatron-Core's default, the attention core)."""
        modules = self.job.recompute_modules
        return DEFAULT_RECOMPUTE_MODULES if modules is None else frozenset(modules)

    @property
    def settings(self) -> RunSettings:
        """Job-wide run settings; the kernels (fused or eager) are each layout's framework's, set where the
        layouts are evaluated (candidates.evaluate)."""
        a = self.assumptions
        return RunSettings(
            seq_len=float(self.job.seq_len),
            eager_attention=self.job.attention == "eager",
            logits_bytes_per_vocab=LOGITS_BYTES_PER_VOCAB[self.job.loss],
            loss_parallel=self.job.loss_parallel,
            activation_offload=self.job.activation_offload,
            variable_lengths=self.job.variable_lengths,
            recompute_modules=self.modules,
            overlap=a.overlap,
            moe_overlap=a.moe_overlap,
            moe_dispatcher=a.moe_dispatcher,
            context_parallel=self.job.context_parallel,
            moe_host_s_per_layer=MOE_HOST_S_PER_LAYER
            if a.moe_host_ms_per_layer is None
            else a.moe_host_ms_per_layer / 1e3,
            moe_host_s_per_local_expert=MOE_HOST_S_PER_LOCAL_EXPERT
            if a.moe_host_ms_per_local_expert is None
            else a.moe_host_ms_per_local_expert / 1e3,
            link_efficiency=a.link_efficiency * self.calibration.network,
            activation_reserve=self.activation_reserve,
            framework_overhead=self.framework_overhead,
        )


def _size_or_fraction(value, field: str, source: str | None) -> str | float:
    """'auto', a number below 1 (a fraction of capacity), or a size in bytes ('40GB', or a number >= 1)."""
    if value == "auto":
        return "auto"
    try:
        number = units.parse_bytes_or_fraction(value, field)
    except GpuplanError as exc:
        raise JobError(exc.reason, source=source, field=field) from None
    if number < 0:
        raise JobError(
            "must not be negative; give a size such as 40GB or a fraction such as 0.2", source=source, field=field
        )
    return number


def build_context(problem: Problem, catalog: Catalog) -> JobContext:
    source = problem.source_path
    shape = model_shape(problem.job.model)
    try:
        train = training_state(problem.job, shape, problem.assumptions.lora_branch_traffic)
    except JobError as exc:
        raise exc.located(source) from None
    reserve = _size_or_fraction(problem.job.activation_reserve, "job.activation_reserve", source)
    overhead = _size_or_fraction(problem.assumptions.framework_overhead, "assumptions.framework_overhead", source)
    if reserve == "auto" and not shape.has_shapes:
        raise JobError(
            "the model is given by 'params' alone, so activations cannot be computed; add the shapes "
            "(layers, hidden, heads, kv_heads, ffn_hidden, vocab) or set job.activation_reserve (e.g. 40GB, 0.2 or 0)",
            source=source,
            field="job.activation_reserve",
        )
    if (
        shape.has_shapes
        and problem.job.model.heads
        and (problem.job.model.hidden or 0) % problem.job.model.heads
        and not problem.job.model.head_dim
    ):
        raise JobError(
            "hidden is not a multiple of heads; give head_dim explicitly", source=source, field="job.model.head_dim"
        )
    for gpu_type in problem.constraints.gpu.types or []:
        try:
            offers_for(catalog, gpu_type)  # an offer name or alias, or a SKU name or alias
        except GpuplanError as exc:
            raise JobError(exc.reason, source=source, field="constraints.gpu.types") from None
    return JobContext(problem, catalog, shape, train, reserve, overhead)
