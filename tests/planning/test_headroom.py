"""Memory headroom (issue 49): ``constraints.memory_headroom`` / ``--headroom``, memory a plan keeps free beyond its
modelled peak. A plan fits only if peak + headroom <= the usable capacity; every answer states the headroom in
force; a plan with little left says it is at the edge; bad input is one paragraph naming the flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from optimizer import CheckRequest, check, load_job, plan
from optimizer.cli import app
from optimizer.inputs.schema import Constraints
from optimizer.physics.memory import MEMORY_EDGE_SHARE, MEMORY_HEADROOM_DEFAULT, headroom_bytes
from optimizer.planning.plans import at_the_edge, headroom_gib

runner = CliRunner()
SFT_70B = "problems/llama-70b-within-5-days.yaml"
# 8 B200, FSDP ZeRO-3, micro-batch 1, full recompute: 150.4 of 167.6 GiB per GPU (17.2 GiB, 10.3 % free)
TIGHT = {"zero": 3, "tp": 1, "framework": "fsdp", "micro_batch": 1, "recompute": "full", "compare": False}
TIGHT_FLAGS = ["--sku", "B200", "--gpus", "8", "--zero", "3", "--tp", "1", "--framework", "fsdp"]
TIGHT_FLAGS += ["--micro-batch", "1", "--recompute", "full", "--no-compare"]


def write_job(tmp_path, headroom: str):
    """The 70B job with its constraints.memory_headroom."""
    data = yaml.safe_load(Path(SFT_70B).read_text())
    data["constraints"]["memory_headroom"] = headroom
    data["catalog"] = "default"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result


def with_headroom(problem, value):
    read = Constraints.model_validate({"memory_headroom": value}).memory_headroom
    return problem.model_copy(update={"constraints": problem.constraints.model_copy(update={"memory_headroom": read})})


@pytest.mark.parametrize(
    ("given", "read"),
    [("10%", "10%"), (" 7.5 % ", "7.5%"), ("8GiB", 8 * 2**30), ("8GB", 8e9), (0.1, "10%"), (0, 0.0), ("0%", "0%")],
)
def test_the_headroom_reads_as_a_share_or_a_size(given, read):
    assert Constraints.model_validate({"memory_headroom": given}).memory_headroom == read


@pytest.mark.parametrize("given", ["150%", "100%", "-5%", "abc", "-1GB", "ten%"])
def test_a_headroom_that_is_no_share_or_size_is_refused_with_the_forms(given):
    with pytest.raises(ValidationError) as err:
        Constraints.model_validate({"memory_headroom": given})
    assert "10%" in str(err.value) and "8GiB" in str(err.value)


def test_headroom_bytes_of_a_share_scale_with_capacity_and_a_size_does_not():
    assert float(headroom_bytes("10%", 80e9)) == pytest.approx(8e9)
    assert float(headroom_bytes(8e9, 180e9)) == pytest.approx(8e9)
    assert float(headroom_bytes(None, 80e9)) == float(headroom_bytes(MEMORY_HEADROOM_DEFAULT, 80e9))


def test_a_plan_fits_only_if_its_peak_plus_the_headroom_is_within_capacity():
    problem = load_job(SFT_70B)
    loose = check(problem, CheckRequest("B200", 8, **TIGHT)).plan
    m = loose.memory_gib
    assert loose.fits and 17 < m.capacity - m.total < 18  # 17.2 GiB free
    for headroom, fits in (("10%", True), ("11%", False), ("17GiB", True), ("18GiB", False)):
        verdict = check(with_headroom(problem, headroom), CheckRequest("B200", 8, **TIGHT))
        assert verdict.fits is fits, headroom
        assert verdict.plan.memory_gib.total == pytest.approx(m.total)  # the peak is the same; only the fit moves


def test_the_chosen_plan_keeps_the_headroom():
    problem = load_job(SFT_70B)
    for headroom in ("10%", "20GiB"):
        best = plan(with_headroom(problem, headroom)).best
        assert best is not None
        m, read = best.memory_gib, Constraints.model_validate({"memory_headroom": headroom}).memory_headroom
        assert headroom_gib(read, m.capacity) > 8 and m.total + headroom_gib(read, m.capacity) <= m.capacity + 1e-9


def test_a_headroom_moves_a_plan_that_sat_near_the_capacity():
    # 70B LoRA within 2 days: without headroom the best plan takes 149.0 of 167.6 GiB (89 %) on B200; 12 % headroom
    # (20.1 GiB) rules that layout out, so another one, with the headroom kept, is chosen.
    result = run(
        "solve", "--model", "llama-3.1-70b", "--method", "lora", "--tokens", "2B", "--deadline", "2d", "-f", "json"
    )
    kept = run(
        "solve",
        "--model",
        "llama-3.1-70b",
        "--method",
        "lora",
        "--tokens",
        "2B",
        "--deadline",
        "2d",
        "--headroom",
        "12%",
        "-f",
        "json",
    )
    assert result.exit_code == 0 and kept.exit_code == 0, result.output + kept.output
    before, after = json.loads(result.stdout)["best"], json.loads(kept.stdout)["best"]
    assert before["memory_gib"]["total"] > 0.88 * before["memory_gib"]["capacity"]
    assert after["memory_gib"]["total"] <= 0.88 * after["memory_gib"]["capacity"] + 1e-9
    assert (before["strategy"], before["sku"]) != (after["strategy"], after["sku"])


def test_every_answer_states_the_headroom_in_force(tmp_path):
    solved = run("solve", SFT_70B)
    assert solved.exit_code == 0, solved.output
    default = f"memory headroom {MEMORY_HEADROOM_DEFAULT} of each GPU's usable memory (default; --headroom"
    assert default in " ".join(solved.output.split())
    checked = run("check", SFT_70B, *TIGHT_FLAGS, "--headroom", "2GiB")
    assert checked.exit_code == 0, checked.output
    assert "Note: memory headroom 2.1 GB (2.0 GiB) per GPU (constraints.memory_headroom" in checked.output
    options = run("options", write_job(tmp_path, "8%"))
    assert options.exit_code == 0, options.output
    assert "memory headroom 8% of each GPU's usable memory (constraints.memory_headroom" in " ".join(
        options.output.split()
    )


def test_help_names_the_flag_and_its_default():
    for command in ("solve", "check"):
        text = " ".join(run(command, "--help").output.split())
        assert "--headroom" in text and f"else {MEMORY_HEADROOM_DEFAULT}" in text


def test_a_plan_at_the_edge_says_so():
    # 17.2 of 167.6 GiB free, 7.2 GiB beyond a 10 GiB headroom, is under MEMORY_EDGE_SHARE (5 %): the verdict,
    # the bar and the note say so; without the headroom it is not at the edge
    problem = load_job(SFT_70B)
    tight = check(problem, CheckRequest("B200", 8, **TIGHT)).plan
    held = 10.0 * 2**30  # --headroom 10GiB, as constraints.memory_headroom reads it
    assert at_the_edge(tight, held) and not at_the_edge(tight, None)
    assert not at_the_edge(check(problem, CheckRequest("B200", 16, **TIGHT)).plan, held)
    r = run("check", SFT_70B, *TIGHT_FLAGS, "--headroom", "10GiB")
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert first.startswith("FITS") and first.endswith("at the edge")
    assert (
        f"this plan is at the edge: 150.4 of 167.6 GiB per GPU leaves 7.2 GiB beyond the headroom, under {MEMORY_EDGE_SHARE:.0%}"
        in " ".join(r.output.split())
    )


def test_the_memory_bar_draws_the_headroom():
    r = run("check", SFT_70B, *TIGHT_FLAGS, "--headroom", "2%")
    assert r.exit_code == 0, r.output
    bar = r.output.splitlines()[1]
    assert bar.startswith("[") and "|" in bar and "memory headroom 3.4 GiB from the |" in bar
    first = r.output.splitlines()[0]
    assert "17.2 GiB (18.5 GB) free, 3.4 GiB of it the memory headroom (2% of each GPU's usable memory)" in first


@pytest.mark.parametrize("command", ["solve", "check"])
@pytest.mark.parametrize("value", ["150%", "abc"])
def test_bad_headroom_is_one_paragraph_naming_the_flag(command, value):
    extra = TIGHT_FLAGS if command == "check" else []
    r = run(command, SFT_70B, *extra, "--headroom", value)
    assert r.exit_code == 2, r.output
    assert "'--headroom'" in r.output and value in r.output and "10%" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_save_writes_the_headroom_so_the_saved_question_asks_the_same(tmp_path):
    saved = tmp_path / "job.yaml"
    first = run("check", SFT_70B, *TIGHT_FLAGS, "--headroom", "11%", "--save", saved, "-f", "json")
    assert first.exit_code == 0, first.output
    assert yaml.safe_load(saved.read_text())["constraints"]["memory_headroom"] == "11%"
    again = run("check", saved, *TIGHT_FLAGS, "-f", "json")
    assert again.exit_code == 0, again.output
    assert json.loads(first.stdout)["fits"] is json.loads(again.stdout)["fits"] is False
    said = run("check", saved, *TIGHT_FLAGS)
    assert "memory headroom 11% of each GPU's usable memory (constraints.memory_headroom" in " ".join(
        said.output.split()
    )
    solved = run("solve", SFT_70B, "--headroom", "8GiB", "--save", saved, "-f", "json")
    assert yaml.safe_load(saved.read_text())["constraints"]["memory_headroom"] == 8 * 2**30
    assert json.loads(run("solve", saved, "-f", "json").stdout)["best"] == json.loads(solved.stdout)["best"]


def test_a_chosen_plan_at_the_edge_says_so():
    # 8 B200 for the 70B SFT: FSDP ZeRO-3 with full recompute takes 150.4 of 167.6 GiB; a 6 % headroom (10.1 GiB)
    # leaves 7.1 GiB, under MEMORY_EDGE_SHARE of the GPU
    args = ["--gpu-types", "B200", "--max-gpus", "8", "--framework", "fsdp", "--deadline", "30d", "--headroom", "6%"]
    r = run("solve", SFT_70B, *args)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "memory 150.4 of 167.6 GiB per GPU (+ 10.1 GiB headroom, at the edge);" in text
    assert "this plan is at the edge: 150.4 of 167.6 GiB per GPU leaves 7.1 GiB beyond the headroom" in text


def test_every_answer_format_states_the_headroom(tmp_path):
    # The headroom is an assumption every fit depends on: the API's notes carry it, so JSON, YAML and the
    # service state it as the table does (it was printed by the table renderer only).
    job = load_job(write_job(tmp_path, "10%"))
    assert any(n.startswith("memory headroom 10%") for n in plan(job, runners_up=False).notes)
    assert any(n.startswith("memory headroom 10%") for n in check(job, CheckRequest("B200", 8, compare=False)).notes)
    out = run("solve", write_job(tmp_path, "8GiB"), "--format", "json")
    assert out.exit_code == 0, out.output
    assert any(n.startswith("memory headroom 8") for n in json.loads(out.output)["notes"])
    table = run("solve", write_job(tmp_path, "8GiB"))
    assert table.output.count("memory headroom 8") == 1
