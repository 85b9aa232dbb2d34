"""Exports of plans whose names are hostile (issue 47): an offer, SKU, provider or job name holding a newline
and a foreign ``#SBATCH --wrap=...`` line, quotes, ``$(...)``, backticks, YAML flow syntax or TOML tables.
Each export kind of the registry is read back by the format's own parser (``bash -n``, ``yaml.safe_load``,
``tomllib.loads``, ``json.loads``) and must have the same shape as the same plan's export under plain names:
no injected line, key or command, and each name one value (its own text, or the tool's sanitised name), or
the export is refused with a GpuplanError."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
import tomllib
import yaml
from paths import ROOT

from optimizer import GpuplanError, load_job, plan
from optimizer.present.exports import KINDS, LAUNCHERS, ExportJob, export, job_facts
from optimizer.results import Plan

PROBLEMS = ("llama-8b-lora.yaml", "seed-14b-full-finetune.yaml", "llama-70b-within-5-days.yaml")
INJECTED = "#SBATCH --wrap=rm -rf ~"
HOSTILE = {
    "newline-sbatch": f"H100\n{INJECTED}\nrm -rf ~",
    "quotes-and-substitution": "a'b\"c $(touch /tmp/pwned) `id` ${HOME} ; rm -rf ~ #",
    "yaml-flow": "x: {y: [1, 2]}\n- z: &a *a !!python/object/apply:os.system ['id']",
    "toml-table": 'v"\r\n[injected]\nkey = "value"\n',
    "line-separators": "a\x85b\u2028c\u2029d\x0be\x0cf\x1cg",
    "controls": "\x00\x1b[31mred\x7f\x9b\ttab",
}
FORMATS = {  # each export kind's file format, by what its file is
    "skypilot": "yaml",
    "kubernetes": "yaml",
    "nodus": "yaml",
    "accelerate": "yaml",
    "deepspeed": "json",
    "torchtitan": "toml",
    "megatron": "bash",
    "torchrun": "bash",
    "slurm": "bash",
}


def test_every_registered_export_kind_has_a_format_here():
    assert set(KINDS) == set(FORMATS) == set(LAUNCHERS)


@cache
def _plans() -> tuple[tuple[Plan, ExportJob], ...]:
    out = []
    for name in PROBLEMS:
        job = load_job(ROOT / "problems" / name)
        out.append((plan(job, runners_up=False).best, job_facts(job.job)))
    return tuple(out)


@cache
def _base(kind: str) -> tuple[Plan, ExportJob]:
    """A plan (and its job's facts) that ``kind`` writes under plain names."""
    for p, facts in _plans():
        try:
            export(p, kind, job=facts)
        except GpuplanError:
            continue
        return p, facts
    pytest.skip(f"no bundled plan that the {kind} export writes")


def _hostile(p: Plan, facts: ExportJob, text: str) -> tuple[Plan, ExportJob]:
    renamed = p.model_copy(update={"offer": f"offer {text}", "sku": p.sku + text, "provider": f"cloud {text}"})
    return renamed, dataclasses.replace(facts, name=f"job {text}")


def _export(renamed: tuple[Plan, ExportJob], kind: str) -> str:
    return export(renamed[0], kind, job=renamed[1])


def _shape(value, path: str = "") -> set[str]:
    """The paths of a parsed document's keys and list items (its shape, not its text)."""
    if isinstance(value, dict):
        return {path} | {q for k, v in value.items() for q in _shape(v, f"{path}/{k}")}
    if isinstance(value, list):
        return {path} | {q for i, v in enumerate(value) for q in _shape(v, f"{path}[{i}]")}
    return {path}


def _parse(kind: str, text: str):
    fmt = FORMATS[kind]
    if fmt == "yaml":
        return list(yaml.safe_load_all(text))
    if fmt == "json":
        return json.loads(text)
    if fmt == "toml":
        return tomllib.loads(text)
    return None


def _commands(text: str) -> list[str]:
    """A script's lines that are not comments (what bash runs), and its ``#SBATCH`` lines (what sbatch reads)."""
    return [line for line in text.splitlines() if not line.startswith("#") or line.startswith("#SBATCH")]


def _bash_parses(text: str, tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    script = tmp_path / "export.sh"
    script.write_bytes(text.encode("utf-8"))
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_a_hostile_name_stays_one_value_in_every_export(kind, hostile, tmp_path):
    base_plan, base_facts = _base(kind)
    plain = _export(_hostile(base_plan, base_facts, "plain"), kind)  # names of the same kinds, plain text
    p, facts = _hostile(base_plan, base_facts, HOSTILE[hostile])
    try:
        text = export(p, kind, job=facts)
    except GpuplanError:
        return  # refused, with gpuplan's error: nothing written
    text.encode("utf-8")  # what is written to a file
    for line in text.splitlines():
        assert not line.startswith(INJECTED), line  # sbatch reads #SBATCH from column 0
        assert not re.match(r"\s*\[injected\]", line), line
    if FORMATS[kind] == "bash":
        _bash_parses(text, tmp_path)
        # the same commands and sbatch options as under plain names (names live in comments, or sanitised)
        hostile_lines, plain_lines = _commands(text), _commands(plain)
        assert len(hostile_lines) == len(plain_lines), text
        for mine, theirs in zip(hostile_lines, plain_lines, strict=True):
            if mine.startswith("#SBATCH --job-name="):
                assert re.fullmatch(r"#SBATCH --job-name=[A-Za-z0-9._-]+", mine), mine
            elif mine.startswith("#SBATCH --output="):  # the job's name, sanitised as --job-name is
                assert re.fullmatch(r"#SBATCH --output=[A-Za-z0-9._-]+%j\.out", mine), mine
            else:
                assert mine == theirs
        return
    parsed, plain_parsed = _parse(kind, text), _parse(kind, plain)
    assert _shape(parsed) == _shape(plain_parsed), text


@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
def test_a_hostile_sku_round_trips_where_a_yaml_export_writes_it(hostile):
    """The nodus job spec writes the SKU as spec.resources.gpu.type: the hostile SKU comes back whole."""
    base_plan, base_facts = _base("nodus")
    p, facts = _hostile(base_plan, base_facts, HOSTILE[hostile])
    try:
        text = export(p, "nodus", job=facts)
    except GpuplanError:
        return
    (doc,) = yaml.safe_load_all(text)
    assert doc["spec"]["resources"]["gpu"]["type"] == p.sku


@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
def test_a_hostile_job_name_round_trips_in_the_torchtitan_description(hostile):
    base_plan, base_facts = _base("torchtitan")
    p, facts = _hostile(base_plan, base_facts, HOSTILE[hostile])
    try:
        text = export(p, "torchtitan", job=facts)
    except GpuplanError:
        return
    assert tomllib.loads(text)["job"]["description"].startswith(facts.name + ": ")


@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
def test_the_deepspeed_comment_keeps_each_line_one_string(hostile):
    base_plan, base_facts = _base("deepspeed")
    p, facts = _hostile(base_plan, base_facts, HOSTILE[hostile])
    try:
        text = export(p, "deepspeed", job=facts)
    except GpuplanError:
        return
    config = json.loads(text)
    plain = json.loads(_export(_hostile(base_plan, base_facts, "plain"), "deepspeed"))
    assert len(config["_comment"]) == len(plain["_comment"])
    assert all("\n" not in line for line in config["_comment"])


def test_a_name_that_cannot_be_written_as_utf8_is_refused():
    base_plan, base_facts = _base("torchrun")
    p, facts = _hostile(base_plan, base_facts, "\ud800")
    for kind in KINDS:
        try:
            _base(kind)
        except pytest.skip.Exception:
            continue
        with pytest.raises(GpuplanError):
            export(p, kind, job=facts).encode("utf-8")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
@pytest.mark.parametrize("field", ["hours.p90", "hours.p50", "memory_gib.total"])
def test_a_plan_number_that_is_not_finite_is_refused_by_every_export(field, value):
    """NaN or Infinity in a plan from a request body: the Slurm time limit (ceil of NaN) had crashed."""
    for kind in KINDS:
        try:
            p, facts = _base(kind)
        except pytest.skip.Exception:
            continue
        group, key = field.split(".")
        broken = p.model_copy(update={group: getattr(p, group).model_copy(update={key: value})})
        with pytest.raises(GpuplanError) as refused:
            export(broken, kind, job=facts)
        assert field in str(refused.value)


@pytest.mark.parametrize("kind", ["slurm", "kubernetes", "torchtitan"])
def test_the_services_export_of_a_plan_with_hostile_names_injects_nothing(kind, tmp_path):
    """/v1/export takes a plan in its body: its names reach the export as a request wrote them."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from serving import app_post

    job_file = ROOT / "problems" / "llama-70b-within-5-days.yaml"
    best = plan(load_job(job_file), runners_up=False).best
    hostile = HOSTILE["newline-sbatch"]
    given = best.model_dump(mode="json") | {"offer": f"offer {hostile}", "sku": best.sku}
    document = yaml.safe_load(job_file.read_text()) | {"export": {"kind": kind, "plan": given}}
    r = app_post("/v1/export", document)
    assert r.status_code < 500, r.text
    if r.status_code != 200:
        return  # refused (the name's characters), with the field
    assert not any(line.startswith(INJECTED) or line.startswith("rm -rf") for line in r.text.splitlines())
    if FORMATS[kind] == "bash":
        _bash_parses(r.text, tmp_path)
    else:
        _parse(kind, r.text)
