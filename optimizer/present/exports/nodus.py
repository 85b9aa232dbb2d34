"""The nodus export: the seed's job spec, ``spec.resources.gpu: {type, count, minMemory}`` per node.

A provider format, not a Kubernetes object: Nodus reads ``spec.resources.gpu`` (the SKU, GPUs per node and
the planned GPU's memory, floored to whole GiB), ``parallelism`` and ``completions`` (one per node). The seed
applies it with ``nodus apply --dry-run=server`` to a Kubernetes-style server for a ``batch/v1`` Job, so the
name is a DNS label as the kubernetes export writes it (``kubernetes.dns_label``, up to 63 characters). Read
back by tests/exports/test_exports.py test_the_nodus_job_is_named_as_an_api_server_takes_a_job_name and
test_the_old_kubernetes_form_is_rejected_by_the_client_and_kept_as_nodus (YAML, then the official Kubernetes
client, which takes no ``spec.resources``), test_every_text_export_parses_whatever_the_job_name, and
tests/exports/test_ecosystem.py test_kubernetes_spec_is_the_seeds_format.
"""

from __future__ import annotations

import math

from ...results import Plan
from .common import ExportJob, Launcher, comment, header, yaml_text
from .kubernetes import dns_label


def write(plan: Plan, job: ExportJob) -> str:
    """The seed's job spec (``spec.resources.gpu: {type, count, minMemory}`` per node), which Nodus reads,
    named as the Kubernetes export names a Job (a DNS label: lowercase letters, digits, hyphens)."""
    min_memory_gi = math.floor(plan.memory_gib.capacity)
    spec = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": dns_label(job.name, 63)},
        "spec": {
            "parallelism": plan.hosts,
            "completions": plan.hosts,
            "resources": {"gpu": {"type": plan.sku, "count": plan.host_gpus, "minMemory": f"{min_memory_gi}Gi"}},
        },
    }
    lines = ["the seed's spec.resources.gpu job spec (a provider format, not a Kubernetes object)"]
    return comment(header(plan, job.precision, lines)) + yaml_text(spec)


LAUNCHER = Launcher("nodus", write, suffix="yaml", summary="spec.resources.gpu")
