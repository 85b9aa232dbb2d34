"""Exports per role (issue 52, docs/roles.md): the seed-003 split launched as a Kubernetes JobSet (one replicated job
per role), a Slurm heterogeneous job (one component per role) and a SkyPilot Job Group (one task per role), each
carrying the role's GPU count, the SKU's launch name and the role's launch line. Read back with each tool's own
parser where one is installed here (yaml.safe_load; bash -n), the JobSet's fields checked one by one against
JobSet's v1alpha2 types (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go), the #SBATCH lines against
sbatch's documented forms. Hostile names (a newline and a foreign #SBATCH line, quotes, YAML flow syntax) give
the same shape as plain ones. ``gpuplan solve/check --export`` on a role job writes them (tests/cli/test_roles_cli.py
for the refusals of the old single-model flags)."""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import subprocess
from functools import cache

import pytest
import yaml
from paths import ROOT
from typer.testing import CliRunner

import optimizer
from optimizer.cli import app
from optimizer.errors import ArgumentError
from optimizer.inputs.launch_names import launch_names
from optimizer.present import roles
from optimizer.present.exports.common import one_line
from optimizer.present.exports.roles import (
    DRAFTER_SCRIPT,
    HANDOFF_PORT,
    JOBSET_NAME_LABEL,
    TARGET_SCRIPT,
    WRITERS,
    PipelineExport,
    export_roles,
)

JOB = ROOT / "problems" / "seed-003-drafter-roles.yaml"
CHECKED = ("--role", "target=3xRTX-PRO-6000", "--role", "drafter=1xRTX-PRO-6000")
runner = CliRunner()

# jobset_types.go's JSON field names: JobSetSpec, ReplicatedJob, Network, SuccessPolicy
JOBSET_SPEC_FIELDS = {
    "replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy", "suspend", "coordinator",
    "managedBy", "ttlSecondsAfterFinished", "volumeClaimPolicies",
}  # fmt: skip
REPLICATED_JOB_FIELDS = {"name", "groupName", "template", "replicas", "dependsOn"}
NETWORK_FIELDS = {"enableDNSHostnames", "subdomain", "publishNotReadyAddresses"}
# the batch/v1 JobSpec, core/v1 PodSpec and Container fields the template may use (Kubernetes API reference)
JOB_SPEC_FIELDS = {"parallelism", "completions", "completionMode", "backoffLimit", "template"}
POD_SPEC_FIELDS = {"restartPolicy", "hostIPC", "affinity", "containers", "tolerations", "volumes", "subdomain"}
CONTAINER_FIELDS = {"name", "image", "command", "args", "env", "ports", "resources", "volumeMounts"}
DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


@cache
def _chosen() -> PipelineExport:
    """solve's choice for seed 003: 7 B200 targets + 1 B200 drafter over NVLink."""
    problem = optimizer.load_job(JOB)
    catalog = optimizer.load_catalog("seed-003-roles")
    return roles.pipeline_export(roles.solved(problem, catalog))


@cache
def _checked() -> PipelineExport:
    """The seed's own run, checked: 3 + 1 RTX PRO 6000 bouncing through host memory."""
    return roles.pipeline_export(roles.checked(JOB, list(CHECKED[1::2]), None, None, None))


def _pipelines() -> list[PipelineExport]:
    return [_chosen(), _checked()]


def test_the_split_is_the_answers():
    chosen, checked = _chosen(), _checked()
    assert (chosen.sku, chosen.producer.gpus, chosen.consumer.gpus, chosen.link) == ("B200", 7, 1, "peer")
    assert (checked.sku, checked.producer.gpus, checked.consumer.gpus, checked.link) == ("RTX-PRO-6000", 3, 1, "host")
    assert checked.offer == "rtx-pro-6000-box" and checked.binding == "targets"
    assert checked.bytes_per_token == 5 * 5120 * 2 and checked.batch_tokens == 32768


# --------------------------------------------------------------------------- Kubernetes: a JobSet


