"""Role splits across two offers (issue 52): the producers on one offer's node, the consumers on another's, each
role on its own SKU at its own price, the per-token tensor crossing the network between the two nodes.

A split (a, t, b, d) puts t producers on a node of offer a and d consumers on a node of offer b != a. It runs at

    min(t x producer(a), consumers(b, d), network(a, t, b, d))          (physics/roles.py)

where network(...) = min(t x NIC(a), d x NIC(b)) x link efficiency / bytes per token: two nodes share no
NVLink, and a host bounce needs one host, so the scale-out network is the only link between them. It costs
hours x (t x price(a) + d x price(b)). A split is kept only where each role fits its memory (the producer's
weights one GPU of a, the trained role a layout on d GPUs of b: planning/roles.py ``consumer_layout``) and the
network carries what the roles produce and consume: a split the network would bind is refused, its transfer
needing NVLink (the roles on one node), and the answer says so with the bytes it needs and the network gives.

``solve`` weighs these splits where the job asks (``job.roles.across_offers: true``), so that a job that does
not ask is answered as before; ``check`` answers one wherever its ``--role`` flags name two offers. Where the
job says its roles share a node (``link: peer`` or ``host``), or it is a GRPO job (its weights sync inside the
node's engines), no split across offers is planned, and the answer says why. Offers of different providers
are never paired: no network joins them that the catalog describes.

Each ordered pair of offers is enumerated in full (t over a's rentable counts, d over b's: 64 splits for two
8-GPU nodes, the consumer's rate computed once per (offer, d)), and a pair keeps its frontier: the splits no
other of its splits beats on cost and hours and ranks before on (cost, hours, GPUs). The best plan under
either objective, deadline or budget lies on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ArgumentError, JobError
from ..inputs.schema import Catalog, Offer
from ..inputs.units import GB
from ..physics.roles import PipelineRate, network_link_bytes_per_s, network_tokens_per_s
from .role_hardware import RoleHardware
from .role_jobs import offer_hardware
from .roles import (
    SECONDS_PER_HOUR,
    DoesNotFit,
    RoleJob,
    RolePlan,
    RoleSplit,
    consumer_memory_reason,
    consumer_tokens_per_s,
    producer_tokens_per_s_per_gpu,
)


@dataclass(frozen=True)
class Seat:
    """One offer's node as a role sees it: its GPU, price and the GPU counts it rents."""

    offer: str
    provider: str
    hw: RoleHardware
    counts: tuple[int, ...]

    @classmethod
    def of(cls, catalog: Catalog, offer: Offer) -> Seat:
        counts = tuple(offer.gpu_counts or range(1, offer.gpus_per_node + 1))
        return cls(offer.name, offer.provider, offer_hardware(catalog, offer), counts)


@dataclass(frozen=True)
class MixedPlan:
    """A split across two offers: the producers' offer, the consumers', and the plan."""

    producer_offer: str
    consumer_offer: str
    plan: RolePlan


@dataclass(frozen=True)
class MixedAnswer:
    """Each pair of offers' frontier of splits, and why splits across offers were refused."""

    plans: tuple[MixedPlan, ...] = ()
    refused: tuple[str, ...] = field(default_factory=tuple)


class NeedsNvlink(JobError):
    """A split across offers whose transfer the network between its two nodes cannot carry."""


def one_node_reason(job: RoleJob) -> str | None:
    """Why this job's roles must share one node (no split across offers), None where they may not."""
    if job.rl is not None:
        return (
            "a grpo job's rollout and policy sit on one offer's node (its weights sync between them each step); "
            "splits across offers are planned for drafter and distill jobs"
        )
    if job.link == "peer":
        return (
            "job.roles.link is peer: the transfer needs NVLink, which joins only one node's GPUs, so both roles "
            "sit on one offer's node (link: auto lets them sit on two offers' nodes, over the network)"
        )
    if job.link == "host":
        return (
            "job.roles.link is host: the transfer bounces through one host's memory, so both roles sit on one "
            "offer's node (link: auto lets them sit on two offers' nodes, over the network)"
        )
    return None


class _SeatRates:
    """The producer's rate a GPU and the consumers' rate on d GPUs of one seat, each computed once."""

    def __init__(self, job: RoleJob, seat: Seat):
        self.job, self.seat = job, seat
        self._producer: float | None = None
        self._consumers: dict[int, float] = {}

    def producer_per_gpu(self) -> float:
        if self._producer is None:
            self._producer = producer_tokens_per_s_per_gpu(self.job.producer, self.seat.hw, self.job.batch_tokens)
        return self._producer

    def consumers(self, d: int) -> float:
        if d not in self._consumers:
            self._consumers[d] = consumer_tokens_per_s(self.job, self.seat.hw, d)
        return self._consumers[d]


