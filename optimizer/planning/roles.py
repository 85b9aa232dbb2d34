"""How many GPUs of a SKU run each role of a two-role job, and what the split gives (issue 52, first step).

A role job (docs/roles.md) has a frozen *producer* model running forward on ``t`` GPUs (a speculative-decoding
target, a distillation teacher) and a trained *consumer* model on ``d`` GPUs (the drafter, the student), the
producers' hidden states crossing a link to the consumers. physics/roles.py gives each stage's rate; the
pipeline runs at the slowest one. For G GPUs the planner picks t (d = G - t) to maximise

    f(t) = min(I(t), D(t)),   I(t) = min(producers(t), link capacity of t senders)        (rises with t)
                              D(t) = min(consumers(G - t), link capacity of G - t receivers) (falls with t)

so the best t is the first one where I(t) >= D(t), or the one before it: below that t the pipeline runs at
I(t) <= I(t* - 1), from it on at D(t) <= D(t*). A bisection finds it in log G rate evaluations; the tests
check it against every split. Over a list of GPU counts the objective (time, or cost = hours x GPUs x
price) picks among the counts' best splits, ties going to the cheaper, then the faster, then fewer GPUs.

The job file's ``roles:`` reach it through planning/role_jobs.py; ``gpuplan solve`` and ``check --role`` through
solver/roles.py (docs/roles.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..errors import JobError
from ..physics.layout import Cluster, Layout, Recompute, RunSettings
from ..physics.memory import memory_breakdown
from ..physics.rl import RlRate
from ..physics.roles import (
    HOST_BOUNCE_HOPS,
    PEER_HOPS,
    PipelineRate,
    forward_flops_per_token,
    forward_tokens_per_s,
    host_link_bytes_per_s,
    link_tokens_per_s,
    moved_mfu,
    peer_link_bytes_per_s,
    pipeline_rate,
    ridge_flops_per_byte,
    train_target_tokens_per_s,
)
from ..physics.shapes import ModelShape, TrainingState
from .grpo import (
    GrpoJob,
    engine_fit_reason,
    grpo_step,
    launch_reason,
    on_hardware,
    rollout_splits,
    trainer_memory_reason,
)
from .role_hardware import DEFAULT_LINK_EFFICIENCY, DEFAULT_OVERLAP, Peak, RoleHardware

LinkKind = Literal["auto", "peer", "host"]
Objective = Literal["time", "cost"]
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class ForwardRole:
    """A frozen model that runs forward only and hands hidden states on (the producer)."""

    name: str
    active_params: float
    weight_bytes: float
    attention_layers: float  # layers with softmax attention (a hybrid's linear-attention layers have none)
    attention_width: float  # heads x head_dim
    seq_len: float  # keys per query of its attention
    mfu: float  # achieved share of ``mfu_peak`` on ``mfu_hardware`` (memory-bound kernels sit well below 0.5)
    mfu_hardware: RoleHardware | None  # where the MFU was measured (elsewhere it moves with the ridge); None: any
    mfu_peak: Peak = "bf16"  # the peak the MFU is quoted against
    mfu_counts_attention: bool = True  # whether the MFU's FLOPs include the attention term
    # no measured MFU: each GPU's training efficiency (its share of the bf16 peak), the same GEMMs run forward
    mfu_is_training_efficiency: bool = False

    def flops_per_token(self) -> float:
        layers = self.attention_layers if self.mfu_counts_attention else 0.0
        return forward_flops_per_token(self.active_params, layers, self.attention_width, self.seq_len)


@dataclass(frozen=True)
class TrainRole:
    """The trained model (the consumer), run data-parallel over its GPUs by gpuplan's step time."""

    name: str
    shape: ModelShape
    train: TrainingState
    seq_len: float  # keys per query of its attention, and its tokens per sequence
    micro_batch: int
    grad_accum: int
    trained_tokens_per_target_token: float  # DFlash: anchors x block size / target sequence length
    context_flops_per_target_token: float = 0.0  # work on every target token (DFlash's context projection)


