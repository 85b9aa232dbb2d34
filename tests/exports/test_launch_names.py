"""The SKU launch-name registry (optimizer/inputs/launch_names.py): one row per SKU of the bundled hardware file,
read by the Kubernetes and SkyPilot exports and by the SkyPilot catalog import; the vendor a pod asks for
is the SKU's ``vendor``, not a guess from its name."""

from __future__ import annotations

import yaml
from paths import ROOT

from optimizer import CheckRequest, check, load_catalog, load_job
from optimizer.inputs import skypilot as skypilot_import
from optimizer.inputs.catalog import vendor_in
from optimizer.inputs.launch_names import LAUNCH_NAMES, NO_NAMES, launch_names, vendor_of
from optimizer.present.exports import export, skypilot_accelerator

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


def test_the_cli_export_asks_kubernetes_for_the_vendor_the_users_catalog_gives(tmp_path):
    """A GPU only the user's catalog has, of vendor AMD, is exported by the CLI as amd.com/gpu (the CLI passes
    the catalog's vendor, as the service does)."""
    from typer.testing import CliRunner

    from optimizer.cli import app

    catalog = tmp_path / "amd.yaml"
    catalog.write_text(
        "skus:\n  - {name: Accel-X, vendor: AMD, memory: 192GB, hbm_bandwidth_gb_per_s: 5300, dense_bf16_tflops: 1300,"
        " intra_node_bandwidth_gb_per_s: 896, gpus_per_node: 8}\noffers:\n  - {name: accel-x, sku: Accel-X, price: 3}\n"
    )
    ask = ["check", "--model", "llama-3.1-8b", "--tokens", "1B", "--sku", "Accel-X", "--gpus", "8"]
    result = CliRunner().invoke(app, [*ask, "--catalog", str(catalog), "--export", "kubernetes", "--out", "-"])
    assert result.exit_code == 0, result.output
    assert "amd.com/gpu: '8'" in result.output and "nvidia.com/gpu" not in result.output
    alias = CliRunner().invoke(app, [*ask, "--catalog", str(catalog), "--export", "k8s", "--out", "-"])
    assert alias.exit_code == 0 and "amd.com/gpu: '8'" in alias.output  # an export alias is a kind too
