"""Hardware and offers: a GPU model (``Sku``), a row of a price sheet (``Offer``), and a catalog of them,
with the checks that a GPU's memory figures agree with its label."""

from __future__ import annotations

import datetime as dt

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .. import units
from .base import _Model
from .types import (
    Bytes,
    Name,
    Seconds,
    UsdPerHour,
)

# A GPU's memory as nvidia-smi / rocm-smi reports it (a SKU's memory_reported), or as a provider's VM delivers it
# (an offer's memory_delivered), may exceed the vendor's label by at most this factor. Labels are nominal, and
# often GiB written as GB (2^30 / 10^9 = 1.074): the bundled figures run up to 1.074 x their label (A100-80GB
# 81,920 MiB = 85.9 GB; H100 80GB 81,559 MiB = 85.5 GB; H200 143,771 MiB = 150.8 GB for 141 GB; B200 183,359 MiB
# = 192.3 GB for 180 GB; MI300X 205.8 GB for 192 GB). More is another unit (40 GiB on an 8 GB card) or another
# quantity (2 TB, a node's memory, on one B200), and would plan models the GPU cannot hold.
MEMORY_ABOVE_LABEL_MAX = 1.1
# Any memory figure is at least 1 GiB, and a reported or delivered one at least a tenth of the label: below
# 1 GiB no GPU holds the CUDA context and NCCL buffers gpuplan reserves before any model (1.5 GiB,
# physics/constants.py FRAMEWORK_RESERVE_*), and the smallest share of a GPU anyone rents is a MIG 1g slice,
# an eighth of its memory (A100-40GB 1g.5gb, H100 1g.10gb, H200 1g.18gb, B200 1g.23gb: 12.5-12.8 %). Less is a
# units slip (1e-9GB, MB for GB).
MEMORY_MIN_BYTES = 2.0**30
MEMORY_OF_LABEL_MIN = 0.1


def _memory_text(n_bytes: float) -> str:
    if n_bytes >= 1e8:
        return f"{n_bytes / units.GB:,.1f} GB = {n_bytes / units.GIB:,.1f} GiB"
    return f"{n_bytes:,.4g} byte{'' if n_bytes == 1 else 's'}"


def memory_figure_problem(field: str, value: float, label: float, reference: float, against: str) -> str | None:
    """What is wrong with a reported or delivered memory figure ``value`` (bytes) of a GPU labelled ``label``,
    checked against ``reference`` (the label, or what the GPU reports), which ``against`` names with a ``{}``
    for the figure ('the label (memory {})'); None if nothing is."""
    if value > MEMORY_ABOVE_LABEL_MAX * reference:
        return (
            f"{field} {_memory_text(value)} is {value / reference:,.3g} x {against.format(_memory_text(reference))}; "
            f"a GPU's memory is at most {MEMORY_ABOVE_LABEL_MAX:g} x its label (a B200 labelled 180 GB reports "
            "183,359 MiB = 192.3 GB), and no VM gets more than its GPU has: give the per-GPU figure in its unit "
            "(MiB, GiB, GB), not a node's total"
        )
    floor = max(MEMORY_MIN_BYTES, MEMORY_OF_LABEL_MIN * label)
    if value < floor:
        which = "1 GiB" if floor == MEMORY_MIN_BYTES else f"a tenth of the label ({_memory_text(label)})"
        return (
            f"{field} {_memory_text(value)} is less than {which}: less than any GPU has, or a MIG slice of one "
            "(an eighth of it); check its unit (MiB, GiB, GB)"
        )
    return None


def _checked_not_ahead(value: dt.date | None) -> dt.date | None:
    """A ``checked`` date is when someone read the figures, so not later than tomorrow (a day of slack for
    time zones): a later one is a typo (2062 for 2026) that would show stale prices as fresh."""
    if value is not None and value > dt.date.today() + dt.timedelta(days=1):
        raise ValueError("the date is in the future: give the day the figures were read (YYYY-MM-DD)")
    return value