@dataclass(frozen=True)
class RoleJob:
    producer: ForwardRole
    consumer: TrainRole
    tokens: float  # target tokens to process: dataset x epochs
    batch_tokens: float  # target tokens per batch handed from a producer to a consumer
    bytes_per_token: float  # what crosses per token (hidden states of N layers x hidden x 2)
    link: LinkKind = "auto"  # peer (NVLink), host (bounce through host memory), auto: peer where there is NVLink
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY
    overlap: float = DEFAULT_OVERLAP
    # GRPO (planning/grpo.py): the producers generate, the consumers score and train, the weights sync back
    rl: GrpoJob | None = None
    # solve weighs splits across two offers' nodes too (planning/role_mixed.py); check answers one where asked
    across_offers: bool = False


@dataclass(frozen=True)
class RoleSplit:
    producers: int
    consumers: int
    shared: bool = False  # the same GPUs run both roles in turn (GRPO colocated)

    @property
    def gpus(self) -> int:
        return self.producers if self.shared else self.producers + self.consumers


@dataclass(frozen=True)
class RolePlan:
    """One split on one SKU: per-role rates, what binds, hours and cost."""

    sku: str  # the producers' (and, on one node, the consumers')
    split: RoleSplit
    rate: PipelineRate
    link: str  # "peer" or "host" on one node, "network" between two (planning/role_mixed.py)
    hours: float
    cost_usd: float
    price_usd_per_gpu_hour: float  # the producers'
    # set where the consumers sit on another offer's node (a split across offers): their SKU and price
    consumer_sku: str | None = None
    consumer_price_usd_per_gpu_hour: float | None = None
    nodes: int = 1  # whole nodes of the offer a GRPO split spans (spans_nodes); every other plan sits on one
    rollout_tp: int | None = None  # a GRPO plan's GPUs an engine (the job's, or the smallest that holds the policy)

    @property
    def mixed(self) -> bool:
        """The roles on two offers' nodes (each its own SKU and price), the transfer over the network."""
        return self.consumer_sku is not None

    @property
    def consumer_sku_name(self) -> str:
        return self.consumer_sku if self.consumer_sku is not None else self.sku

    @property
    def tokens_per_s(self) -> float:
        return self.rate.tokens_per_s

    @property
    def binding(self) -> str:
        return self.rate.binding

    @property
    def days(self) -> float:
        return self.hours / 24.0


@dataclass(frozen=True)
class RoleAnswer:
    """The chosen plan (None when no split can run, with the reason) and each GPU count's best split."""

    best: RolePlan | None
    per_count: tuple[RolePlan, ...]
    refused: str | None = None


def link_kind(job: RoleJob, hw: RoleHardware) -> Literal["peer", "host"]:
    if job.link == "peer" and not hw.peer_to_peer:
        raise JobError(f"{hw.sku} has no NVLink between its GPUs: a peer link needs one; use link host")
    if job.link == "auto":
        return "peer" if hw.peer_to_peer else "host"
    return job.link


def producer_mfu(role: ForwardRole, hw: RoleHardware) -> float:
    """The producer's MFU on ``hw`` (a share of ``role.mfu_peak``): moved from the GPU it was measured on, or,
    unmeasured, ``hw``'s training efficiency."""
    if role.mfu_is_training_efficiency:
        return hw.compute_efficiency
    mfu, on = role.mfu, role.mfu_hardware
    if on is not None and on.sku != hw.sku:
        mfu = moved_mfu(
            mfu,
            ridge_flops_per_byte(on.peak_flops_per_s(role.mfu_peak), on.hbm_bytes_per_s),
            ridge_flops_per_byte(hw.peak_flops_per_s(role.mfu_peak), hw.hbm_bytes_per_s),
        )
    return mfu


def producer_tokens_per_s_per_gpu(role: ForwardRole, hw: RoleHardware, batch_tokens: float) -> float:
    """One producer GPU's forward rate on ``hw`` at its MFU there (``producer_mfu``)."""
    peak = hw.peak_flops_per_s(role.mfu_peak)
    mfu = producer_mfu(role, hw)
    return forward_tokens_per_s(role.flops_per_token(), peak, mfu, role.weight_bytes, batch_tokens, hw.hbm_bytes_per_s)