def _network_bytes_per_s(job: RoleJob, hw: RoleHardware) -> float:
    return network_link_bytes_per_s(hw.network_bytes_per_s, job.link_efficiency)


def _plan(job: RoleJob, a: Seat, b: Seat, split: RoleSplit, rate: PipelineRate) -> RolePlan:
    hours = job.tokens / rate.tokens_per_s / SECONDS_PER_HOUR
    pa, pb = a.hw.price_usd_per_gpu_hour, b.hw.price_usd_per_gpu_hour
    cost = hours * (split.producers * pa + split.consumers * pb)
    return RolePlan(a.hw.sku, split, rate, "network", hours, cost, pa, consumer_sku=b.hw.sku,
                    consumer_price_usd_per_gpu_hour=pb)  # fmt: skip


def _rate(job: RoleJob, ra: _SeatRates, rb: _SeatRates, split: RoleSplit) -> PipelineRate:
    t, d = split.producers, split.consumers
    link = network_tokens_per_s(
        job.bytes_per_token, _network_bytes_per_s(job, ra.seat.hw), t, _network_bytes_per_s(job, rb.seat.hw), d
    )
    return PipelineRate(t * ra.producer_per_gpu(), rb.consumers(d), link)


def needs_nvlink_reason(job: RoleJob, a: Seat, b: Seat, plan: RolePlan) -> str:
    """Why a split's transfer needs NVLink: the bytes its roles produce and consume against what the network
    between the two nodes carries."""
    r, s = plan.rate, plan.split
    need = min(r.producer_tokens_per_s, r.consumer_tokens_per_s) * job.bytes_per_token
    carry = r.link_tokens_per_s * job.bytes_per_token
    return (
        f"{s.producers} x {a.hw.sku} on {a.offer} + {s.consumers} x {b.hw.sku} on {b.offer}: the roles would move "
        f"{need / GB:,.2f} GB/s between the two nodes, the network carries {carry / GB:,.2f} GB/s "
        f"({s.producers} x {a.hw.network_bytes_per_s / GB:,.2f} GB/s sending, {s.consumers} x "
        f"{b.hw.network_bytes_per_s / GB:,.2f} GB/s receiving, at {job.link_efficiency:.0%}); the transfer needs "
        "NVLink (both roles on one node)"
    )


def mixed_split(job: RoleJob, a: Seat, b: Seat, split: RoleSplit) -> RolePlan:
    """One split across two offers (``check``'s question): its rates, what binds, hours and cost. A role that
    does not fit its memory is refused (``DoesNotFit``); a transfer the network does not carry is answered,
    bound by the link (``check`` notes it needs NVLink; ``solve`` does not propose it)."""
    why = one_node_reason(job)
    if why is not None:  # the split as --role (check.roles) gave it, as every other error of a split is named
        raise ArgumentError(why, field="role")
    if split.producers < 1 or split.consumers < 1:
        raise JobError(f"a role split needs a GPU per role (got {split.producers} + {split.consumers})")
    for seat, gpus in ((a, split.producers), (b, split.consumers)):
        if gpus > seat.hw.gpus_per_node:
            raise JobError(f"{gpus} GPUs exceed one {seat.hw.sku} node of {seat.offer} ({seat.hw.gpus_per_node})")
    if job.producer.weight_bytes > a.hw.memory_bytes:
        raise JobError(_weights_reason(job, a))
    if a.hw.network_bytes_per_s <= 0 or b.hw.network_bytes_per_s <= 0:
        raise JobError(_no_network_reason(a, b))
    rb = _SeatRates(job, b)
    if rb.consumers(split.consumers) <= 0:
        raise DoesNotFit(consumer_memory_reason(job, b.hw, split.consumers))
    return _plan(job, a, b, split, _rate(job, _SeatRates(job, a), rb, split))


def network_binds(plan: RolePlan) -> bool:
    """The network between the two nodes carries less than the roles produce and consume."""
    r = plan.rate
    return r.link_tokens_per_s < min(r.producer_tokens_per_s, r.consumer_tokens_per_s)


def _weights_reason(job: RoleJob, a: Seat) -> str:
    return (
        f"{job.producer.name}'s weights ({job.producer.weight_bytes / GB:.1f} GB) exceed one {a.hw.sku} "
        f"({a.hw.memory_bytes / GB:.1f} GB); producers split by tensor parallelism are not modelled yet"
    )


