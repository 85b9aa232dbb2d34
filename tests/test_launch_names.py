"""The SKU launch-name registry (optimizer/inputs/launch_names.py): one row per SKU of the bundled hardware file,
read by the Kubernetes and SkyPilot exports and by the SkyPilot catalog import; the vendor a pod asks for
is the SKU's ``vendor``, not a guess from its name."""

from __future__ import annotations

from pathlib import Path

import yaml

from optimizer import CheckRequest, check, load_catalog, load_job
from optimizer.inputs import skypilot as skypilot_import
from optimizer.inputs.catalog import vendor_in
from optimizer.inputs.launch_names import LAUNCH_NAMES, NO_NAMES, launch_names, vendor_of
from optimizer.present.exports import export, skypilot_accelerator

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "problems"

HARDWARE = [s["name"] for s in yaml.safe_load((ROOT / "catalogs" / "hardware.yaml").read_text())["skus"]]


def test_every_bundled_sku_has_one_row_and_every_row_a_sku():
    assert sorted(LAUNCH_NAMES) == sorted(HARDWARE)


def test_the_skypilot_import_reads_the_registrys_catalog_names():
    names = [name for row in LAUNCH_NAMES.values() for name in row.skypilot_catalog]
    assert len(names) == len(set(names)), "a SkyPilot catalog name read as two SKUs"
    assert all(name == name.lower() for name in names)
    read_as = {name: sku for sku, row in LAUNCH_NAMES.items() for name in row.skypilot_catalog}
    assert read_as == skypilot_import.ACCELERATORS
    assert skypilot_import.ACCELERATORS["h100"] == "H100-SXM" and skypilot_import.ACCELERATORS["a100"] == "A100-40GB"


def test_a_sku_without_a_row_goes_out_under_its_own_name():
    assert launch_names("X-CUSTOM") is NO_NAMES
    assert skypilot_accelerator("X-CUSTOM") == "X-CUSTOM"
    assert skypilot_accelerator("H100-SXM") == "H100" and skypilot_accelerator("RTX-PRO-6000") == "RTXPRO6000"


def test_vendors_come_from_the_hardware_file():
    catalog = load_catalog("hardware")
    for sku in catalog.skus:
        assert vendor_of(sku.name) == sku.vendor == vendor_in(catalog, sku.name)
        assert all(vendor_of(alias) == sku.vendor for alias in sku.aliases)
    assert vendor_of("MI300X") == "AMD" and vendor_of("amd-mi300x") == "AMD" and vendor_of("H100-SXM") == "NVIDIA"
    assert vendor_of("MI999-unknown") == "NVIDIA"  # the schema's default: no guess from the name
    assert vendor_in(catalog, "no-such-gpu") is None


def _kubernetes_plan():
    job = load_job(PROBLEMS / "llama-70b-within-5-days.yaml")
    return job, check(job, CheckRequest("H100", 8, compare=False, offload="optimizer")).plan


def test_the_kubernetes_resource_follows_the_vendor_not_the_name():
    job, plan = _kubernetes_plan()
    amd_named_nvidia = plan.model_copy(update={"sku": "MI-like-nvidia"})
    text = export(amd_named_nvidia, "kubernetes", job=job.job)
    assert "nvidia.com/gpu: '8'" in text and "amd.com/gpu" not in text
    custom_amd = plan.model_copy(update={"sku": "Custom-Accelerator"})
    text = export(custom_amd, "kubernetes", job=job.job, vendor="AMD")
    assert "amd.com/gpu: '8'" in text and "nvidia.com/gpu" not in text
    assert "amd.com/gpu.device-id" not in text  # no device ids on record for it: nothing preferred
    mi300x = export(plan.model_copy(update={"sku": "MI300X"}), "kubernetes", job=job.job)
    assert "amd.com/gpu.device-id" in mi300x and "74a1" in mi300x
