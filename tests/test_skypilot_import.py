"""Prices from SkyPilot's published catalogs (tests/data/skypilot: rows copied from skypilot-org/skypilot-catalog
with their commits): gpuplan catalog import skypilot writes a catalog that loads on the bundled hardware file's
SKUs and that solve plans on; rows it cannot map are counted with the reason, never guessed at.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from optimizer import cli, load_catalog, load_job, plan
from optimizer.inputs import skypilot

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "data" / "skypilot"
MALFORMED = ROOT / "tests" / "data" / "skypilot-malformed"
runner = CliRunner()


def imported(**kwargs) -> skypilot.Imported:
    return skypilot.read_offers(
        skypilot.catalog_files(kwargs.pop("source", FIXTURES), kwargs.pop("clouds", None)), **kwargs
    )


def test_each_instance_type_becomes_an_offer_priced_per_gpu():
    offers = {o["name"]: o for o in imported().offers}
    # Lambda's gpu_8x_a100 is the 40 GB A100 at $10.32/h for 8; its H100 instance names give the form factor
    assert offers["lambda-gpu_8x_a100".replace("_", "-")]["sku"] == "A100-40GB"
    assert offers["lambda-gpu-8x-a100"]["price"] == pytest.approx(10.32 / 8)
    assert offers["lambda-gpu-1x-h100-pcie"]["sku"] == "H100-PCIe"
    assert offers["lambda-gpu-8x-h100-sxm5"]["sku"] == "H100-SXM"
    assert offers["lambda-gpu-8x-h100-sxm5"]["price"] == pytest.approx(23.92 / 8)
    assert offers["lambda-gpu-8x-h100-sxm5"]["gpus_per_node"] == 8 and offers["lambda-gpu-8x-h100-sxm5"][
        "gpu_counts"
    ] == [8]
    # two regions at the same price are one offer (the cheapest region's)
    assert sum(name.startswith("lambda-gpu-8x-h100-sxm5") for name in offers) == 1
    assert offers["runpod-8x-a100-80gb-sxm-secure"]["sku"] == "A100-80GB"
    assert offers["runpod-1x-a100-80gb-sxm-secure"]["price"] == pytest.approx(1.89)


def test_rows_without_a_sku_are_counted_with_why():
    left_out = imported().left_out
    reasons = " | ".join(left_out)
    for name in ("V100", "A6000", "GH200", "RTXA6000"):
        assert f"{name} (no SKU in the hardware file)" in reasons
    # RunPod's A100-80GB is the PCIe card, which the hardware file does not have: not priced as the SXM4 A100
    assert left_out["A100-80GB (RunPod's A100-80GB is the PCIe card; the hardware file has the SXM4 A100 only)"] == 2
    assert not any(o["name"] == "runpod-1x-a100-80gb-secure" for o in imported().offers)


def test_malformed_rows_are_left_out_and_the_good_one_kept():
    out = imported(source=MALFORMED / "aws" / "vms.csv")
    assert [o["name"] for o in out.offers] == ["aws-p4d.24xlarge", "aws-p5.48xlarge"]
    p5 = next(o for o in out.offers if o["name"] == "aws-p5.48xlarge")
    assert "spot_price" not in p5  # its only priced row has spot above on-demand: that spot price is left out
    reasons = " | ".join(out.left_out)
    assert "H100: no on-demand price" in reasons
    assert "A10G (no SKU in the hardware file)" in reasons
    assert "A100: a fractional or missing GPU count ('eight')" in reasons
    assert "a spot price above on-demand" in reasons
    p4d = next(o for o in out.offers if o["name"] == "aws-p4d.24xlarge")
    assert p4d["spot_price"] == pytest.approx(9.83 / 8)


def test_regions_asked_for_give_an_offer_each():
    names = [o["name"] for o in imported(clouds=["lambda"], regions=["us-east-1", "us-west-1"]).offers]
    assert "lambda-gpu-8x-h100-sxm5-us-east-1" in names and "lambda-gpu-8x-h100-sxm5-us-west-1" in names


def test_the_written_catalog_loads_on_the_bundled_skus_and_solve_plans_on_it(tmp_path):
    out = tmp_path / "sky.yaml"
    r = runner.invoke(cli.app, ["catalog", "import", "skypilot", "--from", str(FIXTURES), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "wrote" in r.stderr and "no SKU in the hardware file" in r.stderr
    catalog = load_catalog(str(out))
    bundled = {s.name: s for s in load_catalog("hardware").skus}
    for offer in catalog.offers:
        sku = next(s for s in catalog.skus if s.name == offer.sku or offer.sku in s.aliases)
        assert sku == bundled[sku.name]  # the same SKU facts as the hardware file
    assert yaml.safe_load(out.read_text())["hardware"] == "hardware"
    answer = plan(load_job(ROOT / "problems" / "llama-8b-lora.yaml"), catalog=catalog, runners_up=False)
    assert answer.best is not None and answer.best.offer in {o.name for o in catalog.offers}
    assert answer.best.provider in ("lambda", "runpod")


def test_bad_import_arguments_are_refused_naming_the_flag(tmp_path):
    r = runner.invoke(cli.app, ["catalog", "import", "skypilot", "--from", str(FIXTURES), "--clouds", "aws"])
    assert r.exit_code == 2 and "--clouds" in r.stderr and "lambda, runpod" in r.stderr, r.output
    r = runner.invoke(cli.app, ["catalog", "import", "azure-pricing"])
    assert r.exit_code == 2 and "catalog import skypilot" in r.stderr, r.output
    r = runner.invoke(cli.app, ["catalog", "import", "skypilot", "--from", str(tmp_path / "nowhere")])
    assert r.exit_code == 2 and "--from" in r.stderr, r.output
    r = runner.invoke(cli.app, ["catalog", "default", "extra"])
    assert r.exit_code == 2, r.output


def test_catalog_skypilot_plans_on_the_cached_files(tmp_path, monkeypatch):
    # --catalog skypilot reads what SkyPilot caches under ~/.sky/catalogs (here a copy of the fixtures), once
    import shutil

    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "v7", home / ".sky" / "catalogs" / "v7")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    r = runner.invoke(cli.app, ["solve", str(ROOT / "problems" / "llama-8b-lora.yaml"), "--catalog", "skypilot", "-q"])
    assert r.exit_code == 0, r.output
    assert "lambda-" in r.stdout or "runpod-" in r.stdout
    (cached,) = (tmp_path / "cache" / "gpuplan").glob("skypilot-*.yaml")
    assert load_catalog("skypilot").offers == load_catalog(str(cached)).offers
    # no cache: says how to get one
    monkeypatch.setenv("HOME", str(tmp_path / "empty"))
    r = runner.invoke(cli.app, ["catalog", "skypilot"])
    assert r.exit_code == 2 and "sky show-gpus" in r.stderr, r.output
