"""Launcher exports read back by the tools themselves: the official Kubernetes client, SkyPilot, DeepSpeed's
config class, torchtitan's config manager, megatron-core's config classes and accelerate's config loader
(``pip install -e '.[integrations]'``; each test skips cleanly when its tool is not installed). Each parsed
export must carry the plan's nodes, GPUs per node, parallel degrees and batch arithmetic, for the best
plans of the bundled problems and for hand-picked layouts (TP, PP, interleaving, hybrid shard, CP,
offload, recompute, an AMD SKU)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
import json
import os
import re
import shlex
import sys
import types
import typing
from functools import cache
from importlib import metadata
from unittest import mock

import pytest
import yaml
from paths import DATA, ROOT

from optimizer import ArgumentError, CheckRequest, check, load_catalog, load_job, plan
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.present import exports
from optimizer.present.exports import (
    KINDS,
    ExportJob,
    describe,
    export,
    job_facts,
    megatron_args,
    skypilot_accelerator,
    torchtitan_flags,
    torchtitan_sections,
)
from optimizer.present.exports.torchtitan import with_run
from optimizer.results import Plan

PROBLEMS = ROOT / "problems"
FRAMEWORK_KINDS = ("deepspeed", "megatron", "torchtitan", "accelerate")  # may refuse a layout they cannot express

# the bundled one-model jobs (a job with roles splits its GPUs between models: solve_roles answers it, and its
# export per role is not written yet, docs/roles.md)
BUNDLED = sorted(
    p.name
    for p in PROBLEMS.glob("*.yaml")
    if "job" in (data := yaml.safe_load(p.read_text()) or {}) and "roles" not in (data["job"] or {})
)
LLAMA_70B = "llama-70b-within-5-days.yaml"
CHECKED = {  # check()ed layouts of the 70B job: sku, GPUs and the fixed choices
    "tp8-pp4": ("B200", 32, {"nodes": 4, "tp": 8, "pp": 4}),
    "tp8-zero2": ("B200", 32, {"nodes": 4, "tp": 8, "pp": 1, "zero": 2}),
    "pp4-zero1": ("B200", 32, {"nodes": 4, "tp": 1, "pp": 4, "zero": 1}),
    "hybrid-zero3": ("B200", 32, {"nodes": 4, "tp": 1, "pp": 1, "zero": 3, "shard_degree": 8}),
    "offload": ("H100", 8, {"offload": "optimizer"}),
    "tp8-pp2-full-recompute": ("H100", 16, {"nodes": 2, "tp": 8, "pp": 2, "recompute": "full"}),
    "tp8-pp3-uneven": ("B200", 24, {"nodes": 3, "tp": 8, "pp": 3}),  # 80 layers: stages of 26, 27, 27
    "cp2": ("B200", 32, {"nodes": 4, "tp": 8, "pp": 1, "cp": 2}),
    "mi300x": ("MI300X", 16, {"nodes": 2, "zero": 3}),
    # a GB200 NVL72 rack: one NVLink node of 72 GPUs on 18 hosts (compute trays) of 4
    "gb200-nvl72": ("GB200", 72, {"tp": 8, "pp": 9, "catalog": load_catalog("hardware")}),
}
DERIVED = {  # layouts no bundled job picks, as strategy edits of a checked plan
    "pp4-1f1b": ("pp4-zero1", {"virtual_stages": 1, "recompute": "none"}),
    "pp4-v4": ("pp4-zero1", {"virtual_stages": 4}),  # interleaved: 4 virtual stages per rank
    "tp4-selective": ("tp8-zero2", {"tp": 4, "dp": 8, "grad_accum": 8, "recompute": "selective"}),
    "cp2-activation-offload": ("cp2", {"activation_offload": True, "recompute": "none"}),
}
NAMES = BUNDLED + list(CHECKED) + list(DERIVED)
HARDWARE = {s["name"]: s for s in yaml.safe_load((ROOT / "catalogs" / "hardware.yaml").read_text())["skus"]}


@cache
def get_plan(name: str) -> Plan:
    if name in CHECKED:
        sku, gpus, fixed = CHECKED[name]
        layout = {k: v for k, v in fixed.items() if k != "catalog"}
        request = CheckRequest(sku, gpus, compare=False, **layout)
        return check(load_job(PROBLEMS / LLAMA_70B), request, catalog=fixed.get("catalog")).plan
    if name in DERIVED:
        base, update = DERIVED[name]
        p = get_plan(base)
        return p.model_copy(update={"strategy": p.strategy.model_copy(update=update)})
    best = plan(load_job(PROBLEMS / name)).best
    if best is None:
        pytest.skip(f"{name} has no feasible plan")
    return best


@cache
def num_layers(name: str) -> int | None:
    """The model's layer count (torchtitan needs it beyond 2 virtual stages per rank; a Plan has none)."""
    return load_job(PROBLEMS / (name if name in BUNDLED else LLAMA_70B)).job.model.layers


def exported(name: str, kind: str, **kwargs) -> str | None:
    """The export's text, or None where a framework refuses a layout it cannot express (checked here)."""
    p = get_plan(name)
    try:
        return export(p, kind, name="gpuplan-test", **kwargs)
    except ArgumentError as exc:
        assert kind in FRAMEWORK_KINDS and exc.field == "export", exc
        assert "cannot express this plan" in str(exc) and describe(p) in str(exc)
        return None


def job_problem(model: str, **job) -> Problem:
    """A one-job problem on the default catalog (as tests/physics/test_moe.py builds them)."""
    data = {"job": {"name": f"{model}-test", "model": model, "method": "full", "tokens": "10B", "seq_len": 4096, **job}}
    return Problem.model_validate(expand_models(data))


def sku_mib(sku: str) -> float:
    """What the driver reports a SKU's memory as, in MiB (nvidia-smi's memory.total where the catalog has it,
    else the label, which is less: 80GB = 76,294 MiB against the H100 PCIe's 81,559)."""
    row = HARDWARE[sku]
    reported = str(row.get("memory_reported", ""))
    if reported.endswith("MiB"):
        return float(reported[:-3])
    if reported:
        return int(reported) / 2**20  # bytes (rocm-smi)
    return float(row["memory"].removesuffix("GB")) * 1e9 / 2**20


def test_plans_cover_the_layouts():
    layouts = [get_plan(n).strategy for n in NAMES]
    assert any(s.tp > 1 and s.pp > 1 for s in layouts) and any(s.virtual_stages > 1 for s in layouts)
    assert any(s.zero_stage == 3 and s.shard_degree < s.dp * s.cp for s in layouts)  # hybrid shard
    assert any(s.offload == "optimizer" for s in layouts) and any(s.cp > 1 for s in layouts)
    assert {s.recompute for s in layouts} == {"none", "selective", "full"}
    assert {s.zero_stage for s in layouts} == {0, 1, 2, 3}


# --------------------------------------------------------------------------- every export


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", NAMES)
def test_every_export_starts_with_a_header_naming_the_plan(name, kind):
    text = exported(name, kind)
    if text is None:
        return
    p, s = get_plan(name), get_plan(name).strategy
    body = text.splitlines()[1:] if kind == "slurm" else text.splitlines()  # a script's first line: #!/bin/bash
    lines = json.loads(text)["_comment"] if kind == "deepspeed" else [line[2:] for line in body[:2]]
    assert lines[0] == f"gpuplan {metadata.version('gpuplan')}: {describe(p)}"
    assert lines[0].endswith(f"global batch {s.global_batch}") and f"TP {s.tp} PP {s.pp} DP {s.dp}" in lines[0]
    assert f"= DP {s.dp} x micro-batch {s.micro_batch} x gradient accumulation {s.grad_accum}" in lines[1]


