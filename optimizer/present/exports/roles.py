"""Exports of a job with roles (issue 52, docs/roles.md): the chosen or checked split launched one role at a time.

A role plan runs ``t`` GPUs of the frozen target's forward pass (the hidden-state producers) and ``d`` GPUs of the
drafter's training on one node, the hidden states crossing the plan's link (``peer``: NVLink; ``host``: through
host memory). Each export launches each role as its own torchrun group on its own GPUs of that node:

- ``kubernetes``: a JobSet (jobset.x-k8s.io/v1alpha2, kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go),
  one replicatedJob per role, one pod each asking for its GPUs (nvidia.com/gpu or amd.com/gpu limits). Both pods
  on one node by a required pod affinity on the JobSet's own label over ``kubernetes.io/hostname`` (JobSet's
  exclusive-topology annotation does the opposite: one job per topology domain), sharing the node's IPC
  namespace (``hostIPC``) for the CUDA IPC and shared memory that NCCL's P2P and SHM transports between
  processes of two pods need. The JobSet succeeds when the drafter's job does (``successPolicy``).
- ``slurm``: a heterogeneous job (``#SBATCH hetjob`` between the components, one per role; ``srun
  --het-group=N``), Slurm's documented form (slurm.schedmd.com/heterogeneous_jobs.html). Slurm allocates each
  component on its own: the script checks that both landed on one node before it starts either.
- ``skypilot``: a Job Group (SkyPilot's experimental ``execution: parallel`` multi-document YAML,
  docs/source/examples/job-groups.rst: a header, then one task per role; the drafter primary), each task with
  SkyPilot's accelerator name for the SKU. SkyPilot runs each task on its own cluster (co-location: the same
  Kubernetes cluster or zone, no node), so the hidden states cross the network: the header says the bandwidth
  the plan's rate needs there, and which exports keep the plan's link.

A split across two offers (``job.roles.across_offers``: the drafter on another offer's node and SKU) has the
``network`` link: the JobSet then puts each pod on a node of its own SKU (no pod affinity, no shared IPC), the
heterogeneous job asks each component for its own GPU type and takes the drafter's node for the hand-off, and the
Job Group gives each task its own accelerator.

Each role's launch line is a placeholder the user fills (``TARGET_SCRIPT``: a forward-only hidden-state producer,
``DRAFTER_SCRIPT``: the drafter's trainer, SpecForge/DFlash-style; gpuplan ships neither), run under torchrun
with the environment ``role_env`` names: the role, its GPUs, the link, the handoff address and the batch. The
rank within a role is torchrun's ``RANK`` (0 to the role's GPUs - 1; ``WORLD_SIZE`` its GPU count). The kinds
with no per-role meaning (a framework's config for one model on all the GPUs) are refused (``export_roles``).
Read back by tests/exports/test_role_exports.py (yaml.safe_load and the JobSet's fields, bash -n and the #SBATCH lines).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import ArgumentError
from ...inputs.launch_names import is_amd, launch_names
from .common import _version, comment, one_line, yaml_text
from .kubernetes import GFD_SOURCE, TRAINING_IMAGE, dns_label, gfd_product
from .run import CHECKPOINT_DIR, DATA
from .skypilot import SKYPILOT_CLOUDS, _sky_name, skypilot_accelerator
from .slurm import TIME_MARGIN, slurm_time
from .torchrun import MASTER_PORT, torchrun_args

# The placeholders the user fills in (each export names them in its header), as run.py writes its own
TARGET_SCRIPT = "/path/to/TARGET_FORWARD_SCRIPT.py"  # forward-only: the target's hidden states, handed on
DRAFTER_SCRIPT = "/path/to/DRAFTER_TRAIN_SCRIPT.py"  # the drafter's trainer, fed those hidden states
TARGET_MODEL = "/path/to/TARGET_MODEL"  # the frozen target's Hugging Face folder
HANDOFF_PORT = 29600  # where the drafter's rank 0 takes the hidden states (the scripts may meet elsewhere)
ROLE_KINDS = ("kubernetes", "slurm", "skypilot")  # the export kinds a role job has (``Launcher.kind``)
GRPO_KINDS = ("nemo-rl", "verl")  # a GRPO job's: one RL framework's launch (exports/nemo_rl.py, verl.py)
# the JobSet's own label on both roles' pods, which the pod affinity selects (jobset_types.go JobSetNameKey)
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"
JOB_GROUP_TERMINATION_DELAY = "30s"  # the targets' time to stop once the drafter has trained (Job Group header)
_SLURM_NAME = re.compile(r"[^A-Za-z0-9._-]+")  # as the single-job Slurm export names its jobs


@dataclass(frozen=True)
class RoleLaunch:
    """One role of the split: ``role`` as the job file and ``--role`` name it (target, drafter), its model's
    name, its mode (forward, train), its GPUs, its placeholder script and torchrun's rendezvous port."""

    role: str
    model: str
    mode: str
    gpus: int
    script: str
    master_port: int

    @property
    def args(self) -> list[str]:
        """The script's arguments: the placeholders it reads besides the environment."""
        if self.mode == "forward":
            return [self.script, "--target-model", TARGET_MODEL, "--data", DATA]
        return [self.script, "--target-model", TARGET_MODEL, "--output-dir", CHECKPOINT_DIR]


