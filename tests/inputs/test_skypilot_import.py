"""Prices from SkyPilot's published catalogs (tests/data/skypilot: rows copied from skypilot-org/skypilot-catalog
with their commits): gpuplan catalog import skypilot writes a catalog that loads on the bundled hardware file's
SKUs and that solve plans on; rows it cannot map are counted with the reason, never guessed at.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from paths import DATA, ROOT
from typer.testing import CliRunner

from optimizer import cli, load_catalog, load_job, plan
from optimizer.inputs import skypilot

FIXTURES = DATA / "skypilot"
MALFORMED = DATA / "skypilot-malformed"
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


# --- inputs read defensively, imports that write only what loads (issue 47) ---

HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region,GpuInfo\n"
GOOD = "p5.48xlarge,H100,8,192,2048,98.32,,us-east-1,\n"


def write_csv(folder: Path, text: str | bytes, cloud: str = "aws") -> Path:
    path = folder / cloud / "vms.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def import_to(tmp_path: Path, source: Path, *extra: str):
    out = tmp_path / "imported.yaml"
    r = runner.invoke(cli.app, ["catalog", "import", "skypilot", "--from", str(source), "--out", str(out), *extra])
    return r, out


def plans_on(out: Path) -> None:
    """The written catalog loads, and solve plans on it (exit 0), as a user would run it."""
    r = runner.invoke(cli.app, ["solve", str(ROOT / "problems" / "llama-8b-lora.yaml"), "--catalog", str(out), "-q"])
    assert r.exit_code == 0, r.output


def test_a_utf8_bom_as_excel_saves_csv_is_read(tmp_path):
    source = write_csv(tmp_path / "sky", b"\xef\xbb\xbf" + (HEADER + GOOD).encode())
    r, out = import_to(tmp_path, source)
    assert r.exit_code == 0, r.output
    assert [o.name for o in load_catalog(str(out)).offers] == ["aws-p5.48xlarge"]


def test_a_latin1_byte_is_read_as_latin1_and_said(tmp_path):
    row = "p5.48xlarge,H100,8,192,2048,98.32,,S\xe3o Paulo,\n"  # 'São Paulo' as latin-1 writes it
    source = write_csv(tmp_path / "sky", (HEADER + row).encode("latin-1"))
    r, out = import_to(tmp_path, source)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    catalog = load_catalog(str(out))
    assert "latin-1" in catalog.description
    assert "São Paulo" in catalog.offers[0].source
    plans_on(out)


def test_a_field_longer_than_the_csv_modules_limit_is_read(tmp_path):
    gpu_info = '"' + "x" * 300_000 + '"'  # Python's csv refuses fields over 131,072 characters by default
    source = write_csv(tmp_path / "sky", HEADER + GOOD.rstrip(",\n") + "," + gpu_info + "\n")
    r, out = import_to(tmp_path, source)
    assert r.exit_code == 0, r.output
    assert len(load_catalog(str(out)).offers) == 1


def test_a_vms_csv_that_is_a_folder_is_refused_naming_it(tmp_path):
    (tmp_path / "sky" / "v7" / "aws" / "vms.csv").mkdir(parents=True)
    r, _ = import_to(tmp_path, tmp_path / "sky")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "vms.csv" in r.stderr and "not a regular file" in r.stderr


def test_check_out_refuses_the_file_the_import_reads_and_a_link_to_it(tmp_path):
    source = write_csv(tmp_path / "sky", HEADER + GOOD)
    files = skypilot.catalog_files(tmp_path / "sky", None)
    link = tmp_path / "link.yaml"
    link.symlink_to(source)
    for out in (source, link, tmp_path / "sky" / "aws" / ".." / "aws" / "vms.csv"):
        with pytest.raises(skypilot.ArgumentError) as refused:
            skypilot.check_out(out, files)
        assert refused.value.field == "out"
    skypilot.check_out(tmp_path / "elsewhere.yaml", files)  # any other file is fine


@pytest.mark.parametrize("onto", ["the file", "a link"])
def test_import_out_onto_the_vms_csv_it_reads_from_a_folder_is_refused(tmp_path, onto):
    source = write_csv(tmp_path / "sky", HEADER + GOOD)
    before = source.read_bytes()
    out = source
    if onto == "a link":
        out = tmp_path / "link.yaml"
        out.symlink_to(source)
    r = runner.invoke(cli.app, ["catalog", "import", "skypilot", "--from", str(tmp_path / "sky"), "--out", str(out)])
    assert source.read_bytes() == before  # not overwritten
    assert r.exit_code == 2 and "--out" in r.stderr, r.output


HOSTILE_ROWS = [
    "p5.48xlarge,H100,8,192,2048,98.32,,us-east-1,",
    "P5.48XLARGE,H100,8,192,2048,97.32,,us-east-1,",  # the same name in another case
    "p5_48xlarge,H100,8,192,2048,96.32,,us-east-1,",  # and in other punctuation
    "tiny,H100,8,192,2048,0.0000001,,us-east-1,",  # rounds to $0 per GPU
    "huge,H100,8,192,2048,10000000,,us-east-1,",  # $10M/h
    "thousand,H100,1e3,192,2048,100,,us-east-1,",
    "million,H100,1000000,192,2048,100,,us-east-1,",
    "sixteen,H100,16,192,2048,100,,us-east-1,",  # more GPUs than an H100 node holds
    '"evil\nname: {x: 1}",H100,8,192,2048,50,,us-east-1,',
    '"also evil",H100\n# injected: true,8,192,2048,50,,us-east-1,',
    "g5.xlarge,A10G,1,4,16,1.0,,us-east-1,",
]


def test_rows_the_catalog_loader_would_refuse_are_left_out_and_the_import_loads(tmp_path):
    source = write_csv(tmp_path / "sky", HEADER + "\n".join(HOSTILE_ROWS) + "\n")
    r, out = import_to(tmp_path, source)
    assert r.exit_code == 0, r.output
    catalog = load_catalog(str(out))  # what the loader reads, with its own rules
    names = sorted(o.name for o in catalog.offers)
    assert len({n.lower().replace("_", "-") for n in names}) == len(names)
    assert sum(n in ("aws-p5.48xlarge", "aws-p5-48xlarge") for n in names) <= 2
    assert not {"aws-tiny", "aws-huge", "aws-thousand", "aws-million", "aws-sixteen"} & set(names)
    # every row left out is counted with why, in the command's message and the file's comment
    assert "loader would refuse" in r.stderr
    # the written file is YAML whose every comment line is a comment: nothing injected
    assert "injected" not in yaml.safe_load(out.read_text())
    plans_on(out)


def test_a_file_dated_in_the_future_writes_no_catalog_the_loader_refuses(tmp_path):
    import os

    source = write_csv(tmp_path / "sky", HEADER + GOOD)
    future_s = 2_092_000_000  # 2036
    os.utime(source, (future_s, future_s))
    r, out = import_to(tmp_path, source)
    assert "Traceback" not in r.output
    if r.exit_code == 0:
        plans_on(out)
    else:
        assert r.exit_code == 2 and "future" in r.stderr, r.output


def test_more_instance_types_than_a_catalog_takes_write_the_cheapest(tmp_path):
    from optimizer.inputs import units

    rows = [f"p{i},H100,8,192,2048,{50 + i / 1000:.3f},,us-east-1," for i in range(units.MAX_CATALOG_NODES + 300)]
    source = write_csv(tmp_path / "sky", HEADER + "\n".join(rows) + "\n")
    r, out = import_to(tmp_path, source)
    assert r.exit_code == 0, r.output
    catalog = load_catalog(str(out))
    assert len(catalog.offers) == units.MAX_CATALOG_NODES
    assert "aws-p0" in {o.name for o in catalog.offers}  # the cheapest kept
    assert "node counts a catalog takes" in r.stderr


def test_catalog_skypilot_over_hostile_caches_plans(tmp_path, monkeypatch):
    home = tmp_path / "home"
    cache = home / ".sky" / "catalogs" / "v7"
    write_csv(cache, HEADER + "\n".join(HOSTILE_ROWS) + "\n")
    write_csv(cache, (HEADER + "gpu_1x_h100_pcie,H100,1,26,200,2.49,,S\xe3o Paulo,\n").encode("latin-1"), "lambda")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    r = runner.invoke(cli.app, ["solve", str(ROOT / "problems" / "llama-8b-lora.yaml"), "--catalog", "skypilot", "-q"])
    assert r.exit_code == 0, r.output


def test_catalog_skypilot_with_a_cache_home_that_is_a_file_says_so(tmp_path, monkeypatch):
    home = tmp_path / "home"
    write_csv(home / ".sky" / "catalogs" / "v7", HEADER + GOOD)
    afile = tmp_path / "cache-file"
    afile.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(afile))
    r = runner.invoke(cli.app, ["solve", str(ROOT / "problems" / "llama-8b-lora.yaml"), "--catalog", "skypilot", "-q"])
    assert r.exit_code == 2 and "XDG_CACHE_HOME" in r.stderr and "Traceback" not in r.output, r.output


def test_catalog_skypilot_over_a_cached_vms_csv_that_is_a_folder_names_it(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".sky" / "catalogs" / "v7" / "aws" / "vms.csv").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    r = runner.invoke(cli.app, ["solve", str(ROOT / "problems" / "llama-8b-lora.yaml"), "--catalog", "skypilot", "-q"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "vms.csv" in r.stderr and "not a regular file" in r.stderr


def test_a_max_nodes_the_loader_refuses_is_refused_before_writing(tmp_path):
    r, out = import_to(tmp_path, FIXTURES, "--max-nodes", "2000")
    assert r.exit_code == 2 and "--max-nodes" in r.stderr and "Traceback" not in r.output, r.output
    assert not out.exists()
    r, out = import_to(tmp_path, FIXTURES, "--max-nodes", "1024")
    assert r.exit_code == 0, r.output
    load_catalog(str(out))


def test_a_folder_name_with_a_newline_writes_a_catalog_that_loads(tmp_path):
    # the files read are listed in the catalog's comment: each must stay one comment line
    source = write_csv(tmp_path / "sky\n- evil: {x: 1}\nname: injected", HEADER + GOOD)
    r, out = import_to(tmp_path, source)
    assert r.exit_code == 0, r.output
    catalog = load_catalog(str(out))
    assert catalog.name != "injected" and len(catalog.offers) == 1