def test_the_header_reads_like_the_issue():
    p = get_plan("tp8-pp4")
    assert describe(p) == f"4 x 8 B200 ({p.offer}), TP 8 PP 4 DP 1, ZeRO-0, global batch 256"
    assert "hybrid-sharded over 8 GPUs" in describe(get_plan("hybrid-zero3"))


def test_unknown_kind_and_precision_are_argument_errors():
    p = get_plan("tp8-pp4")
    with pytest.raises(ArgumentError, match="choose one of skypilot, kubernetes, nodus"):
        export(p, "lsf")
    with pytest.raises(ArgumentError, match="unknown precision"):
        export(p, "megatron", precision="int4")


def test_an_inconsistent_plan_is_refused():
    p = get_plan("tp8-pp4")
    broken = p.model_copy(update={"strategy": p.strategy.model_copy(update={"dp": 2})})
    with pytest.raises(ArgumentError, match="does not add up"):
        export(broken, "torchrun")


# --------------------------------------------------------------------------- the job's facts and the registry


@pytest.mark.parametrize("kind", KINDS)
def test_the_job_goes_in_once_as_a_jobspec_its_facts_or_keywords(kind):
    """export(plan, kind, job=JobSpec), job=job_facts(JobSpec) and the keywords one by one write the same text
    (or refuse alike); a keyword given beside the job replaces that fact."""
    spec = load_job(PROBLEMS / LLAMA_70B).job
    facts = job_facts(spec)
    layout_facts = ExportJob(spec.name, spec.seq_len, spec.precision, spec.model.layers, spec.method, spec.optimizer)
    run_facts = {"tokens": 20e9, "model": spec.model, "checkpoint_bytes": facts.checkpoint_bytes, "finetune": True}
    assert facts == dataclasses.replace(layout_facts, **run_facts)
    for name in ("hybrid-zero3", "tp8-pp4"):
        p = get_plan(name)
        answers = []
        for given in ({"job": spec}, {"job": facts}, dataclasses.asdict(facts)):
            try:
                answers.append(export(p, kind, **given))
            except ArgumentError as exc:
                answers.append(f"refused: {exc}")
        assert answers[0] == answers[1] == answers[2]
        if not answers[0].startswith("refused"):
            renamed = dataclasses.replace(facts, name="another-job", precision="fp16")
            assert export(p, kind, job=spec, name="another-job", precision="fp16") == export(p, kind, job=renamed)


# A launcher module as a contributor would write it in optimizer/present/exports/ (toy: one line per host).
TOY_LAUNCHER = '''"""The toy export: one line per host, for the registry's test."""

from optimizer.present.exports.common import ExportJob, Launcher, comment, header
from optimizer.results import Plan


def write(plan: Plan, job: ExportJob) -> str:
    hosts = "".join(f"host {i}: {plan.host_gpus} GPUs for {job.name}\\n" for i in range(plan.hosts))
    return comment(header(plan, job.precision, [f"toy {job.seq_len} tokens a sequence"])) + hosts


def gaps(plan: Plan, job: ExportJob) -> list[str]:
    return [f"toy runs no pipeline (PP {plan.strategy.pp})"] if plan.strategy.pp > 1 else []


LAUNCHER = Launcher("toy", write, gaps=gaps, aliases=("ninth",))
'''


def test_a_ninth_launcher_is_one_module_and_one_registry_line(tmp_path, monkeypatch):
    """A new module declaring LAUNCHER, and the line optimizer/present/exports/__init__.py has for each
    launcher (register(module.LAUNCHER)): export() writes it from the plan and its job, takes its alias, lists
    it among the kinds, refuses what its gaps name and offers it where another framework export refuses."""
    path = tmp_path / "toy.py"
    path.write_text(TOY_LAUNCHER)
    spec = importlib.util.spec_from_file_location("toy", path)
    assert spec is not None and spec.loader is not None
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    monkeypatch.setattr(exports, "LAUNCHERS", dict(exports.LAUNCHERS))  # the registry as it was, after the test

    exports.register(toy.LAUNCHER)  # the registry line

    job = load_job(PROBLEMS / LLAMA_70B).job
    p = get_plan("hybrid-zero3")  # PP 1
    text = export(p, "toy", job=job)
    assert text.splitlines()[0] == f"# gpuplan {metadata.version('gpuplan')}: {describe(p)}"
    assert f"# toy {job.seq_len} tokens a sequence" in text
    assert [line for line in text.splitlines() if line.startswith("host ")] == [
        f"host {i}: {p.host_gpus} GPUs for {job.name}" for i in range(p.hosts)
    ]
    assert export(p, "Ninth", job=job) == text
    with pytest.raises(ArgumentError, match="choose one of skypilot, kubernetes, nodus, .*, torchrun, slurm, toy$"):
        export(p, "lsf")
    with pytest.raises(ArgumentError, match=r"the toy export cannot express this plan .*toy runs no pipeline \(PP 4\)"):
        export(get_plan("tp8-pp4"), "toy", job=job)
    with pytest.raises(ArgumentError) as refused:
        export(get_plan("cp2"), "deepspeed", job=job)  # DeepSpeed has no context parallelism; the toy runs CP 2
    assert re.search(r"\btoy exports? can$", str(refused.value))
    with pytest.raises(ValueError, match="registered already"):
        exports.register(toy.LAUNCHER)
    with pytest.raises(ValueError, match="k8s is registered already"):
        exports.register(dataclasses.replace(toy.LAUNCHER, kind="toy2", aliases=("k8s",)))


def test_the_registry_lists_the_launchers_in_their_modules():
    """KINDS is the registry's order, each kind's LAUNCHER from the module of that name."""
    assert tuple(exports.LAUNCHERS) == KINDS
    for kind, launcher in exports.LAUNCHERS.items():
        assert launcher is getattr(exports, kind).LAUNCHER and launcher.kind == kind


# --------------------------------------------------------------------------- launchers


@pytest.mark.parametrize("kind", sorted({"kubernetes", "skypilot", "torchtitan", "deepspeed", "nodus"}))
@pytest.mark.parametrize("name", ["llama 8b: lora #1", "模型-微调", "emoji 😀 run", 'quote\'s "q"'])
def test_every_text_export_parses_whatever_the_job_name(kind, name):
    """A job name with spaces, YAML specials, CJK, a character past U+FFFF or quotes: the export still
    parses in its format (TOML refused the two surrogate escapes JSON writes for an emoji)."""
    tomllib = pytest.importorskip("tomllib")
    plan_name = next(n for n in NAMES if exported(n, kind, num_layers=num_layers(n)) is not None)
    text = export(get_plan(plan_name), kind, name=name, num_layers=num_layers(plan_name))
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    if kind == "torchtitan":
        assert tomllib.loads(body)
    elif kind == "deepspeed":
        assert json.loads(body)
    else:
        assert list(yaml.safe_load_all(body))


@pytest.mark.parametrize("name", NAMES)
def test_torchrun_and_layout_environment(name):
    p, s = get_plan(name), get_plan(name).strategy
    text = export(p, "torchrun")
    command = text.splitlines()[-1]
    assert command.startswith("torchrun ") and f"--nnodes {p.hosts} --nproc-per-node {p.host_gpus}" in command
    env = dict(pair.split("=") for pair in shlex.split(text.splitlines()[-2])[1:])
    assert (env["TP"], env["PP"], env["DP"], env["CP"]) == tuple(str(v) for v in (s.tp, s.pp, s.dp, s.cp))
    assert (env["MICRO_BATCH"], env["GRAD_ACCUM"], env["GLOBAL_BATCH"]) == (
        str(s.micro_batch),
        str(s.grad_accum),
        str(s.global_batch),
    )