class DoesNotFit(JobError):
    """The trained role's state and activations exceed its GPUs' memory on every layout it may take."""


class NotLaunchable(JobError):
    """No split of a GPU count is one the RL frameworks launch as planned (grpo.launch_reason)."""


def _consumer_layouts(role: TrainRole, consumers: int) -> list[Layout]:
    """The trained role's layouts on ``consumers`` GPUs, least memory last: plain data parallelism, ZeRO-3 over
    the consumers (FSDP), that with every layer recomputed."""
    base = Layout(dp=consumers, micro_batch=role.micro_batch, grad_accum=role.grad_accum)
    sharded = replace(base, zero=3, shard=consumers)
    return [base, *([sharded] if consumers > 1 else []), replace(sharded, recompute=Recompute.FULL)]


def _consumer_bytes(role: TrainRole, layout: Layout, hw: RoleHardware) -> float:
    """The trained role's memory a GPU on ``layout`` (physics/memory.py, as ``check`` counts it)."""
    return float(
        memory_breakdown(role.shape, role.train, layout, RunSettings(seq_len=role.seq_len), hw.memory_bytes).total
    )


def consumer_layout(job: RoleJob, hw: RoleHardware, consumers: int) -> Layout | None:
    """The first of ``_consumer_layouts`` the trained role fits on ``consumers`` GPUs of one node; None where none
    fits. A role that trains on a share of the tokens (a DFlash drafter: its anchors' blocks, attending over the
    target's hidden states) keeps plain data parallelism: its activations follow the anchors, which
    physics/memory.py does not count, and the seed's drafter trained on one 96 GB GPU (docs/roles.md, the
    seed-003 run)."""
    role = job.consumer
    layouts = _consumer_layouts(role, consumers)
    if role.trained_tokens_per_target_token != 1.0 or role.context_flops_per_target_token:
        return layouts[0]
    return next((lay for lay in layouts if _consumer_bytes(role, lay, hw) <= hw.memory_bytes), None)


def consumer_memory_reason(job: RoleJob, hw: RoleHardware, consumers: int) -> str:
    """Why the trained role fits no layout on ``consumers`` GPUs: its need on the least-memory one."""
    role = job.consumer
    need = _consumer_bytes(role, _consumer_layouts(role, consumers)[-1], hw)
    return (
        f"training {role.name} does not fit {consumers} x {hw.sku}: {need / 1e9:,.1f} GB a GPU at its smallest "
        f"(ZeRO-3 over its GPUs, every layer recomputed) against {hw.memory_bytes / 1e9:,.1f} GB; give it more GPUs"
    )


def consumer_tokens_per_s(job: RoleJob, hw: RoleHardware, consumers: int) -> float:
    """Target tokens/s the trained role keeps up with on ``consumers`` GPUs of one node (data parallel, sharded
    or recomputed where memory needs it: ``consumer_layout``); 0 where it fits no layout."""
    role = job.consumer
    layout = consumer_layout(job, hw, consumers)
    if layout is None:
        return 0.0
    cluster = Cluster(
        peak_flops=hw.peak_bf16_flops_per_s,
        hbm_bytes_per_s=hw.hbm_bytes_per_s,
        intra_bytes_per_s=hw.intra_node_bytes_per_s,
        network_bytes_per_s=hw.intra_node_bytes_per_s,
        gpus_per_node=hw.gpus_per_node,
        compute_efficiency=hw.compute_efficiency,
    )
    settings = RunSettings(seq_len=role.seq_len, overlap=job.overlap, link_efficiency=job.link_efficiency)
    return train_target_tokens_per_s(
        role.shape,
        role.train,
        cluster,
        layout,
        settings,
        role.trained_tokens_per_target_token,
        role.context_flops_per_target_token,
    )