@dataclass(frozen=True)
class PipelineExport:
    """A role plan as its exports need it: the job's name, the SKU (and its vendor) of the one node both roles
    share, the offer and provider whose price the plan used, the link, the two roles (producer first), what
    the plan gives (target tokens/s, hours, cost, what binds) and what crosses per batch."""

    job: str
    sku: str
    vendor: str
    offer: str
    provider: str | None
    link: str  # "peer" (NVLink) or "host" (through host memory)
    producer: RoleLaunch
    consumer: RoleLaunch
    tokens_per_s: float
    hours: float
    cost_usd: float
    binding: str
    batch_tokens: int
    bytes_per_token: float
    # what crosses (job.roles.passes: "hidden states", "top-256 logits") and the workload's names for the roles
    # ("target", "drafter"; a distill job's "teacher", "student"): the words; ROLE and the variables keep the slots'
    handed: str = "hidden states"
    names: tuple[str, str] = ("target", "drafter")
    # a split across offers: the drafter's SKU, its vendor and its offer, on a node of its own (link "network")
    consumer_sku: str | None = None
    consumer_vendor: str | None = None
    consumer_offer: str | None = None

    @property
    def roles(self) -> tuple[RoleLaunch, RoleLaunch]:
        return (self.producer, self.consumer)

    @property
    def mixed(self) -> bool:
        """The roles on two offers' nodes, the hidden states over the network between them."""
        return self.consumer_sku is not None

    def sku_of(self, role: RoleLaunch) -> str:
        return self.consumer_sku if role is self.consumer and self.consumer_sku is not None else self.sku

    def vendor_of(self, role: RoleLaunch) -> str:
        return self.consumer_vendor if role is self.consumer and self.consumer_vendor is not None else self.vendor

    def gpu_resource(self, role: RoleLaunch) -> str:
        """The Kubernetes device plugin's resource for the role's GPUs."""
        return "amd.com/gpu" if is_amd(self.vendor_of(role)) else "nvidia.com/gpu"

    @property
    def gpus(self) -> int:
        return self.producer.gpus + self.consumer.gpus

    @property
    def link_bytes_per_s(self) -> float:
        """What crosses from the targets to the drafter at the plan's rate."""
        return self.tokens_per_s * self.bytes_per_token


def role_launches(target: str, drafter: str, producers: int, consumers: int) -> tuple[RoleLaunch, RoleLaunch]:
    """The two roles' launches: the target's model on ``producers`` GPUs, the drafter's on ``consumers``."""
    return (
        RoleLaunch("target", target, "forward", producers, TARGET_SCRIPT, MASTER_PORT),
        RoleLaunch("drafter", drafter, "train", consumers, DRAFTER_SCRIPT, MASTER_PORT + 1),
    )


def role_env(p: PipelineExport, role: RoleLaunch, handoff_addr: str) -> dict[str, str]:
    """The environment a role's script reads: the role, its model and mode, its GPUs (torchrun's WORLD_SIZE;
    its RANK the rank within the role), both roles' GPUs, the link, the drafter's address for the hidden states
    and the batch handed over (target tokens, bytes a token)."""
    return {
        "ROLE": role.role,
        "ROLE_MODEL": role.model,
        "ROLE_MODE": role.mode,
        "ROLE_GPUS": str(role.gpus),
        "TARGET_GPUS": str(p.producer.gpus),
        "DRAFTER_GPUS": str(p.consumer.gpus),
        "LINK": p.link,
        "HANDOFF_ADDR": handoff_addr,
        "HANDOFF_PORT": str(HANDOFF_PORT),
        "BATCH_TOKENS": str(p.batch_tokens),
        "BYTES_PER_TOKEN": f"{p.bytes_per_token:.0f}",
    }


def launch_args(role: RoleLaunch) -> list[str]:
    """torchrun over the role's GPUs of the node (one torchrun group a role, its own rendezvous port)."""
    return torchrun_args("1", str(role.gpus), "0", "localhost", str(role.master_port), " ".join(role.args))