@pytest.mark.parametrize("name", NAMES)
def test_skypilot_task_loads_with_skypilot(name, tmp_path):
    sky = pytest.importorskip("sky")
    p, s = get_plan(name), get_plan(name).strategy
    path = tmp_path / "task.yaml"
    path.write_text(export(p, "skypilot", name="gpuplan-test"))
    task = sky.Task.from_yaml(str(path))
    for job_name in ("my fine tune job", "模型 #1: a/b", "x---y", "😀"):  # names SkyPilot refuses as written
        path.write_text(export(p, "skypilot", name=job_name))
        assert sky.Task.from_yaml(str(path)).name
    assert task.num_nodes == p.hosts and task.workdir == "."
    (resources,) = task.resources
    assert resources.accelerators == {skypilot_accelerator(p.sku): p.host_gpus} and resources.use_spot == p.spot
    assert "pip install -r requirements.txt" in task.setup
    assert "$SKYPILOT_NODE_RANK" in task.run and "$SKYPILOT_NUM_GPUS_PER_NODE" in task.run
    assert task.envs["TP"] == str(s.tp) and task.envs["PP"] == str(s.pp) and task.envs["DP"] == str(s.dp)
    assert task.envs["GLOBAL_BATCH"] == str(s.global_batch)


def _skypilot_names() -> set[str]:
    """The accelerator names the installed SkyPilot spells itself (its catalog, common/accelerators.csv, is
    downloaded at run time): sky/utils/gpu_names.py CANONICAL_GPU_NAMES, sky/catalog/__init__.py get_common_gpus
    and RunPod's names in sky/provision/runpod/utils.py GPU_NAME_MAP."""
    from sky import catalog
    from sky.provision.runpod import utils as runpod
    from sky.utils import gpu_names

    return set(gpu_names.CANONICAL_GPU_NAMES) | set(catalog.get_common_gpus()) | set(runpod.GPU_NAME_MAP)


@pytest.mark.parametrize("sku", sorted(HARDWARE))
def test_skypilot_asks_for_every_sku_by_skypilots_name(sku, tmp_path):
    """`accelerators: H100-SXM:8` matched RunPod and Cudo only, `A100-40GB` and `RTX-PRO-6000` no cloud:
    each SKU of catalogs/hardware.yaml is asked for by SkyPilot's name, or keeps its own with a note."""
    sky = pytest.importorskip("sky")
    p = get_plan("tp8-pp4").model_copy(update={"sku": sku})
    path = tmp_path / "task.yaml"
    path.write_text(text := export(p, "skypilot", name="gpuplan-test"))
    (resources,) = sky.Task.from_yaml(str(path)).resources
    ((name, count),) = resources.accelerators.items()
    assert count == p.host_gpus and f"accelerators: {name}:{count}" in text
    if name not in _skypilot_names():
        assert name == sku and "SkyPilot's catalog may not list" in text, name
    from sky.catalog import common as catalog_common

    if os.path.exists(catalog_common.get_catalog_path("common/accelerators.csv")):  # downloaded: SkyPilot's word
        from sky.utils import accelerator_registry

        assert accelerator_registry.canonicalize_accelerator_name(name, None) == name


def test_skypilot_asks_for_an_h100_sxm_plan_as_h100(tmp_path):
    sky = pytest.importorskip("sky")
    p = check(load_job(PROBLEMS / LLAMA_70B), CheckRequest("H100-SXM", 32, compare=False, tp=8, pp=4, zero=1)).plan
    path = tmp_path / "task.yaml"
    path.write_text(export(p, "skypilot", name="gpuplan-test"))
    (resources,) = sky.Task.from_yaml(str(path)).resources
    assert resources.accelerators == {"H100": 8}


def _k8s_load(api, doc: dict, klass: str):
    """The official client's deserializer (its signature changed in kubernetes 35)."""
    params = list(inspect.signature(api.deserialize).parameters)
    if params[0] == "response_text":
        return api.deserialize(json.dumps(doc), klass, "application/json")
    return api.deserialize(types.SimpleNamespace(data=json.dumps(doc)), klass)


def _key_paths(obj, prefix=()) -> set:
    if isinstance(obj, dict):
        return {prefix + (k,) for k in obj} | {p for k, v in obj.items() for p in _key_paths(v, prefix + (k,))}
    if isinstance(obj, list):
        return {p for i, v in enumerate(obj) for p in _key_paths(v, prefix + (i,))}
    return set()


@pytest.mark.parametrize("name", NAMES)
def test_kubernetes_indexed_job_deserializes_with_the_official_client(name):
    client = pytest.importorskip("kubernetes.client")
    p, s = get_plan(name), get_plan(name).strategy
    api = client.ApiClient()
    service_doc, job_doc = yaml.safe_load_all(export(p, "kubernetes", name="gpuplan-test"))
    service, job = _k8s_load(api, service_doc, "V1Service"), _k8s_load(api, job_doc, "V1Job")
    # every key was a field the client knows: serializing the objects gives back the same keys
    assert _key_paths(api.sanitize_for_serialization(job)) == _key_paths(job_doc)
    assert _key_paths(api.sanitize_for_serialization(service)) == _key_paths(service_doc)

    assert job.api_version == "batch/v1" and job.kind == "Job" and job.spec.completion_mode == "Indexed"
    assert job.spec.completions == job.spec.parallelism == p.hosts
    pod = job.spec.template.spec
    assert pod.restart_policy in ("Never", "OnFailure") and pod.subdomain == service.metadata.name
    assert service.spec.cluster_ip == "None" and service.spec.selector == job.spec.template.metadata.labels
    (container,) = pod.containers
    gpu = "amd.com/gpu" if p.sku.startswith("MI") else "nvidia.com/gpu"
    rdma = {"rdma/rdma_shared_device_a": "1"} if p.nodes > 1 else {}  # RDMA across network nodes
    assert container.resources.limits == {gpu: str(p.host_gpus), **rdma}
    assert ("kueue.x-k8s.io/queue-name" in (job.metadata.labels or {})) == (p.hosts > 1)  # gang admission
    env = {e.name: e for e in container.env}
    assert env["NNODES"].value == str(p.hosts) and env["NPROC_PER_NODE"].value == str(p.host_gpus)
    assert env["MASTER_ADDR"].value == f"{job.metadata.name}-0.{service.metadata.name}"
    assert "job-completion-index" in env["NODE_RANK"].value_from.field_ref.field_path
    assert (env["TP"].value, env["PP"].value, env["GLOBAL_BATCH"].value) == (str(s.tp), str(s.pp), str(s.global_batch))
    assert container.command == ["torchrun"] and "$(NODE_RANK)" in container.args
    _check_gpu_affinity(p, pod.affinity, export(p, "kubernetes", name="gpuplan-test"))


def _check_gpu_affinity(p: Plan, affinity, text: str) -> None:
    """The pods go to nodes whose GPUs hold the plan: NVIDIA GPU Feature Discovery's nvidia.com/gpu.memory
    (MiB, an integer) above the plan's per-GPU need and below what the SKU reports (its own nodes qualify),
    GFD's nvidia.com/gpu.product preferred; AMD's node labeller writes no integer memory, only a preference."""
    nodes = affinity.node_affinity
    preferred = {
        e.key: e.values
        for term in nodes.preferred_during_scheduling_ignored_during_execution or []
        for e in term.preference.match_expressions
    }
    if p.sku.startswith("MI"):
        assert nodes.required_during_scheduling_ignored_during_execution is None
        assert preferred == {"amd.com/gpu.device-id": ["74a1", "74a9", "74b5", "74bd"]}  # amdgpu.ids: MI300X
        assert "amd.com/gpu.vram" in text
        return
    (term,) = nodes.required_during_scheduling_ignored_during_execution.node_selector_terms
    (memory,) = term.match_expressions
    assert (memory.key, memory.operator) == ("nvidia.com/gpu.memory", "Gt")
    need_mib = min(p.memory_gib.total, p.memory_gib.capacity) * 1024
    assert int(memory.values[0]) < need_mib <= int(memory.values[0]) + 1 and need_mib <= sku_mib(p.sku)
    assert "delete spec.template.spec.affinity" in text and "GPU Feature Discovery" in text
    if p.sku in GFD_PRODUCTS:
        assert preferred == {"nvidia.com/gpu.product": [GFD_PRODUCTS[p.sku]]}