def _no_network_reason(a: Seat, b: Seat) -> str:
    missing = [s.hw.sku for s in (a, b) if s.hw.network_bytes_per_s <= 0]
    return (
        f"{' and '.join(dict.fromkeys(missing))} states no network bandwidth (network_gb_per_s_per_gpu in the "
        f"hardware file), so no split of {a.offer} and {b.offer} can be planned across their nodes"
    )


def _rank(plan: RolePlan) -> tuple[float, float, int]:
    return (round(plan.cost_usd, 2), plan.hours, plan.split.gpus)


def covered(plan: RolePlan, others: Sequence[RolePlan]) -> bool:
    """Another plan costs no more (to the cent) and takes no longer, and ranks first or equal on (cost, hours,
    GPUs): it ranks at least as well under either objective, within any deadline or budget ``plan`` keeps."""
    key = _rank(plan)
    return any(k[0] <= key[0] and k[1] <= key[1] and k <= key for k in map(_rank, others))


def dominated(plan: RolePlan, others: Sequence[RolePlan]) -> bool:
    """Another plan ``covers`` it and is not its equal: it ranks first under either objective."""
    key = _rank(plan)
    return any(k[0] <= key[0] and k[1] <= key[1] and k < key for k in map(_rank, others))


def frontier(plans: Sequence[RolePlan]) -> list[RolePlan]:
    """The plans no other dominates (``dominated``), one of each equal (cost, hours, GPUs), cheapest first: the
    best under either objective, deadline or budget is among them."""
    seen: set[tuple[float, float, int]] = set()
    out = []
    for plan in sorted(plans, key=_rank):
        if _rank(plan) in seen or dominated(plan, plans):
            continue
        seen.add(_rank(plan))
        out.append(plan)
    return out


def _pair(job: RoleJob, ra: _SeatRates, rb: _SeatRates, max_gpus: int | None) -> tuple[list[RolePlan], str | None]:
    """One pair's frontier, and why its most attractive split was refused where the network would bind it and
    it beats every split kept (as if its transfer were carried: the roles' own rate)."""
    a, b = ra.seat, rb.seat
    kept: list[RolePlan] = []
    refused: list[RolePlan] = []  # as if carried: the link at the roles' own rate
    for t in a.counts:
        for d in b.counts:
            if max_gpus is not None and t + d > max_gpus or rb.consumers(d) <= 0:
                continue
            split = RoleSplit(t, d)
            plan = _plan(job, a, b, split, _rate(job, ra, rb, split))
            if network_binds(plan):
                r = plan.rate
                own = min(r.producer_tokens_per_s, r.consumer_tokens_per_s)
                refused.append(
                    _plan(job, a, b, split, PipelineRate(r.producer_tokens_per_s, r.consumer_tokens_per_s, own))
                )
            else:
                kept.append(plan)
    kept = frontier(kept)
    why = None
    tempting = [p for p in frontier(refused) if not dominated(p, kept)]
    if tempting:
        best = min(tempting, key=_rank)
        why = needs_nvlink_reason(job, a, b, _plan(job, a, b, best.split, _rate(job, ra, rb, best.split)))
    return kept, why


def mixed_plans(job: RoleJob, seats: Sequence[Seat], max_gpus: int | None = None) -> MixedAnswer:
    """Every pair of distinct offers' frontier of splits, the producers on the first, the consumers on the
    second; with why splits were refused (the job's roles share a node, a SKU states no network, the network
    would bind the pair's most attractive split)."""
    if not job.across_offers or len(seats) < 2:
        return MixedAnswer()
    why = one_node_reason(job)
    if why is not None:
        return MixedAnswer(refused=(f"splits across offers: {why}",))
    rates = {s.offer: _SeatRates(job, s) for s in seats}
    plans: list[MixedPlan] = []
    refused: list[str] = []
    for a in seats:
        if job.producer.weight_bytes > a.hw.memory_bytes:
            continue  # the offer's own plans say why
        for b in seats:
            if a.offer == b.offer or a.provider != b.provider:
                continue
            if a.hw.network_bytes_per_s <= 0 or b.hw.network_bytes_per_s <= 0:
                refused.append(_no_network_reason(a, b))
                continue
            try:
                kept, reason = _pair(job, rates[a.offer], rates[b.offer], max_gpus)
            except JobError as exc:  # a producer's peak the SKU does not state
                refused.append(f"{a.offer} + {b.offer}: {exc.reason}")
                continue
            plans += [MixedPlan(a.offer, b.offer, p) for p in kept]
            if reason is not None:
                refused.append(reason)
    return MixedAnswer(tuple(plans), tuple(dict.fromkeys(refused)))