def _link_words(link: str) -> str:
    words = {"peer": "NVLink peer copies", "network": "over the network between the two nodes"}
    return words.get(link, "through host memory (two PCIe hops)")


def header_lines(p: PipelineExport) -> list[str]:
    """The plan, its figures and the placeholders, as every role export starts."""
    t, d = p.roles
    first, second = p.names
    where = f"on a node of {p.offer} and one of {p.consumer_offer}" if p.mixed else f"on one node of {p.offer}"
    slots = "" if p.names == (t.role, d.role) else f" (ROLE={t.role} and ROLE={d.role} below)"
    style = "SpecForge/DFlash-style" if p.handed == "hidden states" else "distillation"
    return [
        f"gpuplan {_version()}: {p.job}: {t.gpus} x {p.sku_of(t)} {first} ({t.model}, forward) + {d.gpus} x "
        f"{p.sku_of(d)} {second} ({d.model}, train) {where}, {p.handed} {_link_words(p.link)}{slots}",
        f"planned: {p.tokens_per_s:,.0f} {first} tokens/s, bound by the {p.binding}; {p.hours:,.1f} h, "
        f"${p.cost_usd:,.0f}",
        f"placeholders to fill: {TARGET_SCRIPT} (the {first}'s forward pass, handing on its {p.handed}: a "
        f"{style} producer), {DRAFTER_SCRIPT} (the {second}'s trainer), {TARGET_MODEL}, {DATA}; "
        "gpuplan ships neither script",
        "each role runs as its own torchrun group: its rank within the role is torchrun's RANK (WORLD_SIZE its "
        "GPUs); the scripts read ROLE, ROLE_MODEL, ROLE_MODE, ROLE_GPUS, TARGET_GPUS, DRAFTER_GPUS, LINK, "
        f"HANDOFF_ADDR:HANDOFF_PORT (the {second}'s rank 0, which takes the {p.handed}), BATCH_TOKENS and "
        "BYTES_PER_TOKEN",
    ]


# --------------------------------------------------------------------------- Kubernetes: a JobSet


def _role_pod(p: PipelineExport, role: RoleLaunch, name: str) -> dict[str, Any]:
    """One role's pod: its GPUs, the launch line, on the node of the other role's pod, the node's IPC shared (a
    split across offers: on a node of its own SKU, nothing shared)."""
    gpu = p.gpu_resource(role)
    env = role_env(p, role, f"{name}-drafter-0-0.{name}")  # the drafter's pod by its JobSet hostname
    container: dict[str, Any] = {
        "name": role.role,
        "image": TRAINING_IMAGE,
        "command": ["torchrun"],
        "args": launch_args(role),
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "resources": {"limits": {gpu: str(role.gpus)}},  # a quantity: a string
    }
    if role.mode == "train":  # the drafter's rank 0 takes the hidden states
        container["ports"] = [{"name": "handoff", "containerPort": HANDOFF_PORT}]
    together = {"labelSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}}, "topologyKey": HOSTNAME_TOPOLOGY}
    affinity: dict[str, Any] = {}
    if not p.mixed:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [together]}
    product = launch_names(p.sku_of(role)).nvidia_device
    if product and not is_amd(p.vendor_of(role)):
        prefer = {"key": "nvidia.com/gpu.product", "operator": "In", "values": [gfd_product(product)]}
        affinity["nodeAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [prefer]}}
            ]
        }
    pod = {
        "restartPolicy": "Never",
        "hostIPC": True,  # CUDA IPC and /dev/shm between the two roles' pods (the node's, not an emptyDir)
        "affinity": affinity,
        "containers": [container],
        "tolerations": [{"key": gpu, "operator": "Exists", "effect": "NoSchedule"}],
    }
    if p.mixed:  # two nodes: nothing to share, the hidden states cross the network
        del pod["hostIPC"]
    return pod


