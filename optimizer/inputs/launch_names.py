"""How each launcher names a SKU: one row per SKU of the hardware file, one column per launcher.

The Kubernetes export asks for NVIDIA nodes by the driver's device name (GPU Feature Discovery's
``nvidia.com/gpu.product``) and for AMD nodes by PCI device id (AMD's node labeller's
``amd.com/gpu.device-id``); the SkyPilot export asks for SkyPilot's accelerator name, with a note where that
name may not be what the user wants; ``gpuplan catalog import skypilot`` reads SkyPilot's catalog files,
whose accelerator names (lower-cased) map back to the SKU. A SKU without a row, or a column left empty, has
no such name: the launcher says so. Which vendor's resource a pod asks for is the SKU's ``vendor`` in the
hardware file (``vendor_of``), not a guess from its name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .bundled import bundled_dir
from .reader import read_bundled_yaml
from .schema import Sku, sku_key

# Where the names come from, quoted in the exports' comments.
AMD_LABELLER_SOURCE = "ROCm/k8s-device-plugin cmd/k8s-node-labeller/main.go and amdgpu.ids at ed76468"
SKYPILOT_VERSION = "skypilot 0.14.1 (7e59597)"
SKYPILOT_SOURCE = (
    f"{SKYPILOT_VERSION}: sky/utils/gpu_names.py CANONICAL_GPU_NAMES, sky/catalog/__init__.py "
    "get_common_gpus, sky/catalog/data_fetchers/fetch_runpod.py GPU_NAME_OVERRIDES and "
    "sky/provision/runpod/utils.py GPU_NAME_MAP"
)


@dataclass(frozen=True)
class LaunchNames:
    """One SKU's names, one field per launcher.

    ``nvidia_device``: the NVIDIA driver's device name, as RunPod's GPU ids spell them
    (sky/provision/runpod/utils.py), which GPU Feature Discovery writes as ``nvidia.com/gpu.product``.
    ``amd_device_ids``: the PCI device ids of AMD's node labeller (``AMD_LABELLER_SOURCE``).
    ``skypilot``: the accelerator name a SkyPilot task asks for (``SKYPILOT_SOURCE``; None: SkyPilot has
    none, the SKU's own name goes out with a note), ``skypilot_note`` where that name may not be what the
    user wants. ``skypilot_catalog``: the names SkyPilot's catalog files (``vms.csv`` AcceleratorName,
    lower-cased) give this SKU, which an import reads back to it."""

    nvidia_device: str | None = None
    amd_device_ids: tuple[str, ...] = ()
    skypilot: str | None = None
    skypilot_note: str | None = None
    skypilot_catalog: tuple[str, ...] = ()


NO_NAMES = LaunchNames()

# SkyPilot's catalog (skypilot-org/skypilot-catalog catalogs/v8/common/accelerators.csv at d4d53f0) lists
# every ``skypilot`` name below (older copies lack B300 and RTXPRO6000), H800 under no name.
LAUNCH_NAMES: dict[str, LaunchNames] = {
    "A100-40GB": LaunchNames(
        skypilot="A100",  # SkyPilot's A100 is the 40 GB SXM4 (gpu_names.CANONICAL_GPU_MEMORY_GIB; AWS p4d, GCP a2)
        skypilot_catalog=("a100",),
    ),
    "A100-80GB": LaunchNames(
        nvidia_device="NVIDIA A100-SXM4-80GB",
        skypilot="A100-80GB",
        skypilot_note="SkyPilot's A100-80GB is a PCIe card on RunPod (A100-80GB-SXM there)",
        skypilot_catalog=("a100-80gb", "a100-80gb-sxm"),
    ),
    "H100-SXM": LaunchNames(
        nvidia_device="NVIDIA H100 80GB HBM3",
        skypilot="H100",
        skypilot_note="SkyPilot's H100 is a PCIe card on RunPod: ask for H100-SXM there (or on Cudo)",
        skypilot_catalog=("h100", "h100-sxm", "h100-mega"),
    ),
    "H100-PCIe": LaunchNames(
        nvidia_device="NVIDIA H100 PCIe",
        skypilot="H100",  # fetch_runpod.py GPU_NAME_OVERRIDES: 'H100-PCIe' -> 'H100'
        skypilot_catalog=("h100-pcie",),
    ),
    "H800": LaunchNames(),  # no name in SkyPilot's code or its catalog; no device name on record
    "H200": LaunchNames(nvidia_device="NVIDIA H200", skypilot="H200", skypilot_catalog=("h200", "h200-sxm")),
    "B200": LaunchNames(nvidia_device="NVIDIA B200", skypilot="B200", skypilot_catalog=("b200",)),
    "B300": LaunchNames(skypilot="B300", skypilot_catalog=("b300",)),  # Nebius' B300:8 (sky/clouds/nebius.py)
    "GB200": LaunchNames(skypilot_catalog=("gb200",)),
    "GB300": LaunchNames(skypilot_catalog=("gb300",)),
    "RTX-PRO-6000": LaunchNames(
        nvidia_device="NVIDIA RTX PRO 6000 Blackwell Server Edition",
        skypilot="RTXPRO6000",  # get_common_gpus; GCP g4, AWS and RunPod (server edition)
        skypilot_catalog=("rtxpro6000", "rtx-pro-6000"),
    ),
    "L40S": LaunchNames(nvidia_device="NVIDIA L40S", skypilot="L40S", skypilot_catalog=("l40s",)),
    "MI300X": LaunchNames(
        amd_device_ids=("74a1", "74a9", "74b5", "74bd"),  # amdgpu.ids: MI300X, MI300X HF, VF, HF
        skypilot="MI300X",  # fetch_runpod.py, GPU_NAME_MAP 'AMD Instinct MI300X OAM'
        skypilot_catalog=("mi300x",),
    ),
}


def launch_names(sku: str) -> LaunchNames:
    """The launch names of a SKU by its canonical name (a plan's ``sku``); ``NO_NAMES`` for one without a row."""
    return LAUNCH_NAMES.get(sku, NO_NAMES)


def skypilot_catalog_skus() -> dict[str, str]:
    """SkyPilot's catalog accelerator names (lower-case) -> the SKU each is read as."""
    return {name: sku for sku, row in LAUNCH_NAMES.items() for name in row.skypilot_catalog}


@functools.cache
def bundled_skus() -> tuple[Sku, ...]:
    """The SKUs of the bundled hardware file (``catalogs/hardware.yaml``)."""
    data = read_bundled_yaml(bundled_dir("catalogs") / "hardware.yaml", "hardware")
    return tuple(Sku.model_validate(row) for row in data["skus"])


def vendor_of(sku: str) -> str:
    """The vendor (``Sku.vendor``) of the bundled hardware file's SKU of that name or alias; the schema's
    default (NVIDIA) for a SKU the file lacks, whose catalog the caller should ask instead."""
    key = sku_key(sku)
    for row in bundled_skus():
        if key == sku_key(row.name) or key in (sku_key(a) for a in row.aliases):
            return row.vendor
    return str(Sku.model_fields["vendor"].default)


def is_amd(vendor: str) -> bool:
    """Whether a vendor (``Sku.vendor``) is AMD, whose GPUs Kubernetes schedules as ``amd.com/gpu``."""
    return vendor.strip().upper() == "AMD"