# GFD's nvidia.com/gpu.product: the driver's device name with '-' for spaces (NVIDIA/k8s-device-plugin
# internal/lm/resource.go sanitise; SkyPilot's GFDLabelFormatter, sky/provision/kubernetes/utils.py, gives
# nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 as its example)
GFD_PRODUCTS = {"H100-SXM": "NVIDIA-H100-80GB-HBM3", "B200": "NVIDIA-B200", "H200": "NVIDIA-H200"}


@pytest.mark.parametrize("sku", sorted(HARDWARE))
def test_kubernetes_asks_for_gpus_that_hold_the_plan_on_every_sku(sku):
    """A B200 plan needing 166 GiB a GPU had asked for any `nvidia.com/gpu: 8`, 80 GB GPUs included; for a
    plan on each SKU of catalogs/hardware.yaml the affinity keeps the SKU's own nodes."""
    client = pytest.importorskip("kubernetes.client")
    p = check(load_job(PROBLEMS / "llama-8b-lora.yaml"), CheckRequest(sku, 8, compare=False)).plan
    text = export(p, "kubernetes", name="gpuplan-test")
    _, job_doc = yaml.safe_load_all(text)
    job = _k8s_load(client.ApiClient(), job_doc, "V1Job")
    _check_gpu_affinity(p, job.spec.template.spec.affinity, text)


def test_a_b200_plan_needing_more_than_an_h200_holds_cannot_land_on_h200_or_h100_nodes():
    # the README's 70B job on one B200 node, ZeRO-3: 153.9 GiB a GPU, more than an H200's 140 GiB
    client = pytest.importorskip("kubernetes.client")
    p = check(load_job(PROBLEMS / LLAMA_70B), CheckRequest("B200", 8, zero=3, compare=False)).plan
    assert p.sku == "B200" and p.fits and p.memory_gib.total > 150
    _, job_doc = yaml.safe_load_all(export(p, "kubernetes", name="gpuplan-test"))
    job = _k8s_load(client.ApiClient(), job_doc, "V1Job")
    required = job.spec.template.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    (term,) = required.node_selector_terms
    threshold = int(term.match_expressions[0].values[0])
    assert sku_mib("H200") < threshold < sku_mib("B200") and sku_mib("H100-SXM") < threshold


def test_kubernetes_names_are_dns_labels():
    service, job = yaml.safe_load_all(export(get_plan("tp8-pp4"), "kubernetes", name="Llama_70B SFT run #3"))
    assert service["metadata"]["name"] == job["metadata"]["name"] == "llama-70b-sft-run-3"
    _, job = yaml.safe_load_all(export(get_plan("tp8-pp4"), "kubernetes", name="70b"))
    assert job["metadata"]["name"] == "job-70b"


@pytest.mark.parametrize("name", ["My Fine Tune", "70b", "sft_v2.1", "Ü" * 80])
def test_the_nodus_job_is_named_as_an_api_server_takes_a_job_name(name):
    # RFC 1123 label, at most 63 characters (Kubernetes' rule for Job names, which become a label value)
    spec = yaml.safe_load(export(get_plan("tp8-pp4"), "nodus", name=name))
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", spec["metadata"]["name"])


def test_the_old_kubernetes_form_is_rejected_by_the_client_and_kept_as_nodus():
    client = pytest.importorskip("kubernetes.client")
    p = get_plan("tp8-pp4")
    spec = yaml.safe_load(export(p, "nodus", name="sft"))
    assert spec["spec"]["resources"]["gpu"] == {
        "type": p.sku,
        "count": p.host_gpus,
        "minMemory": f"{int(p.memory_gib.capacity)}Gi",
    }
    assert spec["spec"]["parallelism"] == spec["spec"]["completions"] == p.hosts
    api = client.ApiClient()
    try:
        job = _k8s_load(api, spec, "V1Job")
    except Exception:  # noqa: BLE001 - newer clients reject a Job without a pod template outright
        return
    assert _key_paths(api.sanitize_for_serialization(job)) != _key_paths(spec)  # older ones drop spec.resources


# --------------------------------------------------------------------------- DeepSpeed


class FakeMpu:
    """The model-parallel unit deepspeed.initialize takes: DeepSpeed checks the batch against its DP size."""

    def __init__(self, dp: int):
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


def deepspeed_config(config: dict, dp_ranks: int):
    ds_config = pytest.importorskip("deepspeed.runtime.config")
    # DeepSpeedConfig asks torch.distributed for the rank and falls back to world size 1 (skipping the
    # mpu) when it is not initialised: pretend rank 0 so the batch assertion runs against the mpu.
    with mock.patch.object(ds_config.dist, "get_rank", return_value=0):
        return ds_config.DeepSpeedConfig(config, mpu=FakeMpu(dp_ranks))


@pytest.mark.parametrize("name", NAMES)
def test_deepspeed_config_passes_deepspeeds_batch_assertion(name):
    p, s = get_plan(name), get_plan(name).strategy
    text = exported(name, "deepspeed")
    if text is None:
        return  # refused, naming the exports that express it (checked in exported)
    config = json.loads(text)
    dp_ranks = p.gpus // (s.tp * s.pp)
    assert dp_ranks == s.dp and config["train_batch_size"] == s.micro_batch * s.grad_accum * dp_ranks
    parsed = deepspeed_config(config, dp_ranks)
    assert parsed.train_batch_size == s.global_batch and parsed.world_size == s.dp
    assert parsed.train_micro_batch_size_per_gpu == s.micro_batch
    assert parsed.gradient_accumulation_steps == s.grad_accum
    assert parsed.zero_optimization_stage == (max(s.zero_stage, 1) if s.offload != "none" else s.zero_stage)
    assert parsed.bfloat16_config.enabled and not parsed.float16_config.enabled
    assert parsed.tensor_parallel_config.autotp_size == (s.tp if s.tp > 1 else 0)
    assert config.get("pipeline", {}).get("stages", 1) == s.pp
    offload = parsed.zero_config.offload_optimizer
    assert (offload is not None and offload.device == "cpu") == (s.offload == "optimizer")
    if s.zero_stage == 3 and s.shard_degree < s.dp:
        assert parsed.zero_config.zero_hpz_partition_size == s.shard_degree
    if s.tp * s.pp > 1:  # the issue: against every GPU as a data-parallel rank the batch does not add up
        with pytest.raises(AssertionError, match="train_batch_size is not equal"):
            deepspeed_config(config, p.gpus)


def test_deepspeed_refuses_what_it_cannot_run_and_names_what_can():
    with pytest.raises(ArgumentError, match="cannot add TP to PP.*the megatron or torchtitan exports can"):
        export(get_plan("tp8-pp4"), "deepspeed")
    with pytest.raises(ArgumentError, match="interleaved"):
        export(get_plan("pp4-v4"), "deepspeed")
    s = get_plan("pp4-1f1b").strategy
    config = json.loads(export(get_plan("pp4-1f1b"), "deepspeed"))
    assert config["pipeline"]["stages"] == 4 and config["zero_optimization"]["stage"] == 1
    assert config["train_batch_size"] == 256 == s.micro_batch * s.grad_accum * 32 // 4


# --------------------------------------------------------------------------- Megatron


