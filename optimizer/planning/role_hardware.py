"""One GPU model as a role job's planner sees it (issue 52, docs/roles.md): the catalog's figures in base units,
the offer's price, and the defaults a role job shares with single-role jobs. Its own module so that the role
pipeline (planning/roles.py) and the GRPO step (planning/grpo.py) both read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import JobError
from ..inputs.catalog import host_gpus
from ..inputs.schema import Assumptions, Sku
from ..physics.constants import DEFAULT_COMPUTE_EFFICIENCY, FALLBACK_COMPUTE_EFFICIENCY

Peak = Literal["bf16", "fp8"]
# A job's defaults as single-role jobs take them (docs/design.md sections 5.3 and 5.6): achieved over nominal
# link bandwidth, and the share of the trained role's data-parallel traffic hidden behind its compute.
DEFAULT_LINK_EFFICIENCY: float = Assumptions.model_fields["link_efficiency"].default
DEFAULT_OVERLAP: float = Assumptions.model_fields["overlap"].default


@dataclass(frozen=True)
class RoleHardware:
    """One GPU model as the roles see it, in base units, with its price."""

    sku: str
    peak_bf16_flops_per_s: float
    peak_fp8_flops_per_s: float | None
    hbm_bytes_per_s: float
    intra_node_bytes_per_s: float  # bidirectional, the vendors' convention (NVLink, or a PCIe slot)
    memory_bytes: float
    gpus_per_node: int
    peer_to_peer: bool  # NVLink between the node's GPUs; otherwise a tensor bounces through host memory
    compute_efficiency: float  # the training role's share of the 16-bit peak (docs/design.md section 5.10)
    price_usd_per_gpu_hour: float
    network_bytes_per_s: float = 0.0  # one direction of a GPU's network beyond its node (roles spanning nodes)
    gpus_per_host: int = 0  # an operating-system host's GPUs (NVL72: a tray of 4); 0: the node's

    @classmethod
    def from_sku(cls, sku: Sku, price_usd_per_gpu_hour: float, compute_efficiency: float | None = None) -> RoleHardware:
        """The catalog's figures (catalogs/hardware.yaml); the efficiency as gpuplan defaults it: the SKU's
        ``default_mfu``, else the per-form-factor default. A PCIe card's GPUs exchange through host memory."""
        default = sku.default_mfu or DEFAULT_COMPUTE_EFFICIENCY.get(sku.form_factor, FALLBACK_COMPUTE_EFFICIENCY)
        return cls(
            sku=sku.name,
            peak_bf16_flops_per_s=sku.dense_bf16_tflops * 1e12,
            peak_fp8_flops_per_s=sku.dense_fp8_tflops * 1e12 if sku.dense_fp8_tflops else None,
            hbm_bytes_per_s=sku.hbm_bandwidth_gb_per_s * 1e9,
            intra_node_bytes_per_s=sku.intra_node_bandwidth_gb_per_s * 1e9,
            memory_bytes=float(sku.memory_reported_bytes or sku.memory_label_bytes),
            gpus_per_node=sku.gpus_per_node,
            peer_to_peer=sku.form_factor != "pcie",
            compute_efficiency=compute_efficiency if compute_efficiency is not None else default,
            price_usd_per_gpu_hour=price_usd_per_gpu_hour,
            network_bytes_per_s=(sku.network_gb_per_s_per_gpu or 0.0) * 1e9,
            gpus_per_host=sku.gpus_per_host or 0,
        )

    @property
    def host_gpus(self) -> int:
        """GPUs per operating-system host (a Ray node): inputs/catalog.host_gpus of this node and SKU."""
        return host_gpus(self.gpus_per_node, self.gpus_per_host or None)

    def peak_flops_per_s(self, peak: Peak) -> float:
        if peak == "fp8":
            if self.peak_fp8_flops_per_s is None:
                raise JobError(f"{self.sku} states no FP8 peak; give the forward role's MFU against bf16")
            return self.peak_fp8_flops_per_s
        return self.peak_bf16_flops_per_s