def write_kubernetes(p: PipelineExport) -> str:
    """A JobSet: one replicatedJob per role, both pods on one node."""
    name = dns_label(p.job, limit=40)  # pod hostnames <name>-<role>-0-0 stay DNS labels (63)
    replicated = []
    for role in p.roles:
        pod = _role_pod(p, role, name)
        job_spec = {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": pod}}
        replicated.append({"name": role.role, "replicas": 1, "template": {"spec": job_spec}})
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "network": {"enableDNSHostnames": True},  # <jobset>-<role>-0-0.<jobset> (the field of every v1alpha2)
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [p.consumer.role]},
            "replicatedJobs": replicated,
        },
    }
    t, d = p.roles
    lines = [
        f"kubectl apply -f this.yaml (JobSet controller installed): JobSet {name}, replicatedJob {t.role} "
        f"({t.gpus} {p.gpu_resource(t)}) and {d.role} ({d.gpus} {p.gpu_resource(d)}), one pod each; set the image "
        "to yours",
        (
            f"two nodes: the {t.role} on a {p.sku_of(t)} node ({p.offer}), the {d.role} on a {p.sku_of(d)} node "
            f"({p.consumer_offer}); the {p.handed} cross the network to the {d.role}'s pod by its JobSet "
            f"hostname, at {p.link_bytes_per_s / 1e9:,.2f} GB/s for the plan's rate"
        )
        if p.mixed
        else (
            f"one node: each pod requires the other's node (podAffinity on {JOBSET_NAME_LABEL}={name}, topology "
            f"{HOSTNAME_TOPOLOGY}), as the plan's {p.link} link needs; hostIPC shares the node's IPC namespace and "
            "/dev/shm for NCCL's P2P and SHM transports between the pods (where your policy forbids it, delete "
            "it: NCCL then falls back to sockets, slower than the plan's link)"
        ),
        f"the JobSet succeeds when the {d.role} has trained (successPolicy); the {t.role} pod stops with it",
    ]
    for sku in dict.fromkeys(p.sku_of(role) for role in p.roles if not is_amd(p.vendor_of(role))):
        if launch_names(sku).nvidia_device:
            lines.append(f"node affinity: prefers nvidia.com/gpu.product for {sku} ({GFD_SOURCE})")
    return comment(header_lines(p) + lines) + yaml_text(jobset)


# --------------------------------------------------------------------------- Slurm: a heterogeneous job


def write_slurm(p: PipelineExport) -> str:
    """An sbatch script of two components, one per role, checked to share one node (a split across offers: each
    on a node of its own GPU), each started by srun."""
    name = _SLURM_NAME.sub("-", p.job).strip("-") or "gpuplan-job"
    time_limit = slurm_time(p.hours * (1.0 + TIME_MARGIN))
    components = []
    for i, role in enumerate(p.roles):
        directives = ["--nodes=1", "--ntasks=1", f"--gpus-per-node={role.gpus}", f"--time={time_limit}"]
        if i == 0:
            directives = [f"--job-name={name}", f"--output={name}-%j.out", *directives]
        components.append("".join(f"#SBATCH {d}\n" for d in directives))
    t, d = p.roles
    starts = []
    for i, role in enumerate(p.roles):
        env = " ".join(  # each value one line: a name cannot start a line of the script (common.one_line)
            f"{k}={shlex.quote(one_line(v))}" for k, v in role_env(p, role, "").items() if k != "HANDOFF_ADDR"
        )
        starts.append(
            f'HANDOFF_ADDR="$other" {env} srun --het-group={i} --ntasks=1 torchrun '
            + " ".join(shlex.quote(a) for a in launch_args(role))
            + f" &\n{role.role}_pid=$!\n"
        )
    placement = (
        f"the {t.role} needs {p.sku_of(t)} GPUs ({p.offer}) and the {d.role} {p.sku_of(d)} ({p.consumer_offer}): "
        "give each component its GPU type as your site names it (--constraint, --partition or "
        f"--gpus-per-node=<type>:<count>); the {p.handed} cross the network to the {p.names[1]}'s node "
        f"(HANDOFF_ADDR), {p.link_bytes_per_s / 1e9:,.2f} GB/s at the plan's rate"
        if p.mixed
        else f"Slurm allocates each component on its own: the plan's {p.link} link needs both on one node of "
        f"{p.sku}, which the script checks before it starts (pin it with --nodelist=<node> on both components, or "
        "a --constraint feature of those nodes)"
    )
    lines = [
        f"sbatch this.sh: component 0 the {t.role} ({t.gpus} GPUs), component 1 the {d.role} ({d.gpus}); "
        f"time limit: the plan's {p.hours:,.1f} h plus {TIME_MARGIN:.0%}",
        placement,
        f"the job ends when the {d.role} has trained; the {t.role} step ends with it",
    ]
    same_node = (
        'if [ "$node" != "$other" ]; then\n'
        + f'  echo "the {p.link} link needs both roles on one node; Slurm gave $node and $other: pin a node with '
        + '--nodelist on both components" >&2\n'
        + "  exit 1\n"
        + "fi\n"
    )
    return (
        "#!/bin/bash\n"
        + comment(header_lines(p) + lines)
        + "#SBATCH hetjob\n".join(components)
        + "set -euo pipefail\n"
        + 'node=$(scontrol show hostnames "$SLURM_JOB_NODELIST_HET_GROUP_0" | head -n 1)\n'
        + 'other=$(scontrol show hostnames "$SLURM_JOB_NODELIST_HET_GROUP_1" | head -n 1)\n'
        + ("" if p.mixed else same_node)
        + "".join(starts)
        + f'wait "${d.role}_pid"\n'
        + f'kill "${t.role}_pid" 2>/dev/null || true\n'
    )


