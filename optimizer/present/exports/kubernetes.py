"""The Kubernetes export: a headless Service and an Indexed ``batch/v1`` Job, one pod per node.

torchrun rendezvouses on pod 0 (``<job>-0.<job>`` under the Service's subdomain), each pod's node rank its
completion index; the pods ask for the GPUs by their device plugin's resource (nvidia.com/gpu, amd.com/gpu)
and for nodes whose GPUs hold the plan by GPU Feature Discovery's labels (``node_affinity``). Names are
DNS labels (``dns_label``, which the nodus export uses too). A multi-node plan's pods ask for RDMA and the
Job is queued in Kueue, which admits its pods together (``multi_node``). Read back by the official client
(``kubernetes.client.ApiClient`` deserializing V1Service and V1Job): tests/exports/test_exports.py
test_kubernetes_indexed_job_deserializes_with_the_official_client,
test_kubernetes_asks_for_gpus_that_hold_the_plan_on_every_sku,
test_a_b200_plan_needing_166_gib_a_gpu_cannot_land_on_h200_or_h100_nodes,
test_kubernetes_keeps_nodes_whose_gpus_hold_exactly_the_plans_memory and test_kubernetes_names_are_dns_labels.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ...inputs.launch_names import AMD_LABELLER_SOURCE, is_amd, launch_names
from ...results import Plan
from .common import ExportJob, Launcher, comment, header, sku_vendor, yaml_text
from .torchrun import MASTER_PORT, layout_env, torchrun_args

TRAINING_IMAGE = "your-registry/your-training-image:latest"  # placeholder: an image with torchrun and train.py


# Kubernetes node labels. NVIDIA's GPU Feature Discovery (in the GPU Operator) writes nvidia.com/gpu.memory,
# the GPU's memory in MiB as an integer, and nvidia.com/gpu.product, the driver's device name with '-' for
# spaces; AMD's node labeller writes amd.com/gpu.device-id (the PCI device id) and amd.com/gpu.vram, rounded
# GiB as a string ("192G"), which no Gt rule compares. Each SKU's device name and ids: inputs/launch_names.py.
GFD_SOURCE = (
    "NVIDIA/k8s-device-plugin docs/gpu-feature-discovery/README.md (Generated Labels) and internal/lm/resource.go "
    "(sanitise) at 1b826ac"
)


def dns_label(name: str, limit: int = 52) -> str:
    """A Kubernetes DNS-1035 label (Service names), short enough for '<job>-<index>' pod hostnames."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:limit].strip("-")
    if not label or not label[0].isalpha():
        label = ("job-" + label).strip("-")[:limit].rstrip("-")
    return label


def gfd_product(device_name: str) -> str:
    """GPU Feature Discovery's nvidia.com/gpu.product for a driver device name (resource.go sanitise)."""
    return "-".join(re.sub(r"[^A-Za-z0-9_. -]", "", device_name).split())


def node_affinity(plan: Plan, amd: bool) -> tuple[dict[str, Any], list[str]]:
    """The pod's node affinity and the header lines that say what it asks for, on an AMD SKU (``amd``) or an
    NVIDIA one; the names from the SKU's row of ``launch_names``.

    NVIDIA (``GFD_SOURCE``): required, nvidia.com/gpu.memory above the plan's per-GPU need in MiB (at most the
    capacity it was planned on, which is at most what the driver reports, so the SKU's own nodes always
    qualify); preferred, the SKU's nvidia.com/gpu.product where its device name is known. AMD
    (``AMD_LABELLER_SOURCE``): preferred, amd.com/gpu.device-id; amd.com/gpu.vram is no integer."""
    # Gt: GPUs of at least the whole MiB the plan needs (an A100 80GB plan using all 81,920 MiB had asked
    # for more than 81,920, which excluded the SKU's own nodes)
    need_mib = math.ceil(min(plan.memory_gib.total, plan.memory_gib.capacity) * 1024 - 1e-6) - 1
    names = launch_names(plan.sku)
    if amd:
        ids = names.amd_device_ids
        lines = [
            "AMD's node labeller writes the memory as rounded GiB (amd.com/gpu.vram=192G), which no Gt rule "
            f"compares: nothing requires the plan's {plan.memory_gib.total:.1f} GiB a GPU; pin the nodes with "
            "your cluster's labels"
        ]
        if not ids:
            return {}, lines
        lines.insert(
            0, f"node affinity: prefers amd.com/gpu.device-id {', '.join(ids)} ({plan.sku}; {AMD_LABELLER_SOURCE})"
        )
        preferred = [{"key": "amd.com/gpu.device-id", "operator": "In", "values": list(ids)}]
        return {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": preferred}}
            ]
        }, lines
    affinity: dict[str, Any] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": [str(need_mib)]}]}
            ]
        }
    }
    wants = (
        f"requires GPUs of more than {need_mib} MiB (nvidia.com/gpu.memory; the plan needs "
        f"{plan.memory_gib.total:.1f} GiB a GPU)"
    )
    if names.nvidia_device:
        product = gfd_product(names.nvidia_device)
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": [product]}]
                },
            }
        ]
        wants += f", prefers nvidia.com/gpu.product={product}"
    lines = [
        f"node affinity: {wants}: labels of NVIDIA's GPU Feature Discovery (GPU Operator; {GFD_SOURCE})",
        "on a cluster without GPU Feature Discovery, delete spec.template.spec.affinity (or the pods stay Pending)",
    ]
    return affinity, lines


