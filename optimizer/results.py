"""Typed results that the API returns and the CLI prints (the output contract of docs/design.md section 11)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SerializeAsAny

from .inputs.schema import Strategy

# The least GiB of the optimizer step's temporaries or of what is never held at once that an answer shows
MEMORY_SHOWN_MIN_GIB = 0.05


class MemoryGiB(BaseModel):
    weights: float
    gradients: float
    optimizer: float
    activations: float
    reserve: float
    optimizer_step: float = Field(0.0, description="The optimizer step's temporaries (foreach AdamW's denominator).")
    not_concurrent: float = Field(
        0.0, description="Of the parts above, what is never allocated at the same time; total leaves it out."
    )
    total: float
    capacity: float
    basis: str = Field(description="Which capacity the fit used: delivered, reported, label or board.")


class Quantiles(BaseModel):
    p50: float
    p90: float


class Plan(BaseModel):
    sku: str
    offer: str | None
    spot: bool = False
    provider: str | None = None
    nodes: int
    gpus_per_node: int
    gpus: int
    strategy: SerializeAsAny[Strategy]  # a Strategy with more declared dimensions writes them too
    memory_gib: MemoryGiB
    fits: bool
    gpus_per_host: int | None = Field(
        None,
        description="GPUs per operating-system host, where NVLink joins several hosts into one node (GB200 NVL72: "
        "compute trays of 4); launchers start this many processes per host. None: gpus_per_node.",
    )
    host_memory_gib: float = Field(0.0, description="CPU memory per host the offloaded optimizer state takes.")
    host_capacity_gib: float | None = Field(None, description="CPU memory per host (assumptions.host_memory_per_node).")
    tokens_per_s: float
    mfu: float
    scaling_efficiency: float
    bound: Literal["compute", "memory", "network", "host"] = Field(
        description="What takes the longest part of a step: the matmuls (compute), HBM traffic (memory), exposed "
        "communication (network), or waits for the host's kernel launches (host: an MoE's launches, transformers' "
        "eager experts loop, DeepSpeed ZeRO-3's per-module fetches), which a faster GPU does not shorten."
    )
    step_s: float
    time_breakdown_s: dict[str, float]
    hours: Quantiles
    gpu_hours: float
    price_usd_per_gpu_hour: float | None
    cost_usd: Quantiles | None
    meets_deadline: bool | None
    within_budget: bool | None
    spread_source: str = Field("", description="Where the p50-p90 spread comes from (lognormal, sigma per source).")

    @property
    def host_gpus(self) -> int:
        """GPUs a launcher starts on one operating-system host: the node's, or a tray's where NVLink joins
        several hosts into one node (GB200 NVL72: 4 of the rack's 72)."""
        return self.gpus_per_host or self.gpus_per_node

    @property
    def hosts(self) -> int:
        return self.gpus // self.host_gpus

    def label(self) -> str:
        per = f"{self.nodes} x {self.gpus_per_node}" if self.nodes > 1 else f"{self.gpus}"
        return f"{per} {self.sku}" + (f" ({self.offer})" if self.offer else "")

    def same_layout(self, other: Plan | None) -> bool:
        """The same hardware row and strategy (e.g. this frontier point is the chosen plan)."""
        return other is not None and self.label() == other.label() and self.strategy == other.strategy

    @property
    def cost_p50_usd(self) -> float:
        """The median cost, or infinity for an unpriced plan (so it never wins a comparison on cost)."""
        return self.cost_usd.p50 if self.cost_usd is not None else float("inf")


class RunnerUp(Plan):
    lost_on: str
    breakeven_price_usd_per_gpu_hour: float | None
    breakeven_scaling_efficiency: float | None


class Option(Plan):
    feasible: bool
    rejected_by: Literal["memory", "deadline", "budget", "supply", "global_batch", "filter"] | None


class Infeasibility(BaseModel):
    constraint: str
    detail: str
    over_by: float | None = Field(None, description="How far the nearest candidate misses, in the constraint's unit.")


class MeasuredComparison(BaseModel):
    """A configuration against the first measured one: the speed-up and the hardware ratio that carries it."""

    measured: str = Field(description="The measured configuration, e.g. '4 x RTX-PRO-6000'.")
    measured_tokens_per_s: float
    measured_bound: str
    speedup: float
    ratios: dict[str, float] = Field(
        description="This GPU over the measured one: dense_compute, hbm_bandwidth, intra_node_link."
    )
    carried_by: str = Field(description="The ratio of the resource that bounds the measured run.")
    cost_ratio: float | None = None
    efficiency_class_ratio: float = 1.0
    exposed_network_share: float = Field(0.0, description="Share of the measured step that is exposed communication.")
    layout_differences: list[str] = Field(
        default_factory=list,
        description="Where this configuration's layout differs from the measured one's, e.g. 'recompute none, "
        "measured full': a part of the speed-up no hardware ratio carries.",
    )
    summary: str = ""


class CheckResult(BaseModel):
    plan: Plan
    fits: bool
    runnable: bool = Field(True, description="A framework (job.framework, or any under auto) runs this layout.")
    not_runnable_because: list[str] = Field(default_factory=list, description="The framework rules it breaks.")
    chosen: list[str] = Field(default_factory=list, description="Options gpuplan chose for you.")
    added: str | None = Field(
        None,
        description="The parallel dimensions gpuplan added to a configuration that fixed part of its layout, and "
        "why (what the layout without them gives); shown in the one-line verdict.",
    )
    notes: list[str] = Field(default_factory=list)
    optimum: Plan | None = None
    extra_cost_vs_optimum_usd: float | None = None
    dominated_by: list[Plan] = Field(default_factory=list)
    vs_measured: MeasuredComparison | None = Field(
        None, description="Comparison with the measured configuration, if any."
    )


class SolveResult(BaseModel):
    status: Literal["optimal", "feasible", "infeasible", "unknown"] = Field(
        description="unknown: the solver stopped on its time limit before it found a plan or proved there is none."
    )
    objective: Literal["cost", "time"]
    best: Plan | None
    frontier: list[Plan]
    infeasible: list[Infeasibility] = Field(default_factory=list)
    runners_up: list[RunnerUp] = Field(default_factory=list)
    gap: float = 0.0
    solve_s: float = 0.0
    candidates: int = 0
    deadline_h: float | None = None
    budget_usd: float | None = None
    notes: list[str] = Field(default_factory=list)
    passed_over: Plan | None = Field(
        None,
        description="Under the cost objective, the cheapest plan, where a faster one within "
        "constraints.cost_tolerance of its cost was chosen instead.",
    )


class OptionsResult(BaseModel):
    options: list[Option]
    notes: list[str] = Field(default_factory=list, description="Hardware left out of the list, and why.")


class CapacityResult(BaseModel):
    sku: str
    gpus: int
    zero_stage: int
    method: str
    bytes_per_param: float
    memory_per_gpu_gb: float
    memory_per_gpu_gib: float
    memory_basis: str
    reserve_gb: float
    max_params: float
    includes_activations: bool = Field(
        False, description="True when computed for a job (activations, reserve, best layout: check's code path)."
    )
    max_layers: int | None = Field(None, description="With a job: the deepest version of its model that fits.")
    job_fits: bool | None = Field(None, description="With a job: whether the job's own model fits.")


class ScheduledJob(BaseModel):
    job: str
    offer: str
    plan: Plan
    start_h: float
    end_h: float
    cost_usd: float
    start_date: str | None = None
    end_date: str | None = None
    late_h: float = 0.0


class DroppedJob(BaseModel):
    job: str
    reason: str


class PoolUse(BaseModel):
    offer: str
    gpus: int = Field(description="The most GPUs the pool has at any time (its windows may lower or raise it).")
    peak_used: int
    timeline: list[tuple[float, int]] = Field(default_factory=list, description="(hour, GPUs in use) at each change.")
    capacity: list[tuple[float, int]] = Field(
        default_factory=list, description="(hour, GPUs the pool has) at each change, as scheduled (whole time steps)."
    )


class PortfolioResult(BaseModel):
    status: Literal["optimal", "feasible", "infeasible", "unknown"]
    objective: str
    total_cost_usd: float
    gap: float = Field(
        description="(cost - bound) / cost; 1.0 where no bound holds for the problem as asked (a required job "
        "left out: status infeasible or unknown)."
    )
    schedule: list[ScheduledJob]
    dropped: list[DroppedJob]
    pools: list[PoolUse]
    makespan_h: float = 0.0
    budget_usd: float | None = None
    horizon_h: float = 0.0
    infeasible: list[Infeasibility] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    solve_s: float = 0.0
    bound_usd: float | None = Field(None, description="Proven lower bound on total cost for as few dropped jobs.")
    bound_source: str = Field(
        "", description="Where the bound comes from: lagrangian_relaxation, lp_relaxation, cp_sat or cheapest_options."
    )
    method: str = Field("", description="How the schedule was found: cp_sat, lp_lns (greedy + LP + search), greedy.")