def _role_arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("which", ["chosen", "checked"])
def test_the_jobset_has_one_replicated_job_per_role_with_its_gpus_on_one_node(which):
    p = _chosen() if which == "chosen" else _checked()
    text = export_roles(p, "kubernetes")
    (jobset,) = [d for d in yaml.safe_load_all(text) if d is not None]
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and jobset["kind"] == "JobSet"
    name = jobset["metadata"]["name"]
    spec = jobset["spec"]
    assert set(spec) <= JOBSET_SPEC_FIELDS and set(spec["network"]) <= NETWORK_FIELDS
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["drafter"]}
    replicated = spec["replicatedJobs"]
    assert [r["name"] for r in replicated] == ["target", "drafter"]
    gpus = {}
    for rjob, role in zip(replicated, p.roles, strict=True):
        assert set(rjob) <= REPLICATED_JOB_FIELDS and rjob["replicas"] == 1
        job = rjob["template"]["spec"]
        assert set(job) <= JOB_SPEC_FIELDS and job["parallelism"] == job["completions"] == 1
        pod = job["template"]["spec"]
        (container,) = pod["containers"]
        assert set(pod) <= POD_SPEC_FIELDS and set(container) <= CONTAINER_FIELDS
        limit = container["resources"]["limits"]["nvidia.com/gpu"]
        assert isinstance(limit, str)  # a quantity
        gpus[rjob["name"]] = int(limit)
        args = container["args"]
        assert container["command"] == ["torchrun"] and _role_arg(args, "--nproc-per-node") == limit
        assert (TARGET_SCRIPT if role.mode == "forward" else DRAFTER_SCRIPT) in args
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["ROLE"] == rjob["name"] and env["ROLE_GPUS"] == limit and env["LINK"] == p.link
        assert env["HANDOFF_ADDR"] == f"{name}-drafter-0-0.{name}" and env["HANDOFF_PORT"] == str(HANDOFF_PORT)
        assert all(DNS_LABEL.fullmatch(part) and len(part) <= 63 for part in env["HANDOFF_ADDR"].split("."))
        # both pods on one node: each requires a node running a pod of this JobSet
        (term,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term == {
            "labelSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}},
            "topologyKey": "kubernetes.io/hostname",
        }
        assert pod["hostIPC"] is True and pod["restartPolicy"] == "Never"
        product = pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
        assert product["preference"]["matchExpressions"][0]["values"][0].startswith("NVIDIA-")
    assert gpus == {"target": p.producer.gpus, "drafter": p.consumer.gpus}
    assert sum(gpus.values()) == p.gpus
    # the drafter's rendezvous port differs from the target's (one node, two torchrun groups)
    ports = {_role_arg(r["template"]["spec"]["template"]["spec"]["containers"][0]["args"], "--master-port")
             for r in replicated}  # fmt: skip
    assert len(ports) == 2


def test_an_amd_split_asks_for_amd_gpus_and_no_nvidia_label():
    p = dataclasses.replace(_checked(), sku="MI300X", vendor="AMD")
    (jobset,) = yaml.safe_load_all(export_roles(p, "kubernetes"))
    for rjob in jobset["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        assert set(pod["containers"][0]["resources"]["limits"]) == {"amd.com/gpu"}
        assert "nodeAffinity" not in pod["affinity"] and pod["tolerations"][0]["key"] == "amd.com/gpu"


# --------------------------------------------------------------------------- Slurm: a heterogeneous job

# sbatch's options this export writes, with the form sbatch documents for each value (Slurm sbatch(1))
SBATCH_FORMS = {
    "--job-name": r"[A-Za-z0-9._-]+",
    "--output": r"[A-Za-z0-9._-]+%j\.out",
    "--nodes": r"1",
    "--ntasks": r"[1-9][0-9]*",
    "--gpus-per-node": r"[1-9][0-9]*",
    "--time": r"[0-9]+-[0-9]{2}:[0-9]{2}:[0-9]{2}",
}


def _components(text: str) -> list[dict[str, str]]:
    """The #SBATCH directives of each component (split at '#SBATCH hetjob'), all before the first command."""
    lines = text.splitlines()
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    components: list[dict[str, str]] = [{}]
    for i, line in enumerate(lines):
        if not line.startswith("#SBATCH"):
            continue
        assert i < first_command, line
        if line == "#SBATCH hetjob":
            components.append({})
            continue
        option, _, value = line.removeprefix("#SBATCH ").partition("=")
        assert option in SBATCH_FORMS and re.fullmatch(SBATCH_FORMS[option], value), line
        components[-1][option] = value
    return components


@pytest.mark.parametrize("which", ["chosen", "checked"])
def test_the_slurm_hetjob_has_a_component_per_role_and_starts_each_on_its_group(which, tmp_path):
    p = _chosen() if which == "chosen" else _checked()
    text = export_roles(p, "slurm")
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    if shutil.which("bash"):
        subprocess.run(["bash", "-n", str(path)], check=True)
    assert text.startswith("#!/bin/bash\n")
    target, drafter = _components(text)
    assert (int(target["--gpus-per-node"]), int(drafter["--gpus-per-node"])) == (p.producer.gpus, p.consumer.gpus)
    for component in (target, drafter):
        assert component["--nodes"] == "1" and component["--ntasks"] == "1"
        days, clock = component["--time"].split("-")
        hours, minutes, _ = map(int, clock.split(":"))
        assert int(days) * 24 + hours + minutes / 60 >= p.hours
    srun = [shlex.split(line) for line in text.splitlines() if " srun " in f" {line}"]
    assert len(srun) == 2
    for group, (words, role) in enumerate(zip(srun, p.roles, strict=True)):
        env = dict(w.split("=", 1) for w in words[: words.index("srun")])
        assert env["ROLE"] == role.role and env["ROLE_GPUS"] == str(role.gpus) and env["LINK"] == p.link
        rest = words[words.index("srun") :]
        assert rest[1] == f"--het-group={group}" and rest[3] == "torchrun"
        assert _role_arg(rest, "--nproc-per-node") == str(role.gpus) and role.script in rest
    # the one-node check comes before either role starts
    assert text.index("SLURM_JOB_NODELIST_HET_GROUP_1") < text.index(" srun ")


# --------------------------------------------------------------------------- SkyPilot: a Job Group


@pytest.mark.parametrize("which", ["chosen", "checked"])
def test_the_skypilot_job_group_has_a_task_per_role_under_skypilots_name(which):
    p = _chosen() if which == "chosen" else _checked()
    text = export_roles(p, "skypilot")
    header, *tasks = yaml.safe_load_all(text)
    assert header["execution"] == "parallel" and header["primary_tasks"] == ["drafter"]
    assert [t["name"] for t in tasks] == ["target", "drafter"]
    name = launch_names(p.sku).skypilot
    assert name is not None
    for task, role in zip(tasks, p.roles, strict=True):
        assert task["resources"]["accelerators"] == f"{name}:{role.gpus}"
        assert task["envs"]["ROLE"] == role.role and task["envs"]["ROLE_GPUS"] == str(role.gpus)
        assert all(isinstance(v, str) for v in task["envs"].values())
        assert 'HANDOFF_ADDR="drafter-0.${SKYPILOT_JOBGROUP_NAME}"' in task["run"]
        assert f"--nproc-per-node {role.gpus} " in task["run"] and role.script in task["run"]
    # each task is its own cluster: the header says the bandwidth the plan's rate needs between them
    need = p.tokens_per_s * p.bytes_per_token / 1e9
    assert f"needs {need:,.2f} GB/s" in text and "--export kubernetes" in text


def test_skypilot_pins_a_cloud_it_knows():
    p = dataclasses.replace(_checked(), provider="lambda")
    _, *tasks = yaml.safe_load_all(export_roles(p, "skypilot"))
    assert all(t["resources"]["cloud"] == "lambda" for t in tasks)
    _, *tasks = yaml.safe_load_all(export_roles(_checked(), "skypilot"))  # provider seed-003: SkyPilot chooses
    assert all("cloud" not in t["resources"] for t in tasks)


# --------------------------------------------------------------------------- hostile names and refusals

HOSTILE = "x\n#SBATCH --wrap=rm -rf ~\n'\"$(id)` {a: [1]}\u2028- z"


def _hostile(p: PipelineExport) -> PipelineExport:
    return dataclasses.replace(
        p,
        job=f"job {HOSTILE}",
        offer=f"offer {HOSTILE}",
        producer=dataclasses.replace(p.producer, model=f"target {HOSTILE}"),
        consumer=dataclasses.replace(p.consumer, model=f"drafter {HOSTILE}"),
    )


def _shape(value):
    """A document's shape: its keys and list lengths, not its strings."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_hostile_names_keep_the_exports_shape(kind, tmp_path):
    plain, hostile = export_roles(_checked(), kind), export_roles(_hostile(_checked()), kind)
    assert "\n#SBATCH --wrap" not in hostile and "\u2028" not in hostile
    if kind == "slurm":
        path = tmp_path / "job.sbatch"
        path.write_text(hostile)
        if shutil.which("bash"):
            subprocess.run(["bash", "-n", str(path)], check=True)
        assert _components(hostile) and len(_components(hostile)) == 2
        assert len(hostile.splitlines()) == len(plain.splitlines())
        srun = [shlex.split(line) for line in hostile.splitlines() if " srun " in f" {line}"]
        assert [w for w in srun[0] if w.startswith("ROLE_MODEL=")] == [f"ROLE_MODEL={one_line('target ' + HOSTILE)}"]
        return
    docs, plain_docs = list(yaml.safe_load_all(hostile)), list(yaml.safe_load_all(plain))
    assert _shape(docs) == _shape(plain_docs)
    if kind == "kubernetes":
        assert DNS_LABEL.fullmatch(docs[0]["metadata"]["name"])
        env = docs[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {e["name"]: e["value"] for e in env}["ROLE_MODEL"] == f"target {HOSTILE}"


@pytest.mark.parametrize("kind", ["deepspeed", "megatron", "torchtitan", "accelerate", "torchrun", "nodus"])
def test_kinds_without_a_per_role_meaning_are_refused_with_the_ones_that_have_one(kind):
    with pytest.raises(ArgumentError, match="no meaning per role") as refused:
        export_roles(_checked(), kind)
    assert "kubernetes" in refused.value.reason and "slurm" in refused.value.reason


# --------------------------------------------------------------------------- the CLI


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result


@pytest.mark.parametrize("kind", ["k8s", "kubernetes", "slurm", "sbatch", "skypilot"])
def test_solve_prints_the_chosen_splits_launch_in_place_of_the_answer(kind):
    r = run("solve", JOB, "--export", kind)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(("#", "#!")) and "7 x B200 target (qwen3.6-27b, forward) + 1 x B200 drafter" in r.stdout
    assert "The fastest plan" not in r.stdout


def test_check_writes_the_checked_splits_launch_to_out_and_answers(tmp_path):
    out = tmp_path / "drafter.sbatch"
    r = run("check", JOB, *CHECKED, "--export", "slurm", "--out", out)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("Checked dflash-drafter-qwen3.6-27b: 3 x RTX-PRO-6000")
    assert f"wrote slurm config to {out}" in r.stderr
    target, drafter = _components(out.read_text())
    assert (target["--gpus-per-node"], drafter["--gpus-per-node"]) == ("3", "1")


def test_role_exports_are_refused_where_they_cannot_be_written(tmp_path):
    def refused(*args, expect: str) -> None:
        r = run(*args)
        assert r.exit_code == 2, r.output
        assert expect in " ".join(r.output.split()), r.output

    refused("solve", JOB, "--export", "deepspeed", expect="no meaning per role")
    refused("check", JOB, *CHECKED, "--export", "megatron", "--out", tmp_path / "x", expect="no meaning per role")
    refused("check", JOB, *CHECKED, "--export", "slurm", "--out", JOB, expect="--out")  # the job file itself
    refused("check", JOB, *CHECKED, "--export", "slurm", "--format", "json", expect="--out FILE")
    refused("solve", JOB, "--budget", "100", "--export", "k8s", expect="nothing to export")
    refused("solve", JOB, "--export", "toy", expect="unknown export 'toy'")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["slurm", "kubernetes", "skypilot"])
def test_a_distill_launch_speaks_of_its_teacher_student_and_logits(kind):
    # the same two launches as a drafter's (ROLE=target and ROLE=drafter: the slots the scripts read), in the
    # distill job's words: its teacher's top-256 logits cross to the student, not a target's hidden states
    distill = runner.invoke(app, ["solve", str(ROOT / "problems" / "distill-qwen3-32b-to-8b.yaml"), "--export", kind])
    assert distill.exit_code == 0, distill.output
    header = distill.output[: distill.output.index("placeholders to fill")]
    assert "teacher (qwen3-32b, forward)" in header and "student (qwen3-8b, train)" in header
    assert "top-256 logits" in header and "hidden states" not in distill.output
    assert "teacher tokens/s" in distill.output and "ROLE=target and ROLE=drafter" in header
    drafter = runner.invoke(app, ["solve", str(JOB), "--export", kind])
    assert "hidden states" in drafter.output and "ROLE=target and" not in drafter.output