class Sku(_Model):
    """One accelerator model with sourced, dated specs (dense, never sparse, TFLOPS)."""

    name: Name = Field(description="Canonical name, e.g. B200; matched case-insensitively.")
    aliases: list[Name] = Field(default_factory=list, description="Other names: H100, b200-hgx, ...")
    vendor: str = "NVIDIA"
    architecture: str = ""
    form_factor: str = Field("sxm", description="sxm, pcie or oam: decides the default efficiency class.")
    memory_label_bytes: Bytes = Field(alias="memory", gt=0, description="Vendor label, e.g. 180GB.")
    memory_reported_bytes: Bytes | None = Field(
        None, alias="memory_reported", description="What nvidia-smi/rocm-smi reports, e.g. 183359MiB."
    )
    board_memory_bytes: Bytes | None = Field(
        None, alias="board_memory", description="Board total as the vendor's HGX table states it (e.g. 2.1TB)."
    )
    hbm_bandwidth_gb_per_s: float = Field(gt=0, description="Memory bandwidth per GPU, GB/s (10^9).")
    dense_bf16_tflops: float = Field(gt=0, description="Dense BF16 tensor TFLOPS (vendors quote sparse: halve).")
    dense_fp8_tflops: float | None = Field(None, gt=0)
    dense_fp4_tflops: float | None = Field(None, gt=0)
    interconnect: str = Field("", description="Intra-node link, e.g. NVLink 5 or PCIe Gen5 x16.")
    intra_node_bandwidth_gb_per_s: float = Field(
        gt=0, description="Per-GPU intra-node bandwidth, bidirectional (vendor convention), GB/s."
    )
    network_gb_per_s_per_gpu: float | None = Field(None, gt=0, description="Scale-out network per GPU, GB/s.")
    host_link_gb_per_s: float | None = Field(None, gt=0, description="GPU-host link per GPU per direction, GB/s.")
    gpus_per_node: int = Field(8, ge=1, le=72)
    gpus_per_host: int | None = Field(
        None,
        description="GPUs one operating-system host holds where NVLink joins several hosts into one node "
        "(GB200/GB300 NVL72: compute trays of 4); default: gpus_per_node.",
    )
    default_mfu: float | None = Field(None, gt=0, le=1, description="Compute efficiency default for this SKU.")
    checked: dt.date | None = None
    sources: list[str] = Field(default_factory=list)
    notes: str = ""

    _checked = field_validator("checked")(_checked_not_ahead)

    @field_validator("memory_label_bytes")
    @classmethod
    def _a_gpu_memory(cls, value: float) -> float:
        if value < MEMORY_MIN_BYTES:
            raise ValueError(
                f"memory {_memory_text(value)} is less than 1 GiB, less than any GPU has (the CUDA context alone "
                "takes about that); check its unit (GB, GiB)"
            )
        return value

    @field_validator("memory_reported_bytes")
    @classmethod
    def _reported_near_label(cls, value: float | None, info: ValidationInfo) -> float | None:
        label = info.data.get("memory_label_bytes")
        if value is not None and label:
            problem = memory_figure_problem("memory_reported", value, label, label, "the label (memory {})")
            if problem:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _host_fits_node(self) -> Sku:
        if self.gpus_per_host is not None and self.gpus_per_node % self.gpus_per_host:
            raise ValueError(
                f"gpus_per_host {self.gpus_per_host} does not divide gpus_per_node {self.gpus_per_node}: a node (the "
                "GPUs NVLink joins) holds whole hosts (an NVL72 rack: 18 trays of 4)"
            )
        return self

    def dense_tflops(self, precision: str) -> float | None:
        return {
            "bf16": self.dense_bf16_tflops,
            "fp16": self.dense_bf16_tflops,
            "fp8": self.dense_fp8_tflops,
            "nvfp4": self.dense_fp4_tflops,
        }[precision]


class Offer(_Model):
    """A row of a provider's price sheet."""

    name: Name = Field(description="Unique offer id within the catalog, e.g. nodus-b200.")
    sku: str = Field(description="Name or alias of a SKU in the hardware file.")
    provider: str = ""
    aliases: list[Name] = Field(default_factory=list, description="Names users select it by (type: B200).")
    price_usd_per_gpu_hour: UsdPerHour = Field(alias="price", gt=0)
    spot_price_usd_per_gpu_hour: UsdPerHour | None = Field(None, alias="spot_price", gt=0)
    spot_preemptions_per_node_hour: float = Field(
        0.02, ge=0, description="Expected preemptions per node-hour on spot capacity (assumed 0.02 when not stated)."
    )
    gpus_per_node: int = Field(8, ge=1, le=72)
    gpu_counts: list[int] | None = Field(
        None, description="GPU counts rentable on one node; default: the divisors-of-two up to gpus_per_node."
    )
    max_nodes: int = Field(1, ge=1, description="Supply: most nodes one job can get.")
    memory_delivered_bytes: Bytes | None = Field(None, alias="memory_delivered", description="Memory delivered a GPU.")
    billing_increment_s: Seconds = Field(60.0, alias="billing_increment", gt=0)
    whole_nodes: bool = Field(True, description="Multi-node jobs rent whole nodes.")
    checked: dt.date | None = None
    source: str = ""
    illustrative: bool = False

    _checked = field_validator("checked")(_checked_not_ahead)

    @model_validator(mode="after")
    def _spot_below_on_demand(self) -> Offer:
        spot = self.spot_price_usd_per_gpu_hour
        if spot is not None and spot > self.price_usd_per_gpu_hour:
            # AWS caps a spot bid at the on-demand price; Google, Azure and the GPU clouds sell spot at a
            # discount: a spot price above on-demand is a swapped or mistyped column, and would plan the
            # dearer, preemptible capacity as if it were the bargain
            raise ValueError(
                f"spot_price ${spot:,.2f}/h is above price ${self.price_usd_per_gpu_hour:,.2f}/h: spot capacity is sold "
                "below on-demand; check whether the two are swapped"
            )
        return self

    @model_validator(mode="after")
    def _counts_fit_node(self) -> Offer:
        if self.gpu_counts is not None and not self.gpu_counts:
            raise ValueError(
                "gpu_counts is empty: list the GPU counts one node rents, or leave it out for the powers of two "
                "up to gpus_per_node"
            )
        for count in self.gpu_counts or []:
            if count < 1 or count > self.gpus_per_node:
                raise ValueError(f"gpu_counts entry {count} is outside 1..gpus_per_node ({self.gpus_per_node})")
        return self

    def single_node_counts(self) -> list[int]:
        if self.gpu_counts:
            return sorted(set(self.gpu_counts))
        counts, n = [], 1
        while n < self.gpus_per_node:
            counts.append(n)
            n *= 2
        return counts + [self.gpus_per_node]


class CatalogFile(_Model):
    """A catalog file as written: SKUs, offers, or includes of other catalogs."""

    name: str | None = None
    description: str = ""
    include: list[str] = Field(default_factory=list, description="Other catalogs (names or paths) to merge in.")
    hardware: str | None = Field(None, description="The hardware file the offers' SKUs come from.")
    skus: list[Sku] = Field(default_factory=list)
    offers: list[Offer] = Field(default_factory=list)


class Catalog(_Model):
    name: str
    description: str = ""
    skus: list[Sku]
    offers: list[Offer] = Field(default_factory=list)
    source_files: list[str] = Field(default_factory=list)