class _Rates:
    """The rates of one job on one SKU, each GPU count's consumer rate computed once."""

    def __init__(self, job: RoleJob, hw: RoleHardware):
        self.job, self.hw = job, hw
        self.kind = link_kind(job, hw)
        self.producer_per_gpu = producer_tokens_per_s_per_gpu(job.producer, hw, job.batch_tokens)
        per_link = (
            peer_link_bytes_per_s(hw.intra_node_bytes_per_s, job.link_efficiency)
            if self.kind == "peer"
            else host_link_bytes_per_s(job.link_efficiency)
        )
        self.link_bytes_per_s = per_link
        self.hops = PEER_HOPS if self.kind == "peer" else HOST_BOUNCE_HOPS
        self._consumers: dict[int, float] = {}

    def consumers(self, d: int) -> float:
        if d not in self._consumers:
            self._consumers[d] = consumer_tokens_per_s(self.job, self.hw, d)
        return self._consumers[d]

    def link_side(self, gpus: int) -> float:
        """Tokens/s ``gpus`` GPUs' own links carry on one side of the transfer."""
        return link_tokens_per_s(self.job.bytes_per_token, self.link_bytes_per_s, gpus, gpus)

    def rising(self, t: int) -> float:
        return min(t * self.producer_per_gpu, self.link_side(t))

    def falling(self, t: int, gpus: int) -> float:
        return min(self.consumers(gpus - t), self.link_side(gpus - t))

    def plan(self, split: RoleSplit) -> RolePlan:
        t, d = split.producers, split.consumers
        if self.consumers(d) <= 0:
            raise DoesNotFit(consumer_memory_reason(self.job, self.hw, d))
        rate = pipeline_rate(
            self.producer_per_gpu,
            t,
            self.consumers(d),
            link_tokens_per_s(self.job.bytes_per_token, self.link_bytes_per_s, t, d),
        )
        hours = self.job.tokens / rate.tokens_per_s / SECONDS_PER_HOUR
        price = self.hw.price_usd_per_gpu_hour
        return RolePlan(self.hw.sku, split, rate, self.kind, hours, hours * split.gpus * price, price)


def all_splits(gpus: int) -> list[RoleSplit]:
    """Every split of ``gpus`` with at least one GPU per role."""
    return [RoleSplit(t, gpus - t) for t in range(1, gpus)]