# Megatron-LM's arguments.py builds no flag for these TransformerConfig fields (its exclude list): virtual
# stages are --num-virtual-stages-per-pipeline-rank (or --num-layers-per-virtual-pipeline-stage).
# TransformerConfig fields Megatron-LM makes no flag of ("no CLI argument exists for these",
# megatron/training/arguments.py _add_network_size_args at MEGATRON_SOURCE's commit)
MEGATRON_EXCLUDED = {
    "virtual_pipeline_model_parallel_size",
    "params_dtype",
    "enable_autocast",
    "autocast_dtype",
    "num_microbatches_with_partial_activation_checkpoints",
    "tp_comm_overlap_disable_qkv",
    "tp_comm_overlap_disable_fc1",
    "pipeline_dtype",
    "variable_seq_lengths",
    "batch_p2p_comm",
    "batch_p2p_sync",
    "deallocate_pipeline_outputs",
    "cpu_offloading",
    "cpu_offloading_activations",
    "cpu_offloading_weights",
    "cpu_offloading_double_buffering",
    "num_layers_in_first_pipeline_stage",
    "num_layers_in_last_pipeline_stage",
    "softmax_scale",
    "gated_linear_unit",
    "bias_activation_fusion",
    "activation_func_fp8_input_store",
    "test_mode",
}


def _megatron_parser() -> tuple[argparse.ArgumentParser, dict[str, set[str]]]:
    """Megatron-LM's parser builds its model-parallel, transformer, DDP and optimizer flags from megatron-core's
    dataclasses (megatron/training/argument_utils.py: ArgumentGroupFactory, '--' + field name with dashes, or the
    field's argparse_meta arg_names); megatron.training itself is not on PyPI, so mirror that from the installed
    megatron-core, plus the seven megatron/training flags the export uses (arguments.py, training_config.py)."""
    pytest.importorskip("megatron.core")
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer import TransformerConfig

    parser = argparse.ArgumentParser(allow_abbrev=False, argument_default=argparse.SUPPRESS, exit_on_error=False)
    owners: dict[str, set[str]] = {}
    for cls in (TransformerConfig, DistributedDataParallelConfig, OptimizerConfig):
        owners[cls.__name__] = set()
        for field in dataclasses.fields(cls):
            owners[cls.__name__].add(field.name)
            if field.name in MEGATRON_EXCLUDED:
                continue
            names = field.metadata.get("argparse_meta", {}).get("arg_names") or ["--" + field.name.replace("_", "-")]
            if any(n in parser._option_string_actions for n in names):
                continue
            kind = typing.get_args(field.type)[0] if typing.get_origin(field.type) is typing.Union else field.type
            if kind is bool:
                parser.add_argument(*names, dest=field.name, action="store_true")
            else:
                parser.add_argument(*names, dest=field.name, type=kind if kind in (int, float) else str)
    for flag in ("--micro-batch-size", "--global-batch-size", "--seq-length", "--num-virtual-stages-per-pipeline-rank"):
        parser.add_argument(flag, type=int)
    # arguments.py's own flags for the uneven pipeline split; argument_utils.py passes them to TransformerConfig
    parser.add_argument("--decoder-first-pipeline-num-layers", dest="num_layers_in_first_pipeline_stage", type=int)
    parser.add_argument("--decoder-last-pipeline-num-layers", dest="num_layers_in_last_pipeline_stage", type=int)
    parser.add_argument("--ckpt-format", choices=["torch", "torch_dist", "zarr", "torch_dcp", "fsdp_dtensor"])
    # arguments.py: under --bf16 it turns accumulate_allreduce_grads_in_fp32 off (gradients reduced in bf16)
    parser.add_argument("--grad-reduce-in-bf16", action="store_true")
    return parser, owners