# Multi-node wiring. RDMA: the NVIDIA Network Operator's shared RDMA device plugin resource (Mellanox
# k8s-rdma-shared-dev-plugin, resourceName rdma_shared_device_a under the rdma/ prefix, as the Network
# Operator's NicClusterPolicy examples name it) and IPC_LOCK, which RDMA's pinned memory registration needs;
# NCCL_IB_DISABLE=0 keeps NCCL (and RCCL) on InfiniBand/RoCE. Gang scheduling: Kueue's queue label on the
# Job (kueue.x-k8s.io/queue-name, Kueue's batch/v1 Job integration), which admits all of the Job's pods at
# once or none, under the LocalQueue named here (Kueue's examples call theirs user-queue).
RDMA_RESOURCE = "rdma/rdma_shared_device_a"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_QUEUE = "user-queue"
NCCL_ENV = {"NCCL_IB_DISABLE": "0"}


def multi_node(plan: Plan, container: dict[str, Any], job_labels: dict[str, str]) -> list[str]:
    """Queue a Job of several pods in Kueue (gang admission), and where the plan spans network nodes (not one
    NVLink rack's hosts, whose traffic the plan times on NVLink) request RDMA for its pods; the header's lines."""
    lines = []
    if plan.nodes > 1:
        container["resources"]["limits"][RDMA_RESOURCE] = "1"
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        container["env"] += [{"name": k, "value": v} for k, v in NCCL_ENV.items()]
        lines.append(
            f"RDMA: each pod asks for {RDMA_RESOURCE} (NVIDIA Network Operator's shared RDMA device plugin) with "
            "IPC_LOCK; use your cluster's RDMA resource name if it differs (kubectl describe node)"
        )
    if plan.hosts > 1:
        job_labels[KUEUE_QUEUE_LABEL] = KUEUE_QUEUE
        lines.append(
            f"gang scheduling: Kueue admits all {plan.hosts} pods of the Job together ({KUEUE_QUEUE_LABEL}="
            f"{KUEUE_QUEUE}: set your LocalQueue; without Kueue, delete the label)"
        )
    return lines


def write(plan: Plan, job: ExportJob) -> str:
    """A headless Service and a ``batch/v1`` Indexed Job: one pod per node, torchrun rendezvous on pod 0."""
    job_name = dns_label(job.name)
    amd = is_amd(sku_vendor(plan, job))
    gpu = "amd.com/gpu" if amd else "nvidia.com/gpu"
    labels = {"app.kubernetes.io/name": job_name}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": job_name, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": labels,
            "ports": [{"name": "rendezvous", "port": MASTER_PORT, "targetPort": MASTER_PORT}],
        },
    }
    env: list[dict[str, Any]] = [
        {"name": "NNODES", "value": str(plan.hosts)},
        {"name": "NPROC_PER_NODE", "value": str(plan.host_gpus)},
        {
            "name": "NODE_RANK",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
            },
        },
        {"name": "MASTER_ADDR", "value": f"{job_name}-0.{job_name}"},  # pod 0's hostname under the Service's subdomain
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
    ]
    env += [{"name": k, "value": v} for k, v in layout_env(plan).items()]
    container: dict[str, Any] = {
        "name": "trainer",
        "image": TRAINING_IMAGE,
        "command": ["torchrun"],
        "args": torchrun_args(
            "$(NNODES)", "$(NPROC_PER_NODE)", "$(NODE_RANK)", "$(MASTER_ADDR)", "$(MASTER_PORT)", "train.py"
        ),
        "env": env,
        "ports": [{"name": "rendezvous", "containerPort": MASTER_PORT}],
        "resources": {"limits": {gpu: str(plan.host_gpus)}},  # a quantity: the client wants a string
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    job_labels = dict(labels)
    wiring = multi_node(plan, container, job_labels)
    affinity, affinity_lines = node_affinity(plan, amd)
    pod: dict[str, Any] = {"subdomain": job_name, "restartPolicy": "Never"}
    if affinity:
        pod["affinity"] = {"nodeAffinity": affinity}
    pod.update(
        containers=[container],
        tolerations=[{"key": gpu, "operator": "Exists", "effect": "NoSchedule"}],
        volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    )
    job_spec = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name, "labels": job_labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": plan.hosts,
            "parallelism": plan.hosts,
            "backoffLimit": 0,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
    lines = [
        f"kubectl apply -f this.yaml: Service {job_name} (headless, rendezvous) + Indexed Job {job_name}, "
        f"{plan.hosts} pod(s) x {plan.host_gpus} {gpu}",
        f"set the image to yours (it runs torchrun train.py); MASTER_ADDR {job_name}-0.{job_name} is pod 0 via the "
        "Service",
        *affinity_lines,
        *wiring,
    ]
    return comment(header(plan, job.precision, lines)) + yaml_text(service) + "---\n" + yaml_text(job_spec)


LAUNCHER = Launcher("kubernetes", write, aliases=("k8s",), suffix="yaml", summary="an Indexed Job + headless Service")