def _rl_plan(job: RoleJob, rl: GrpoJob, hw: RoleHardware, split: RoleSplit) -> RolePlan:
    """A GRPO split's step (planning/grpo.py) as a role plan: the step's stages as the pipeline's."""
    if why := trainer_memory_reason(rl, hw, split.consumers):
        raise DoesNotFit(why)
    step = grpo_step(rl, hw, split.producers, split.consumers)
    rate = RlRate.of(step)
    hours = job.tokens / rate.tokens_per_s / SECONDS_PER_HOUR
    price = hw.price_usd_per_gpu_hour
    nodes = -(-split.gpus // hw.gpus_per_node)
    # the weights' sync: NVLink peer copies (or host memory) inside a node, the network beyond it (grpo_step)
    kind: Literal["peer", "host", "network"] = "network" if nodes > 1 else "peer" if hw.peer_to_peer else "host"
    return RolePlan(
        hw.sku,
        split,
        rate,
        kind,
        hours,
        hours * split.gpus * price,
        price,
        nodes=nodes,
        rollout_tp=rl.recipe.rollout_tp,
    )


def spans_nodes(job: RoleJob, hw: RoleHardware, gpus: int) -> bool:
    """Whether ``gpus`` GPUs run the job over several whole nodes: a GRPO job's stages take any GPU count
    (planning/grpo.py: training's data-parallel traffic and the weight sync over the network beyond a node, each
    rollout engine inside one), on whole nodes as multi-node offers rent them; the other role jobs' transfer
    between roles is modelled inside one node only."""
    return job.rl is not None and gpus > hw.gpus_per_node and gpus % hw.gpus_per_node == 0


def launch_note(job: RoleJob, hw: RoleHardware, split: RoleSplit) -> str | None:
    """A GRPO split the RL frameworks cannot launch as planned (``check``'s note; solve does not weigh it)."""
    if job.rl is None:
        return None
    why = launch_reason(job.rl, hw, split.producers, split.consumers)
    return None if why is None else f"NeMo RL and verl cannot launch it as planned: {why}; solve does not weigh it"


def _on_hardware(job: RoleJob, hw: RoleHardware) -> RoleJob:
    """The job as it runs on ``hw`` (a GRPO engine size left open, set there: grpo.on_hardware); refused where its
    engines cannot hold the policy there (grpo.engine_fit_reason)."""
    if job.rl is None:
        return job
    rl = on_hardware(job.rl, hw)
    if why := engine_fit_reason(rl, hw):
        raise JobError(why)
    return replace(job, rl=rl)


def _rl_split(rl: GrpoJob, producers: int, consumers: int) -> RoleSplit:
    return RoleSplit(producers, consumers, shared=rl.recipe.placement == "colocated")


def evaluate_split(job: RoleJob, hw: RoleHardware, split: RoleSplit) -> RolePlan:
    """One hand-picked split (``check``'s question): its rates, what binds, hours and cost."""
    job = _on_hardware(job, hw)
    if job.rl is not None:
        split = _rl_split(job.rl, split.producers, split.consumers)
        if split.shared and split.producers != split.consumers:
            raise JobError(
                f"a colocated GRPO job runs every stage on the same GPUs: give both roles the same count "
                f"(got {split.producers} and {split.consumers}), or set placement: disaggregated"
            )
    if split.producers < 1 or split.consumers < 1:
        raise JobError(f"a role split needs a GPU per role (got {split.producers} + {split.consumers})")
    if split.gpus > hw.gpus_per_node and not spans_nodes(job, hw, split.gpus):
        gpus = (
            f"{split.gpus} GPUs, both roles on each," if split.shared else f"{split.producers} + {split.consumers} GPUs"
        )
        why = "roles spanning nodes are modelled for GRPO only"
        if job.rl is not None:
            why = f"a GRPO job's GPUs over several nodes must fill them ({hw.gpus_per_node} a node)"
        raise JobError(f"{gpus} exceed one {hw.sku} node ({hw.gpus_per_node} GPUs); {why}")
    if job.rl is not None:
        return _rl_plan(job, job.rl, hw, split)
    return _Rates(job, hw).plan(split)


def best_split(job: RoleJob, hw: RoleHardware, gpus: int) -> RolePlan:
    """The fastest split of ``gpus`` GPUs, by bisection on the crossing of the rising and falling rates."""
    if gpus < 2:
        raise JobError(f"a role job needs at least 2 GPUs, one per role (got {gpus})")
    job = _on_hardware(job, hw)
    if job.rl is not None:  # every split (of one node or of whole nodes): the step's sum has no single crossing
        rl = job.rl
        every = rollout_splits(rl, gpus)
        if not every:
            raise JobError(f"{gpus} GPUs leave none to train beside a rollout engine of {rl.recipe.rollout_tp}")
        pairs = rollout_splits(rl, gpus, hw)
        if not pairs:  # the reason of the split that trains on the most GPUs
            raise NotLaunchable(f"on {gpus} GPUs: {launch_reason(rl, hw, *every[0])}")
        plans, refused = [], []
        for r, t in pairs:  # a split whose trainer does not fit its GPUs is left out
            try:
                plans.append(_rl_plan(job, rl, hw, _rl_split(rl, r, t)))
            except DoesNotFit as exc:
                refused.append(exc)
        if not plans:  # the first split (the fewest rollout GPUs) trains on the most: the least memory a GPU
            raise refused[0]
        return max(plans, key=lambda p: (p.tokens_per_s, -p.split.producers))
    rates = _Rates(job, hw)
    lo, hi = 1, gpus - 1  # the first t with rising(t) >= falling(t) lies in [lo, hi], or there is none (hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if rates.rising(mid) >= rates.falling(mid, gpus):
            hi = mid
        else:
            lo = mid + 1
    # a trained role that fits no layout on few GPUs has no rate there: the crossing moves toward more consumers
    splits = [RoleSplit(t, gpus - t) for t in (lo - 1, lo) if 1 <= t <= gpus - 1]
    candidates = [rates.plan(s) for s in splits if rates.consumers(s.consumers) > 0]
    if not candidates:
        raise DoesNotFit(consumer_memory_reason(job, hw, gpus - 1))
    return max(candidates, key=lambda p: (p.tokens_per_s, -p.split.producers))


def calibrated_producer(job: RoleJob, hw: RoleHardware, split: RoleSplit, measured_tokens_per_s: float) -> RoleJob:
    """The job with its producer's MFU set so that ``split`` on ``hw`` runs at the measured rate (the SKU the
    MFU is measured on becomes ``hw``). Only a run its producers bind says how fast they are: where the
    calibrated split would be bound by the consumers or the link, the measurement is refused."""
    if job.rl is not None:
        raise JobError("a GRPO job is not calibrated yet: plan it without job.measured", field="job.measured")
    predicted = evaluate_split(job, hw, split)
    producer_rate = predicted.rate.producer_tokens_per_s
    if producer_rate <= 0 or measured_tokens_per_s <= 0:
        raise JobError("a measured rate and a predicted producer rate must be positive")
    mfu = producer_mfu(job.producer, hw) * measured_tokens_per_s / producer_rate
    producer = replace(job.producer, mfu=mfu, mfu_hardware=hw, mfu_is_training_efficiency=False)
    calibrated = replace(job, producer=producer)
    check = evaluate_split(calibrated, hw, split)
    if check.binding != "producers":
        raise JobError(
            f"at {measured_tokens_per_s:,.0f} tokens/s the {split.producers} + {split.consumers} split on {hw.sku} "
            f"is bound by its {check.binding}, so the measurement does not say how fast the producers are"
        )
    return calibrated


def _rank(plan: RolePlan, objective: Objective) -> tuple[float, float, int]:
    if objective == "cost":
        return (round(plan.cost_usd, 2), plan.hours, plan.split.gpus)
    return (plan.hours, round(plan.cost_usd, 2), plan.split.gpus)


def plan_roles(
    job: RoleJob,
    hw: RoleHardware,
    gpu_counts: Sequence[int],
    objective: Objective = "time",
) -> RoleAnswer:
    """The best split for each GPU count, and the best of those by ``objective``. A drafter's or a teacher's
    producer whose weights do not fit one GPU is refused (splitting it with tensor parallelism is not modelled);
    a GRPO rollout's engines split the policy as ``grpo.engine_fit_reason`` sizes them."""
    try:
        job = _on_hardware(job, hw)
    except JobError as exc:  # a GRPO engine that cannot hold the policy on this GPU
        return RoleAnswer(best=None, per_count=(), refused=exc.reason)
    if job.rl is None and job.producer.weight_bytes > hw.memory_bytes:
        reason = (
            f"{job.producer.name}'s weights ({job.producer.weight_bytes / 1e9:.1f} GB) exceed one {hw.sku} "
            f"({hw.memory_bytes / 1e9:.1f} GB); producers split by tensor parallelism are not modelled yet"
        )
        return RoleAnswer(best=None, per_count=(), refused=reason)
    counts = sorted({g for g in gpu_counts if 2 <= g <= hw.gpus_per_node or spans_nodes(job, hw, g)})
    if not counts:
        reason = f"no GPU count among {list(gpu_counts)} runs both roles within one {hw.sku} node"
        return RoleAnswer(best=None, per_count=(), refused=reason)
    plans, reasons = [], []
    for g in counts:
        try:
            plans.append(best_split(job, hw, g))
        except (DoesNotFit, NotLaunchable) as exc:  # too few GPUs for the trained role, or no launchable split
            reasons.append(exc.reason)
    if not plans:
        return RoleAnswer(best=None, per_count=(), refused=reasons[-1])
    per_count = tuple(plans)
    best = min(per_count, key=lambda p: _rank(p, objective))
    return RoleAnswer(best=best, per_count=per_count)