@pytest.mark.parametrize(("layers", "pp"), [(61, 8), (80, 3), (32, 3), (94, 8), (61, 2), (5, 4), (126, 16)])
def test_megatron_takes_the_uneven_pipeline_split_it_is_given(layers, pp):
    """Where PP does not divide the layers (DeepSeek-V3's 61 at PP 8), Megatron-Core asserts unless told
    the first and last stages' layers; those the export writes pass its TransformerConfig checks and keep
    the slowest stage at ceil(layers / PP), as gpuplan's time model assumes."""
    pytest.importorskip("megatron.core")
    import torch
    from megatron.core.transformer import TransformerConfig

    from optimizer.present.exports import uneven_pipeline_ends

    first, last = uneven_pipeline_ends(layers, pp)
    TransformerConfig(  # raises where the middle layers do not split over the middle stages
        num_layers=layers,
        hidden_size=64,
        num_attention_heads=4,
        pipeline_model_parallel_size=pp,
        pipeline_dtype=torch.bfloat16,
        num_layers_in_first_pipeline_stage=first,
        num_layers_in_last_pipeline_stage=last,
    )
    middle = (layers - first - last) // (pp - 2) if pp > 2 else 0
    assert max(first, last, middle) == -(-layers // pp)


@pytest.mark.parametrize(("layers", "pp", "chunks"), [(126, 8, 8), (61, 8, 2), (80, 8, 3), (94, 4, 4), (61, 2, 4)])
def test_megatron_writes_the_uneven_interleaved_layout_published_runs_use(layers, pp, chunks):
    """Llama 3.1 405B's 126 layers over PP 8 x 8 chunks (Megatron-Bridge's recipe): Megatron-Core's
    --pipeline-model-parallel-layout takes any split, so gpuplan runs it and the export writes the stages,
    the embedding on the first, the loss on the last, no rank above ceil(layers / PP) layers; megatron-core's
    own PipelineParallelLayerLayout validates it where it is installed."""
    from optimizer.present.exports.megatron import pipeline_layout

    layout = pipeline_layout(layers, pp, chunks)
    stages = layout.split("|")
    assert len(stages) == pp * chunks and stages[0].startswith("E") and stages[-1].endswith("L")
    assert layout.count("t") == layers and set(layout) <= set("EtL|")
    per_rank = [sum(stages[v * pp + r].count("t") for v in range(chunks)) for r in range(pp)]
    assert max(per_rank) == -(-layers // pp)
    assert pipeline_layout(layers, pp, 1) is None and pipeline_layout(pp * chunks * 2, pp, chunks) is None
    try:
        from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout
    except ImportError:
        return
    PipelineParallelLayerLayout(layout, pp).validate_layer_layout(layers, None)


def test_a_published_uneven_interleaved_megatron_layout_is_checked_not_refused():
    # Issue 48: validation/throughput_runs.yaml's 405B layouts (126 layers, PP 8 x VP 8, TP 8) are runnable:
    # Megatron-Core's interleaving needs no even split of the layers.
    problem = Problem.model_validate(
        expand_models(
            {
                "job": {"name": "405b", "model": "llama-3.1-405b", "method": "full", "tokens": "1T"}
                | {"seq_len": 8192, "global_batch": 512, "framework": "megatron", "precision": "fp8"}
            }
        )
    )
    request = CheckRequest("H100-SXM", 1024, tp=8, pp=8, virtual_stages=8, micro_batch=1, compare=False)
    result = check(problem, request)
    assert result.runnable, result.not_runnable_because
    text = exports.export(result.plan, "megatron", job=problem.job)
    assert "--pipeline-model-parallel-layout Et" in text and "--num-virtual-stages-per-pipeline-rank" not in text


@pytest.mark.filterwarnings("ignore:full scope is deprecated")
@pytest.mark.parametrize("name", NAMES)
def test_megatron_arguments_build_megatron_core_configs(name):
    p, s = get_plan(name), get_plan(name).strategy
    layers = num_layers(name)
    text = exported(name, "megatron", num_layers=layers)
    if text is None:
        return
    parser, owners = _megatron_parser()
    import torch
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer import TransformerConfig

    tokens = shlex.split(text.replace("\\\n", " "), comments=True)
    start = tokens.index("torchrun")  # after an `export NAME=value` line, if any
    assert tokens[0] == ("export" if start else "torchrun")
    assert f"--nnodes {p.hosts} --nproc-per-node {p.host_gpus}" in " ".join(tokens[start:])
    environment = dict(token.split("=", 1) for token in tokens[1:start])
    # Megatron-LM's validate_args (arguments.py, MEGATRON_SOURCE's commit) asserts CUDA_DEVICE_MAX_CONNECTIONS
    # == "1" for TP or CP above 1 on GPUs before Blackwell, but Megatron-FSDP (ZeRO-2/3) asserts it is not "1";
    # its example scripts export it whatever the GPU
    assert (environment.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1") == ((s.tp > 1 or s.cp > 1) and s.zero_stage < 2)
    assert set(environment) <= {"CUDA_DEVICE_MAX_CONNECTIONS"}
    args = tokens[tokens.index("pretrain_gpt.py") + 1 :]
    layout = shlex.split(" ".join(megatron_args(p, num_layers=layers)))
    assert args[: len(layout)] == layout  # then the run's flags: tests/exports/test_exports_run.py reads those
    ns = vars(parser.parse_args(layout))  # unknown flags raise
    if ns.get("cpu_offloading_num_layers", 0) > 0:
        ns["cpu_offloading"] = True  # as arguments.py derives it

    v = ns.pop("num_virtual_stages_per_pipeline_rank", 1)
    uneven = "num_layers_in_first_pipeline_stage" in ns  # the model's own layers, split as the export says
    transformer = TransformerConfig(
        num_layers=layers if layers and (uneven or layers % (s.pp * v) == 0) else 2 * s.pp * v,
        hidden_size=128 * s.tp,
        num_attention_heads=8 * s.tp,
        pipeline_dtype=torch.bfloat16,
        virtual_pipeline_model_parallel_size=v if v > 1 else None,
        **{k: val for k, val in ns.items() if k in owners["TransformerConfig"]},
    )
    assert (transformer.tensor_model_parallel_size, transformer.pipeline_model_parallel_size) == (s.tp, s.pp)
    assert transformer.context_parallel_size == s.cp and transformer.sequence_parallel == (s.tp > 1)
    assert transformer.bf16 and transformer.recompute_granularity == (None if s.recompute == "none" else s.recompute)
    assert transformer.cpu_offloading == s.activation_offload and transformer.cpu_offloading_activations
    data_parallel = p.gpus // (s.tp * s.pp * s.cp)  # how Megatron-LM derives it (arguments.py)
    micro = ConstantNumMicroBatchesCalculator(ns["global_batch_size"], ns["micro_batch_size"], data_parallel, False, 0)
    assert (
        data_parallel == s.dp
        and micro.get() == s.grad_accum
        and micro.get_current_global_batch_size() == s.global_batch
    )
    ddp = DistributedDataParallelConfig(
        **{k: val for k, val in ns.items() if k in owners["DistributedDataParallelConfig"]}
    )
    assert ddp.use_distributed_optimizer == (s.zero_stage >= 1 or s.offload != "none")
    sharding = {2: "optim_grads", 3: "optim_grads_params"}.get(s.zero_stage)
    assert ddp.use_megatron_fsdp == (sharding is not None)
    if sharding:  # ZeRO-2/3 as Megatron-FSDP, hybrid-sharded where the shard group is not every DP rank
        assert ddp.data_parallel_sharding_strategy == sharding and ns["ckpt_format"] == "fsdp_dtensor"
        replicas = s.dp * s.cp // s.shard_degree if s.zero_stage == 3 else 1
        assert ddp.num_distributed_optimizer_instances == replicas
    # the precision-aware optimizer (which --optimizer-cpu-offload needs) checks for Transformer Engine >= 2.1,
    # a CUDA package: pretend it is there, the other checks of OptimizerConfig run
    with mock.patch("megatron.core.optimizer.optimizer_config.is_te_min_version", return_value=True):
        optimizer = OptimizerConfig(**{k: val for k, val in ns.items() if k in owners["OptimizerConfig"]})
    assert optimizer.optimizer_cpu_offload == (s.offload == "optimizer")
    assert ns["seq_length"] == 4096


def test_megatron_takes_the_jobs_sequence_length_and_precision():
    args = " ".join(megatron_args(get_plan("tp8-pp4"), seq_len=8192, precision="fp8"))
    assert "--seq-length 8192" in args and "--bf16 --fp8-format hybrid" in args
    assert "--fp16" in export(get_plan("tp8-pp4"), "megatron", seq_len=2048, precision="fp16")


def test_megatron_runs_zero3_as_megatron_fsdp():
    """ZeRO-3 hybrid-sharded over 8 of 32 GPUs runs as Megatron-FSDP (arguments.py): its sharding strategy, 4
    replicas, the fsdp_dtensor checkpoints it asserts, and no CUDA_DEVICE_MAX_CONNECTIONS=1, which it refuses."""
    text = export(get_plan("hybrid-zero3"), "megatron")
    for flag in (
        "--use-distributed-optimizer",
        "--use-megatron-fsdp",
        "--data-parallel-sharding-strategy optim_grads_params",
        "--num-distributed-optimizer-instances 4",
        "--ckpt-format fsdp_dtensor",
    ):
        assert flag in text
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in text


# --------------------------------------------------------------------------- torchtitan


def _torchtitan_manager():
    try:
        from torchtitan.config import ConfigManager
        from torchtitan.distributed.parallel_dims import ParallelDims
        from torchtitan.trainer import Trainer
    except ImportError as exc:  # torchtitan.trainer imports triton
        pytest.skip(f"torchtitan's trainer config does not import here: {exc}")
    return ConfigManager, ParallelDims, Trainer


@pytest.mark.parametrize("name", NAMES)
def test_torchtitan_config_parses_with_torchtitan(name, monkeypatch):
    tomllib = pytest.importorskip("tomllib")
    p, s = get_plan(name), get_plan(name).strategy
    text = exported(name, "torchtitan", num_layers=num_layers(name))
    if text is None:
        return
    sections = tomllib.loads(text)
    layout = torchtitan_sections(p, "gpuplan-test", num_layers=num_layers(name))
    run = ExportJob("gpuplan-test", num_layers=num_layers(name))
    assert sections == json.loads(json.dumps(with_run(layout, p, run)))
    flags = torchtitan_flags(sections)
    assert " ".join(flags) in text  # the header's torchtitan 0.3.0 command line

    config_manager, parallel_dims, trainer = _torchtitan_manager()
    stub = types.ModuleType("gpuplan_torchtitan_stub")
    stub.base = trainer.Config  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, stub.__name__, stub)
    config = config_manager().parse_args(["--module", stub.__name__, "--config", "base", *shlex.split(" ".join(flags))])
    dims = parallel_dims.from_config(config.parallelism, world_size=p.gpus)  # asserts the degrees multiply to it
    assert (dims.tp, dims.pp, dims.cp) == (s.tp, s.pp, s.cp) and dims.dp_replicate * dims.dp_shard == s.dp
    if s.zero_stage == 3:
        assert dims.dp_shard * dims.cp == s.shard_degree  # torchtitan's FSDP mesh: dp_shard x cp
    # torchtitan's Trainer: accumulation = global / (local x DP); with PP the local batch is cut into micro-batches
    training, parallelism = config.training, config.parallelism
    accumulation = training.global_batch_size // (training.local_batch_size * s.dp)
    micro = parallelism.pipeline_parallel_microbatch_size if s.pp > 1 else training.local_batch_size
    assert training.global_batch_size == s.global_batch and micro == s.micro_batch
    assert accumulation * (training.local_batch_size // micro) == s.grad_accum
    checkpointing = {"none": "NoneType", "full": "FullAC.Config", "selective": "SelectiveAC.Config"}[s.recompute]
    assert type(config.activation_checkpoint).__qualname__ == checkpointing
    assert parallelism.fsdp_reshard_after_forward == ("never" if s.zero_stage in (1, 2) else "default")
    assert training.enable_cpu_offload == (s.offload == "optimizer")
    if s.zero_stage == 0:
        assert dims.dp_shard == 1 and dims.dp_replicate == s.dp  # DDP
    if s.pp > 1:
        schedule = "Interleaved1F1B" if s.virtual_stages > 1 else "1F1B"
        assert parallelism.pipeline_parallel_schedule == schedule
        from torchtitan.distributed.pipeline_parallel import _get_pipeline_metadata

        model = types.SimpleNamespace(layers=[None] * (num_layers(name) or 2 * s.pp * s.virtual_stages))
        stages, *_ = _get_pipeline_metadata(dims, parallelism, model)  # torchtitan's own stage count
        assert stages == s.pp * s.virtual_stages


def _torchtitan_030_flags(text: str) -> list[str]:
    """The torchtitan 0.3.0 flags of the export's header line (after `--config <config function>`)."""
    (line,) = [line for line in text.splitlines() if "--config <config function>" in line]
    return shlex.split(line.split("--config <config function>", 1)[1])


def _torchtitan_parse(module: str, config: str, flags: list[str]):
    """torchtitan 0.3.0's own command line: ConfigManager with one of its model config functions."""
    config_manager = _torchtitan_manager()[0]
    try:
        return config_manager().parse_args(["--module", module, "--config", config, *flags])
    except SystemExit as exc:  # tyro prints why and exits 2
        pytest.fail(f"torchtitan refused {module} {config} {' '.join(flags)} (exit {exc.code})")


def test_torchtitan_takes_an_expert_parallel_plan_with_its_moe_config():
    """torchtitan 0.3.0's trainer (_validate_cuda_graphs) refuses EP with its default all-to-all token
    dispatcher unless CUDA graphs are off: the flags of an EP 8 plan of Qwen3-30B-A3B parse with qwen3_30b_a3b."""
    problem = job_problem("qwen3-30b-a3b", global_batch=96, framework="torchtitan")
    p = check(problem, CheckRequest("B200", 8, ep=8, zero=3, compare=False)).plan
    assert p.strategy.ep == 8 and p.strategy.pp == 1
    config = _torchtitan_parse("qwen3", "qwen3_30b_a3b", _torchtitan_030_flags(export(p, "torchtitan")))
    assert config.parallelism.expert_parallel_degree == 8 and config.training.disable_cuda_graphs
    assert config.parallelism.data_parallel_shard_degree * config.parallelism.tensor_parallel_degree == 8


def test_torchtitan_030_flags_carry_no_optimizer_step_in_backward():
    """torchtitan 0.3.0 has no optimizer step in backward (0.2.2's job_config.py had early_step_in_backward):
    the TOML keeps it for 0.2.2, the 0.3.0 line parses without it and the header says the plan needs 0.2.2."""
    tomllib = pytest.importorskip("tomllib")
    problem = job_problem(
        "llama-3.1-8b", tokens="1B", global_batch=8, optimizer_in_backward=True, framework="torchtitan"
    )
    p = plan(problem).best
    assert p is not None and p.strategy.optimizer_in_backward
    text = export(p, "torchtitan")
    assert tomllib.loads(text)["optimizer"] == {"early_step_in_backward": True}
    config = _torchtitan_parse("llama3", "llama3_8b", flags := _torchtitan_030_flags(text))
    assert config.training.global_batch_size == p.strategy.global_batch and "early" not in " ".join(flags)
    assert "torchtitan 0.3.0 cannot run this plan as costed" in text and "torchtitan 0.2.2" in text


def test_torchtitan_needs_the_layer_count_for_more_than_two_virtual_stages():
    p = get_plan("pp4-v4")
    with pytest.raises(ArgumentError, match="pass num_layers"):
        export(p, "torchtitan")
    sections = torchtitan_sections(p, num_layers=80)
    assert sections["parallelism"]["pipeline_parallel_layers_per_stage"] == 80 // (4 * 4)
    assert sections["parallelism"]["fsdp_reshard_after_forward"] == "never"  # ZeRO-1 as FSDP2's ZeRO-2


# --------------------------------------------------------------------------- accelerate


@pytest.mark.parametrize("name", NAMES)
def test_accelerate_config_loads_with_accelerate(name, tmp_path):
    config_args = pytest.importorskip("accelerate.commands.config.config_args")
    p, s = get_plan(name), get_plan(name).strategy
    path = tmp_path / "fsdp.yaml"
    text = exported(name, "accelerate")
    if text is None:
        return
    path.write_text(text)
    parsed = config_args.ClusterConfig.from_yaml_file(str(path))
    assert parsed.num_processes == p.gpus and parsed.num_machines == p.hosts
    strategy = {0: "NO_SHARD", 1: "SHARD_GRAD_OP", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}[s.zero_stage]
    if s.zero_stage == 3 and s.shard_degree < s.dp:
        strategy = "HYBRID_SHARD"  # sharded inside a node, replicated across nodes
    assert parsed.fsdp_config["fsdp_sharding_strategy"] == strategy
    assert parsed.fsdp_config["fsdp_offload_params"] == (s.offload == "optimizer")
    # FSDP's plugin checkpoints every block or none: a plan recomputing some blocks leaves it to the script
    assert parsed.fsdp_config["fsdp_activation_checkpointing"] == (s.recompute != "none" and not s.partial_layers)


@pytest.mark.parametrize("name", NAMES)
def test_accelerate_launch_line_rendezvouses_on_node_0(name, tmp_path, monkeypatch):
    """The header's launch line, run as written on the last node, through accelerate's own launch parser:
    torchrun gets node 0's address (accelerate built the endpoint 'None:29500' without --main_process_ip)."""
    launch = pytest.importorskip("accelerate.commands.launch")
    from accelerate.utils.launch import prepare_multi_gpu_env

    p = get_plan(name)
    text = exported(name, "accelerate")
    if text is None:
        return
    path = tmp_path / "fsdp.yaml"
    path.write_text(text)
    (line,) = [line[2:] for line in text.splitlines() if line.startswith("# accelerate launch ")]
    monkeypatch.setenv("NODE_RANK", str(p.hosts - 1))  # as the torchrun exports expect them set
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.7")
    argv = shlex.split(os.path.expandvars(line.replace("this.yaml", str(path))))
    assert argv[:2] == ["accelerate", "launch"] and argv[-1] == "train.py"
    args, _, _ = launch._validate_launch_command(launch.launch_command_parser().parse_args(argv[2:]))
    prepare_multi_gpu_env(args)
    assert args.nproc_per_node == str(p.host_gpus)
    if p.hosts > 1:
        assert args.nnodes == str(p.hosts) and args.node_rank == p.hosts - 1
        assert args.rdzv_endpoint == "10.0.0.7:29500"


def test_accelerate_refuses_tensor_and_pipeline_parallelism():
    with pytest.raises(ArgumentError, match="cannot express TP 8 x PP 4; the megatron or torchtitan exports can"):
        export(get_plan("tp8-pp4"), "accelerate")


@pytest.mark.parametrize("name", ["llama-8b-lora.yaml", "llama-70b-qlora.yaml"])
@pytest.mark.parametrize("kind", ["deepspeed", "accelerate"])
def test_an_adapter_plan_says_what_the_script_must_add(name, kind):
    """A QLoRA plan of 70B on four 96 GB GPUs holds only with a 4-bit base and adapters; the DeepSpeed and
    accelerate configs (no setting for either) read as a plain bf16 run of every weight."""
    method = load_job(PROBLEMS / name).job.method
    text = export(get_plan(name), kind, name="gpuplan-test", method=method)
    assert f"method {method}" in text and "peft.LoraConfig" in text
    assert ("load_in_4bit=True" in text) == (method == "qlora")
    assert "peft" not in export(get_plan("hybrid-zero3"), kind, name="gpuplan-test", method="full")


def test_kubernetes_keeps_nodes_whose_gpus_hold_exactly_the_plans_memory():
    """A plan using all 80.0 GiB of an A100 80GB asked for nvidia.com/gpu.memory Gt 81920, and A100 80GB
    nodes report 81,920 MiB: the SKU's own nodes were excluded."""
    base = get_plan("hybrid-zero3")
    full = base.memory_gib.model_copy(update={"total": 80.0, "capacity": 80.0})
    p = base.model_copy(update={"sku": "A100-80GB", "memory_gib": full})
    _, job_doc = yaml.safe_load_all(export(p, "kubernetes", name="gpuplan-test"))
    affinity = job_doc["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["81919"]


@pytest.mark.parametrize(("optimizer", "flag"), [("adamw", "adam"), ("sgd", "sgd")])
def test_megatron_export_runs_the_optimizer_the_plan_counted(optimizer, flag):
    """Megatron-LM's default --optimizer is adam: an SGD plan (8 bytes of state per parameter) exported
    without the flag would launch Adam (12) and could run out of memory. Megatron-Core takes the value."""
    job = load_job(ROOT / "problems" / "seed-14b-full-finetune.yaml")
    job = job.model_copy(update={"job": job.job.model_copy(update={"optimizer": optimizer})})
    p = check(job, CheckRequest("H100", 8, zero=1, framework="megatron", compare=False)).plan
    args = shlex.split(export(p, "megatron", optimizer=optimizer).replace("\\\n", " "), comments=True)
    assert args[args.index("--optimizer") + 1] == flag
    pytest.importorskip("megatron.core")
    from megatron.core.optimizer import OptimizerConfig

    assert OptimizerConfig(optimizer=flag).optimizer == flag


def test_torchtitan_toml_says_0_2_2_refuses_ddp_beside_tp():
    # torchtitan v0.2.2 (models/llama3/infra/parallelize.py) raises 'DDP has not supported > 1D parallelism'
    # for data parallelism without FSDP beside TP or PP; 0.3.0 runs it as HSDP with a shard degree of 1
    job = load_job(ROOT / "problems" / "llama-8b-lora.yaml")
    job = job.model_copy(update={"job": job.job.model_copy(update={"method": "full", "global_batch": 256})})
    p = check(job, CheckRequest("H100", 16, tp=2, zero=0, framework="torchtitan", compare=False)).plan
    assert p.strategy.zero_stage == 0 and p.strategy.dp > 1
    assert "DDP has not supported > 1D parallelism" in export(p, "torchtitan", "j", 4096, num_layers=32)


def test_an_nvl72_rack_launches_on_its_hosts_of_four():
    """A GB200 NVL72 rack is one NVLink node of 72 GPUs, but its operating-system hosts are compute trays of 4
    (catalogs/hardware.yaml): the exports asked for 72 GPUs on one machine (torchrun --nproc-per-node 72, a
    pod of 72 nvidia.com/gpu), which no tray holds."""
    p = get_plan("gb200-nvl72")
    assert (p.nodes, p.gpus_per_node, p.gpus_per_host) == (1, 72, 4)
    text = export(p, "torchrun")
    assert "--nnodes 18 --nproc-per-node 4" in text and "launched as 18 hosts of 4 GPUs" in text
    service, job = yaml.safe_load_all(export(p, "kubernetes"))
    assert job["spec"]["completions"] == 18
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "4"}


def test_skypilot_pins_the_cloud_whose_price_the_plan_used():
    """The plan is priced at one provider's offer; a task without a cloud lets SkyPilot launch wherever it
    likes, at another price. Lambda's H100 plan asks for Lambda; Nodus, which SkyPilot does not know, for none."""
    lam = get_plan("offload")
    assert lam.provider == "Lambda"
    assert yaml.safe_load(export(lam, "skypilot"))["resources"]["cloud"] == "lambda"
    nodus = get_plan("tp8-pp4")
    assert nodus.provider == "Nodus" and "cloud" not in yaml.safe_load(export(nodus, "skypilot"))["resources"]


def test_a_plan_on_an_imported_skypilot_catalog_exports_a_task_skypilot_accepts(tmp_path):
    """gpuplan catalog import skypilot, solve on it, --export skypilot: the task names the offer's cloud and
    SkyPilot's accelerator name, and SkyPilot's own Task.from_yaml reads it back."""
    sky = pytest.importorskip("sky")
    from optimizer import api

    document, _imported = api.import_skypilot(DATA / "skypilot", ["lambda"])
    out = tmp_path / "sky.yaml"
    out.write_text(yaml.safe_dump(document, sort_keys=False))
    best = plan(load_job(PROBLEMS / "llama-8b-lora.yaml"), catalog=load_catalog(str(out)), runners_up=False).best
    path = tmp_path / "task.yaml"
    path.write_text(export(best, "skypilot", name="gpuplan-test"))
    task = sky.Task.from_yaml(str(path))
    (resources,) = task.resources
    assert str(resources.cloud).lower() == "lambda"
    ((name, count),) = resources.accelerators.items()
    assert count == best.host_gpus and name in ("A100", "H100")


# sbatch's options this export writes, with the form sbatch documents for each value (Slurm sbatch(1))
SBATCH_FORMS = {
    "--job-name": r"[A-Za-z0-9._-]+",
    "--nodes": r"[1-9][0-9]*",
    "--ntasks-per-node": r"[1-9][0-9]*",
    "--gpus-per-node": r"[1-9][0-9]*",
    "--exclusive": None,
    "--time": r"[0-9]+-[0-9]{2}:[0-9]{2}:[0-9]{2}",
    "--segment": r"[1-9][0-9]*",
    "--output": r"[A-Za-z0-9._-]+%j\.out",  # %j: the job id (filename pattern)
    "--requeue": None,
    "--open-mode": r"append|truncate",
    "--signal": r"(?:[RB]:)?[A-Z0-9]+(?:@[0-9]+)?",  # [{R|B}:]<sig_num>[@sig_time]
}


@pytest.mark.parametrize("name", NAMES)
def test_the_slurm_script_parses_and_asks_for_the_plans_hosts(name, tmp_path):
    """Slurm: bash parses the script (bash -n), every #SBATCH line is an sbatch option in its documented form
    and comes before the first command (sbatch reads directives only until then), and the hosts, GPUs and
    time limit are the plan's."""
    import shutil
    import subprocess

    p = get_plan(name)
    text = export(p, "slurm", name="gpuplan test job")
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    if shutil.which("bash"):
        subprocess.run(["bash", "-n", str(path)], check=True)
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    directives = {}
    for i, line in enumerate(lines):
        if line.startswith("#SBATCH"):
            assert i < first_command, line
            option, _, value = line.removeprefix("#SBATCH ").partition("=")
            assert option in SBATCH_FORMS, option
            form = SBATCH_FORMS[option]
            assert (form is None and not value) or (form is not None and re.fullmatch(form, value)), line
            directives[option] = value
    assert int(directives["--nodes"]) * int(directives["--gpus-per-node"]) == p.gpus
    assert int(directives["--nodes"]) == p.hosts and directives["--ntasks-per-node"] == "1"
    days, clock = directives["--time"].split("-")
    hours, minutes, _ = map(int, clock.split(":"))
    assert int(days) * 24 + hours + minutes / 60 >= p.hours.p90
    assert ("--segment" in directives) == bool(p.gpus_per_host)  # an NVL72 rack's hosts in one segment
    assert f"--nnodes {p.hosts} --nproc-per-node {p.host_gpus}" in text