# --------------------------------------------------------------------------- SkyPilot: a Job Group


def write_skypilot(p: PipelineExport) -> str:
    """A SkyPilot Job Group: a header, then a task per role with SkyPilot's name for the SKU."""
    group = _sky_name(p.job)
    cloud = provider if (provider := (p.provider or "").lower()) in SKYPILOT_CLOUDS else None
    d = p.consumer
    head = {
        "name": group,
        "execution": "parallel",
        "primary_tasks": [d.role],
        "termination_delay": JOB_GROUP_TERMINATION_DELAY,
    }
    tasks = []
    for role in p.roles:
        tasks.append(
            {
                "name": role.role,
                "resources": {
                    **({"cloud": cloud} if cloud else {}),
                    "accelerators": f"{skypilot_accelerator(p.sku_of(role))}:{role.gpus}",
                },
                "workdir": ".",
                "envs": {k: v for k, v in role_env(p, role, "").items() if k != "HANDOFF_ADDR"},
                "setup": "set -e\nif [ -f requirements.txt ]; then pip install -r requirements.txt; fi\n",
                "run": (  # the drafter's head node by the group's hostname (SkyPilot's service discovery)
                    f'set -e\nexport HANDOFF_ADDR="{d.role}-0.${{SKYPILOT_JOBGROUP_NAME}}"\ntorchrun '
                    + " ".join(shlex.quote(a) for a in launch_args(role))
                    + "\n"
                ),
            }
        )
    need_gb_per_s = p.link_bytes_per_s / 1e9
    lines = [
        f"sky jobs launch this.yaml: a Job Group (SkyPilot's experimental execution: parallel), task "
        f"{p.producer.role} ({p.producer.gpus} GPUs) and {d.role} ({d.gpus}); the group ends when the {d.role} "
        f"has trained (primary_tasks), the {p.producer.role} {JOB_GROUP_TERMINATION_DELAY} later",
        f"SkyPilot runs each task on its own cluster: the {p.handed} cross the network between them, not the "
        f"plan's {p.link} link; the plan's rate needs {need_gb_per_s:,.2f} GB/s there "
        f"({p.tokens_per_s:,.0f} tokens/s x {p.bytes_per_token:,.0f} bytes). Tasks reach each other by hostname "
        "on Kubernetes only; for one node, use --export kubernetes (a JobSet) or slurm",
    ]
    if cloud:
        lines.append(f"cloud: {cloud}, the provider whose price the plan used ({p.offer})")
    for sku in dict.fromkeys(p.sku_of(role) for role in p.roles):
        names = launch_names(sku)
        if names.skypilot is None:
            lines.append(f"note: SkyPilot may not list {sku}: set accelerators to your cloud's name (sky show-gpus)")
        elif names.skypilot_note:
            lines.append(f"note: {names.skypilot_note}")
    docs = [yaml_text(head), *(yaml_text(task) for task in tasks)]
    return comment(header_lines(p) + lines) + "---\n" + "---\n".join(docs)


WRITERS: dict[str, Callable[[PipelineExport], str]] = {
    "kubernetes": write_kubernetes,
    "slurm": write_slurm,
    "skypilot": write_skypilot,
}


def no_role_meaning(kind: str) -> str:
    """The paragraph refusing an export kind that configures one model's training on all the GPUs."""
    return (
        f"--export {kind} configures one framework's training of one model on all the GPUs, which has no "
        "meaning per role: a job with roles runs the target's forward pass and the drafter's training as two "
        "launches, each with its own script and settings. gpuplan writes a role job's launch as kubernetes "
        "(a JobSet, one replicated job per role), slurm (a heterogeneous job, one component per role) or "
        "skypilot (a Job Group, one task per role); choose one of those (docs/roles.md)"
    )


def export_roles(p: PipelineExport, kind: str) -> str:
    """The launch of ``p`` as ``kind`` (a ``ROLE_KINDS`` kind, by the name ``--export`` takes: ``kind`` is the
    launcher's, aliases resolved by the caller); any other kind is refused with ``no_role_meaning``."""
    writer = WRITERS.get(kind)
    if writer is None:
        raise ArgumentError(no_role_meaning(kind), field="export")
    return writer(p)
