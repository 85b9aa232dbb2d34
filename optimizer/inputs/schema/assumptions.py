"""What a plan assumes (``Assumptions``: efficiencies, overheads, failure rates) and what it must meet
(``Constraints``: deadline, budget, GPU filters, spot, cost tolerance, memory headroom)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ...money import NEAR_TIE_FRACTION, NEAR_TIE_MIN_USD, budget_cents
from ...physics.constants import (
    FAILURES_PER_GPU_HOUR,
    FITTED_OVERLAP,
    HOST_LINK_GB_PER_S_PER_GPU,
    HOST_MEMORY_GB_PER_S_PER_GPU,
)
from .. import units
from .base import _Model
from .types import (
    Bytes,
    CostTolerance,
    MemoryBasis,
    MemoryHeadroom,
    Seconds,
    Usd,
)


class Assumptions(_Model):
    mfu: Literal["auto"] | float = Field(
        "auto",
        description="Compute efficiency of the whole step when compute-bound, attention included (0-1); auto: per SKU.",
    )
    matmul_efficiency: Literal["auto"] | float = Field(
        "auto",
        description="Share of the 16-bit peak the linear layers' GEMMs reach (0-1), as run (compiled or fused); "
        "attention keeps its kernels' own (physics/attention.py). auto: the fitted model per GPU family "
        "(physics/efficiency.py). mfu, when given, replaces both.",
    )
    overlap: float = Field(FITTED_OVERLAP, ge=0, le=1, description="Share of compute hiding data-parallel traffic.")
    moe_overlap: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of expert-parallel all-to-all hidden behind compute: 0 for Megatron's default "
        "dispatcher, up to 1 with DeepEP / DualPipe (DeepSeek-V3 report, section 3.2.1).",
    )
    moe_dispatcher: Literal["auto", "alltoall", "deepep", "hybridep"] = Field(
        "auto",
        description="Expert-parallel token dispatcher: alltoall (a copy per routed expert), deepep or hybridep (a "
        "copy per destination rank and remote node; HybridEP permutes in its kernels); auto: deepep where the "
        "expert-parallel group spans nodes, alltoall inside one (Megatron-Core's MoE README).",
    )
    moe_routing: Literal["topk", "round_robin"] = Field(
        "topk",
        description="How the router picks a token's experts: topk (a learned router, balanced: each of the k "
        "experts on any rank) or round_robin (NeMo AutoModel's FakeBalancedGate, fake_balanced_gate: true in its "
        "benchmark configs: token i takes experts i k .. i k + k - 1, so one or two EP ranks a token; a benchmark "
        "setting whose all-to-all a learned router does not reach; physics/moe.py round_robin_groups_hit).",
    )
    moe_host_ms_per_layer: float | None = Field(
        None,
        description="Host time per MoE layer and micro-batch (forward + backward, ms) that the GPU waits for: kernel "
        "launches after the dispatcher's host-device sync of the token counts. None = gpuplan's default "
        "(docs/design.md 5.11); 0 where full-iteration CUDA graphs remove it.",
    )
    moe_host_ms_per_local_expert: float | None = Field(
        None,
        description="Host time per MoE layer, micro-batch and local expert (experts / EP; ms) where the framework's "
        "grouped GEMMs loop over the experts on the host (Megatron-Core's Transformer Engine GroupedLinear). None = "
        "gpuplan's default (docs/design.md 5.11); 0 with a grouped GEMM launched once for every expert.",
    )
    experts_implementation: Literal["grouped_mm", "eager"] = Field(
        "grouped_mm",
        description="How an MoE's experts run under the frameworks that train transformers' modeling code (DeepSpeed, "
        "FSDP through HF Trainer / accelerate) at EP 1: grouped_mm (transformers 5's default, one grouped GEMM a "
        "layer) or eager (transformers 4's loop: one expert after another, a host sync each, and under DeepSpeed "
        "ZeRO-3 each expert's linears fetched one at a time; physics/moe.py).",
    )
    lora_branch_traffic: bool = Field(True, description="Count LoRA's branch kernels (physics/adapters.py).")
    zero3_gathers: Literal["auto", "micro_batch", "step"] = Field(
        "auto",
        description="When ZeRO-3 / FSDP gathers weights and reduce-scatters gradients under gradient accumulation: "
        "micro_batch (FSDP2's default: gathered for forward and again for backward, gradients reduced after each "
        "micro-batch), step (weights held unsharded and gradients accumulated unsharded over the step, reduced "
        "once: torch.distributed.pipelining with FSDP2, NeMo AutoModel's enable_fsdp_optimizations), auto (the "
        "framework's rule, planning/frameworks.py).",
    )
    link_efficiency: float = Field(0.8, gt=0, le=1, description="Achieved / nominal bandwidth for collectives.")
    framework_overhead: Literal["auto"] | float | str = Field(
        "auto", description="CUDA context, NCCL buffers, fragmentation: auto, a size or a fraction of capacity."
    )
    scaling_efficiency: dict[int, float] = Field(
        default_factory=dict, description="Explicit efficiency by node count; replaces the derived one there."
    )
    startup_s: Seconds = Field(600.0, alias="startup", ge=0, description="Start-up and final checkpoint time.")
    failure_rate_per_gpu_hour: float = Field(
        FAILURES_PER_GPU_HOUR, ge=0, description="Interruptions per GPU-hour (Llama 3: 419 in 54 days on 16,384 GPUs)."
    )
    checkpoint_gb_per_s_per_node: float = Field(2.0, gt=0, description="Checkpoint write bandwidth per node, GB/s.")
    host_memory_per_node_bytes: Bytes = Field(
        2e12,
        alias="host_memory_per_node",
        gt=0,
        description="CPU memory per host for optimizer offload (2TB; unset, an NVL72 tray of 4 GPUs gets half).",
    )
    host_link_gb_per_s_per_gpu: float = Field(
        HOST_LINK_GB_PER_S_PER_GPU, gt=0, description="GPU-host PCIe bandwidth per GPU, GB/s."
    )
    host_memory_gb_per_s_per_gpu: float = Field(
        HOST_MEMORY_GB_PER_S_PER_GPU,
        gt=0,
        description="CPU DRAM bandwidth share per GPU for the offloaded optimizer step, GB/s.",
    )
    restart_s: Seconds = Field(600.0, alias="restart", ge=0, description="Time to restart after an interruption.")
    memory_basis: MemoryBasis = Field(
        "delivered", description="Capacity used for fit: delivered (offer) > reported (nvidia-smi) > label."
    )

    @field_validator("scaling_efficiency", mode="before")
    @classmethod
    def _node_counts_are_numbers(cls, value: Any) -> Any:
        """``{true: 0.5}`` is not node count 1 (pydantic would read it so)."""
        if isinstance(value, dict):
            for key, eff in value.items():
                if isinstance(key, bool) or isinstance(eff, bool):
                    raise ValueError(
                        f"scaling_efficiency maps node counts to efficiencies ({{2: 0.95, 4: 0.9}}); got {key!r}: {eff!r}"
                    )
        return value

    @model_validator(mode="after")
    def _efficiency_range(self) -> Assumptions:
        fraction = units.LIMITS["fraction"]
        for name, value in (("mfu", self.mfu), ("matmul_efficiency", self.matmul_efficiency)):
            if isinstance(value, float) and not fraction.allows(value):
                raise ValueError(f"{name} {value} {fraction.text()}: it is a fraction of dense peak")
        nodes_limit = units.LIMITS["nodes"]  # a node count no plan reaches (99999999) would be dropped unread
        for nodes, eff in self.scaling_efficiency.items():
            if not nodes_limit.allows(nodes) or not fraction.allows(eff):
                raise ValueError(
                    f"scaling_efficiency {{{nodes}: {eff}}} needs a node count that {nodes_limit.text()}, and an "
                    f"efficiency that {fraction.text()}"
                )
        return self


class GpuFilter(_Model):
    min_memory_bytes: Bytes | None = Field(None, alias="min_memory", gt=0)
    types: list[str] | None = None
    providers: list[str] | None = None

    @field_validator("types", "providers")
    @classmethod
    def _names_something(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if value is not None and not value:  # as --gpu-types '' is refused: an empty filter is a slip
            example = "[B200, B300]" if info.field_name == "types" else "[RunPod, Lambda]"
            raise ValueError(f"an empty list names nothing; give one or more ({example}) or leave the key out")
        return value

    count: int | None = Field(None, ge=1, description="GPUs per node (the seed's spec.resources.gpu.count).")


class Constraints(_Model):
    deadline_s: Seconds | None = Field(None, alias="deadline", gt=0)
    budget_usd: Usd | None = Field(None, alias="budget", gt=0)
    max_nodes: int | None = Field(None, ge=1)
    max_gpus: int | None = Field(None, ge=1)
    gpu: GpuFilter = Field(default_factory=GpuFilter)
    deadline_quantile: Literal["p50", "p90"] = "p50"
    spot: Literal["allow", "never", "only"] = Field(
        "allow", description="Spot capacity: allow (default), never (on-demand only) or only (spot only)."
    )
    cost_tolerance: CostTolerance = Field(
        "auto",
        description="Under the cost objective, a faster plan costing at most this much more than the cheapest "
        "is chosen over it: auto (1 % of the cheapest plan's cost or $1, whichever is larger), a share "
        "(2%), an amount ($5), or 0 for the cheapest plan whatever its time.",
    )
    memory_headroom: MemoryHeadroom | None = Field(
        None,
        description="Memory each GPU keeps free beyond the plan's modelled peak (weights, gradients, optimizer, "
        "activations and the framework reserve): a plan fits only if peak + headroom <= the usable capacity. A "
        "share of the usable capacity (10%) or a size (8GiB, 8GB); unset: gpuplan's default "
        "(physics/memory.py MEMORY_HEADROOM_DEFAULT, stated in every answer).",
    )

    def cost_tolerance_cents(self, cheapest_cents: int) -> int:
        """How many cents above ``cheapest_cents`` a faster plan may cost and still be chosen."""
        tolerance = self.cost_tolerance
        if tolerance == "auto":
            usd = max(NEAR_TIE_FRACTION * cheapest_cents / 100.0, NEAR_TIE_MIN_USD)
        elif isinstance(tolerance, str):
            usd = float(tolerance[:-1]) / 100.0 * cheapest_cents / 100.0
        else:
            usd = tolerance
        return budget_cents(usd)
