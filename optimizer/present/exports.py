"""Launcher configurations for a chosen plan, each carrying the plan's exact layout and batch arithmetic.

Kinds: ``skypilot`` (task YAML), ``kubernetes`` (headless Service + Indexed ``batch/v1`` Job, one pod per
node), ``nodus`` (the seed's job spec, ``spec.resources.gpu``), ``deepspeed`` (config JSON), ``megatron``
(Megatron-LM ``pretrain_gpt.py`` arguments), ``torchtitan`` (job TOML plus the equivalent flags),
``accelerate`` (FSDP config) and ``torchrun`` (a command line). Every export starts with a header naming
the plan and the gpuplan version, in the format's comment syntax (DeepSpeed's JSON: a top-level
``_comment`` key, which DeepSpeed's config reader ignores).

The numbers: GPUs = nodes x GPUs per node = TP x PP x CP x DP, and the global batch (sequences per
optimizer step) = DP x micro-batch x gradient accumulation. A tool that cannot express a layout raises
``ArgumentError(field="export")`` naming the exports that can; a framework's export (deepspeed,
megatron, torchtitan) also refuses every layout its planner rules refuse (``frameworks.why_not_runnable``).
Where accelerate's nearest setting needs no more GPU memory than planned (FSDP's SHARD_GRAD_OP for
ZeRO-1, FSDP CPU offload for optimizer offload), its export writes it and says so in a ``note:`` line.
The section and argument builders (``torchtitan_sections``, ``megatron_args``) still map every layout.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shlex
from collections.abc import Callable
from importlib import metadata
from typing import Any

import yaml

from ..errors import ArgumentError
from ..inputs.schema import JobSpec, Strategy
from ..planning.frameworks import FRAMEWORKS, LORA_EXPORT_GAPS, why_not_runnable
from ..results import Plan

KINDS = ("skypilot", "kubernetes", "nodus", "deepspeed", "megatron", "torchtitan", "accelerate", "torchrun")
MASTER_PORT = 29500
PRECISIONS = ("bf16", "fp16", "fp8", "nvfp4")  # JobSpec.precision
DEFAULT_SEQ_LEN = 4096  # the Plan carries no sequence length; JobSpec.seq_len's default
TRAINING_IMAGE = "your-registry/your-training-image:latest"  # placeholder: an image with torchrun and train.py

# Where the flag and key names were checked (see each exporter).
MEGATRON_SOURCE = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py (main at d98e8a6, 2026-08-22); its TransformerConfig flags "
    "are generated from megatron/core/model_parallel_config.py and megatron/core/transformer/transformer_config.py"
)
TORCHTITAN_TOML_SOURCE = "pytorch/torchtitan torchtitan/config/job_config.py at v0.2.2 (the last release with TOML)"
TORCHTITAN_FLAGS_SOURCE = (
    "pytorch/torchtitan 0.3.0 torchtitan/config/configs.py (TrainingConfig, ParallelismConfig) and "
    "torchtitan/distributed/activation_checkpoint.py; TOML job files were removed in pytorch/torchtitan#2386, "
    "and main (b5bcd76) renames the batch keys to token counts"
)

# Megatron-LM's validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS == "1" where TP or CP > 1 on GPUs before
# Blackwell (arguments.py lines 1453-1479 at MEGATRON_SOURCE's commit); its example scripts export it always
MEGATRON_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}

# gpuplan's SKU names (catalogs/hardware.yaml) as SkyPilot's accelerator names, with a note where the name
# may not be what the user wants; SkyPilot's catalog (skypilot-org/skypilot-catalog catalogs/v8/common/
# accelerators.csv at d4d53f0) lists each of them (older copies lack B300 and RTXPRO6000), H800 under no name
SKYPILOT_VERSION = "skypilot 0.14.1 (7e59597)"
SKYPILOT_SOURCE = (
    f"{SKYPILOT_VERSION}: sky/utils/gpu_names.py CANONICAL_GPU_NAMES, sky/catalog/__init__.py "
    "get_common_gpus, sky/catalog/data_fetchers/fetch_runpod.py GPU_NAME_OVERRIDES and "
    "sky/provision/runpod/utils.py GPU_NAME_MAP"
)
SKYPILOT_ACCELERATORS: dict[str, tuple[str, str | None]] = {
    "A100-40GB": ("A100", None),  # SkyPilot's A100 is the 40 GB card (gpu_names.CANONICAL_GPU_MEMORY_GIB)
    "A100-80GB": ("A100-80GB", "SkyPilot's A100-80GB is a PCIe card on RunPod (A100-80GB-SXM there)"),
    "H100-SXM": ("H100", "SkyPilot's H100 is a PCIe card on RunPod: ask for H100-SXM there (or on Cudo)"),
    "H100-PCIe": ("H100", None),  # fetch_runpod.py GPU_NAME_OVERRIDES: 'H100-PCIe' -> 'H100'
    "H200": ("H200", None),
    "B200": ("B200", None),
    "B300": ("B300", None),  # CANONICAL_GPU_NAMES; Nebius' B300:8 (sky/clouds/nebius.py)
    "RTX-PRO-6000": ("RTXPRO6000", None),  # get_common_gpus; GCP g4, AWS and RunPod (server edition)
    "L40S": ("L40S", None),
    "MI300X": ("MI300X", None),  # fetch_runpod.py, GPU_NAME_MAP 'AMD Instinct MI300X OAM'
    # H800: no name in SkyPilot's code or its catalog; the SKU's own name goes out, with a note
}

# Kubernetes node labels. NVIDIA's GPU Feature Discovery (in the GPU Operator) writes nvidia.com/gpu.memory,
# the GPU's memory in MiB as an integer, and nvidia.com/gpu.product, the driver's device name with '-' for
# spaces; AMD's node labeller writes amd.com/gpu.device-id (the PCI device id) and amd.com/gpu.vram, rounded
# GiB as a string ("192G"), which no Gt rule compares.
GFD_SOURCE = (
    "NVIDIA/k8s-device-plugin docs/gpu-feature-discovery/README.md (Generated Labels) and internal/lm/resource.go "
    "(sanitise) at 1b826ac"
)
NVIDIA_DEVICE_NAMES = {  # the driver's names, as RunPod's GPU ids spell them (sky/provision/runpod/utils.py)
    "A100-80GB": "NVIDIA A100-SXM4-80GB",
    "H100-SXM": "NVIDIA H100 80GB HBM3",
    "H100-PCIe": "NVIDIA H100 PCIe",
    "H200": "NVIDIA H200",
    "B200": "NVIDIA B200",
    "L40S": "NVIDIA L40S",
    "RTX-PRO-6000": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
}
AMD_LABELLER_SOURCE = "ROCm/k8s-device-plugin cmd/k8s-node-labeller/main.go and amdgpu.ids at ed76468"
AMD_DEVICE_IDS = {"MI300X": ("74a1", "74a9", "74b5", "74bd")}  # amdgpu.ids: MI300X, MI300X HF, VF, HF


@dataclasses.dataclass(frozen=True)
class ExportJob:
    """The job's facts an export needs, which a Plan does not carry (``job_facts`` reads them off a JobSpec).

    ``seq_len`` (None: 4096, with a note saying to set it), ``precision`` (bf16, fp16, fp8, nvfp4),
    ``num_layers`` (the model's; torchtitan needs it for more than 2 interleaved stages, Megatron for
    activation offload and uneven pipeline stages), ``method`` (full, lora, qlora: the Megatron and torchtitan
    exports write full training only) and ``optimizer`` (job.optimizer: a framework that has no such optimizer
    is refused)."""

    name: str = "gpuplan-job"
    seq_len: int | None = None
    precision: str = "bf16"
    num_layers: int | None = None
    method: str = "full"
    optimizer: str = "adamw"


def job_facts(job: JobSpec) -> ExportJob:
    """The export's facts of a job (what ``gpuplan solve --export`` passes)."""
    return ExportJob(
        name=job.name,
        seq_len=job.seq_len,
        precision=job.precision,
        num_layers=job.model.layers,
        method=job.method,
        optimizer=job.optimizer,
    )


def _version() -> str:
    try:
        return metadata.version("gpuplan")
    except metadata.PackageNotFoundError:
        return "unknown"


# --------------------------------------------------------------------------- the plan's numbers


def _ep(s: Strategy) -> int:
    """Expert-parallel ranks (carved out of the DP x CP ranks; 1 for dense models and older Strategies)."""
    return int(getattr(s, "ep", 1))


def _hybrid(s: Strategy) -> bool:
    """ZeRO-3 sharded over a group smaller than the ranks that hold the same weights (DP x CP)."""
    return s.zero_stage >= 3 and s.shard_degree < s.dp * s.cp


def _check_layout(plan: Plan) -> None:
    s = plan.strategy
    if plan.nodes * plan.gpus_per_node != plan.gpus or s.tp * s.pp * s.cp * s.dp != plan.gpus:
        raise ArgumentError(
            f"the plan's layout does not add up: {plan.nodes} nodes x {plan.gpus_per_node} GPUs, "
            f"TP {s.tp} x PP {s.pp} x CP {s.cp} x DP {s.dp}, against {plan.gpus} GPUs",
            field="export",
        )


def describe(plan: Plan) -> str:
    """One line naming the plan, e.g. '4 x 8 B200 (offer), TP 8 PP 4 DP 1, ZeRO-1, global batch 256'."""
    s = plan.strategy
    degrees = (
        f"TP {s.tp} PP {s.pp} DP {s.dp}" + (f" CP {s.cp}" if s.cp > 1 else "") + (f" EP {_ep(s)}" if _ep(s) > 1 else "")
    )
    zero = f"ZeRO-{s.zero_stage}" + (f" hybrid-sharded over {s.shard_degree} GPUs" if _hybrid(s) else "")
    return f"{plan.label()}, {degrees}, {zero}, global batch {s.global_batch}"


def _header(plan: Plan, precision: str, lines: list[str] | None = None, notes: list[str] | None = None) -> list[str]:
    s = plan.strategy
    details = [f"recompute {s.recompute}", precision]
    if s.virtual_stages > 1:
        details.append(f"{s.virtual_stages} virtual pipeline stages per GPU")
    if s.offload != "none":
        details.append("optimizer state offloaded to CPU")
    out = [
        f"gpuplan {_version()}: {describe(plan)}",
        f"global batch {s.global_batch} = DP {s.dp} x micro-batch {s.micro_batch} x gradient accumulation "
        f"{s.grad_accum}; {plan.gpus} GPUs = TP {s.tp} x PP {s.pp} x CP {s.cp} x DP {s.dp}; " + ", ".join(details),
    ]
    cost = f", ${plan.cost_usd.p50:,.0f}" if plan.cost_usd is not None else ""
    out.append(f"planned: p50 {plan.hours.p50:.1f} h{cost} (labelled framework: {s.framework})")
    if plan.gpus_per_host:
        out.append(
            f"NVLink joins the {plan.gpus_per_node} GPUs of each node; launched as {plan.hosts} hosts of "
            f"{plan.gpus_per_host} GPUs, which must share that NVLink domain (one rack: Slurm --segment; Kubernetes: "
            "NVIDIA's DRA driver ComputeDomain), or TP and the collectives the plan times there cross the network"
        )
    return out + (lines or []) + [f"note: {n}" for n in notes or []]


def _comment(lines: list[str]) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def layout_env(plan: Plan) -> dict[str, str]:
    """The layout as environment variables for a training script (launchers carry no parallelism)."""
    s = plan.strategy
    return {
        "TP": str(s.tp),
        "PP": str(s.pp),
        "DP": str(s.dp),
        "CP": str(s.cp),
        "EP": str(_ep(s)),
        "ZERO_STAGE": str(s.zero_stage),
        "SHARD_DEGREE": str(s.shard_degree),
        "MICRO_BATCH": str(s.micro_batch),
        "GRAD_ACCUM": str(s.grad_accum),
        "GLOBAL_BATCH": str(s.global_batch),
        "RECOMPUTE": s.recompute,
        "VIRTUAL_STAGES": str(s.virtual_stages),
        "OFFLOAD": s.offload,
    }


def _is_amd(sku: str) -> bool:
    return sku.upper().startswith(("MI", "AMD"))  # AMD Instinct: MI250, MI300X, MI325X, MI355X


def _torchrun_args(nodes: str, per_node: str, rank: str, master: str, port: str, script: str) -> list[str]:
    """torchrun's arguments, one token each (a container's ``args``; joined by spaces, a command line)."""
    return [
        *("--nnodes", nodes),
        *("--nproc-per-node", per_node),
        *("--node-rank", rank),
        *("--master-addr", master),
        *("--master-port", port),
        *script.split(" "),
    ]


def _torchrun_line(plan: Plan, script: str) -> str:
    multi = plan.hosts > 1
    args = _torchrun_args(
        str(plan.hosts),
        str(plan.host_gpus),
        "$NODE_RANK" if multi else "0",
        "$MASTER_ADDR" if multi else "localhost",
        str(MASTER_PORT),
        script,
    )
    return "torchrun " + " ".join(args)


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks (readable shell scripts) and no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_block(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str_block)


def _yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


# --------------------------------------------------------------------------- what each tool can express


def _memory_option_gaps(plan: Plan, tool: str, in_backward: bool, offload: bool) -> list[str]:
    """The job's fine-tune memory options a tool's config cannot carry (``in_backward`` / ``offload``: it can)."""
    s = plan.strategy
    gaps = []
    if s.optimizer_in_backward and not in_backward:
        gaps.append(
            f"{tool} has no optimizer step in backward (the plan's gradient memory assumes torchtune's "
            "optimizer_in_bwd or torchtitan's optimizer.early_step_in_backward)"
        )
    if s.activation_offload and not offload:
        gaps.append(
            f"{tool}'s config has no activation offload to CPU (the plan assumes torchtune's "
            "enable_activation_offloading or Megatron-Core's cpu_offloading_activations)"
        )
    return gaps


def _accelerate_gaps(plan: Plan, job: ExportJob) -> list[str]:
    s = plan.strategy
    gaps = _memory_option_gaps(plan, "accelerate", in_backward=False, offload=False)
    if s.tp > 1 or s.pp > 1:
        gaps.append(
            f"accelerate's FSDP config shards data-parallel ranks only, so it cannot express TP {s.tp} x PP {s.pp}"
        )
    if s.cp > 1:
        gaps.append(f"accelerate's FSDP config has no context parallelism (CP {s.cp})")
    if _ep(s) > 1:
        gaps.append(f"accelerate's FSDP config has no expert parallelism (EP {_ep(s)})")
    if _hybrid(s) and s.shard_degree != plan.host_gpus:
        gaps.append(f"FSDP's HYBRID_SHARD shards over one node ({plan.host_gpus} GPUs), not {s.shard_degree} GPUs")
    return gaps


def _deepspeed_gaps(plan: Plan, job: ExportJob) -> list[str]:
    s = plan.strategy
    gaps = _memory_option_gaps(plan, "DeepSpeed", in_backward=False, offload=False)
    if s.cp > 1:
        gaps.append(f"DeepSpeed's config has no ring-attention context parallelism (CP {s.cp})")
    if s.virtual_stages > 1:
        gaps.append("DeepSpeed's pipeline schedule (TrainSchedule) is plain 1F1B, without interleaved virtual stages")
    if s.pp > 1 and s.zero_stage >= 2:
        gaps.append(
            f"deepspeed/runtime/pipe/engine.py: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism "
            f"(this plan: PP {s.pp} with ZeRO-{s.zero_stage})"
        )
    if s.pp > 1 and s.tp > 1:
        gaps.append("DeepSpeed's AutoTP shards Hugging Face models, not a PipelineModule, so it cannot add TP to PP")
    if s.tp > 1 and s.zero_stage > 2:
        gaps.append("AutoTP training runs with ZeRO stages 0-2 (DeepSpeed AutoTP training tutorial)")
    return gaps


def _megatron_gaps(plan: Plan, job: ExportJob) -> list[str]:
    # Activation offload is --cpu-offloading-num-layers (Megatron-Core's cpu_offloading_num_layers, which must
    # stay under the model's layer count): it needs num_layers.
    # (ZeRO stages, interleaving and the like are the framework's rules, which ``_gaps`` adds)
    return _memory_option_gaps(plan, "Megatron-LM", in_backward=False, offload=(job.num_layers or 0) > 1)


def _torchtitan_gaps(plan: Plan, job: ExportJob) -> list[str]:
    s = plan.strategy
    gaps = _memory_option_gaps(plan, "torchtitan", in_backward=True, offload=False)
    if _hybrid(s) and s.shard_degree % s.cp:
        gaps.append(f"torchtitan shards over data_parallel_shard_degree x CP, which {s.shard_degree} GPUs is not")
    if s.virtual_stages > 2 and job.num_layers is None:
        gaps.append(
            f"torchtitan's Interleaved1F1B defaults to 2 stages per rank; {s.virtual_stages} need "
            "pipeline_parallel_layers_per_stage, which needs the model's layer count: "
            "pass num_layers (export(plan, 'torchtitan', num_layers=...))"
        )
    return gaps


_GAPS: dict[str, Callable[[Plan, ExportJob], list[str]]] = {
    "deepspeed": _deepspeed_gaps,
    "megatron": _megatron_gaps,
    "torchtitan": _torchtitan_gaps,
    "accelerate": _accelerate_gaps,
}


def _adapter_line(method: str) -> list[str]:
    """For DeepSpeed and accelerate, whose configs have no setting for adapters: what the script must add
    for the plan's memory to hold (a LoRA or QLoRA plan fits where training every weight would not)."""
    if method == "lora":
        return ["method lora: the plan trains LoRA adapters on a frozen bf16 model; wrap the model with "
                "peft.get_peft_model(model, peft.LoraConfig(...)) in your script (this config trains what the model "
                "leaves trainable)"]  # fmt: skip
    if method == "qlora":
        return ["method qlora: the plan trains LoRA adapters on a 4-bit NF4 base; load the model with "
                "BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4') and wrap it with "
                "peft.get_peft_model(model, peft.LoraConfig(...)) in your script (this config trains what the model "
                "leaves trainable)"]  # fmt: skip
    return []


def _gaps(plan: Plan, kind: str, job: ExportJob) -> list[str]:
    """What the export of ``kind`` cannot write for this plan and the job's fine-tuning method, optimizer,
    sequence (where given) and precision."""
    gaps = _GAPS[kind](plan, job)
    if kind in FRAMEWORKS:
        # every rule by which gpuplan's planner says the framework refuses the layout (the layer counts'
        # rules only where the layers are known: a split into PP x chunks stands for them otherwise)
        layers = job.num_layers or plan.strategy.pp * plan.strategy.virtual_stages
        gaps += [
            rule
            for rule in why_not_runnable(
                kind, plan.strategy, layers, job.method, job.optimizer, job.seq_len, job.precision
            )
            if rule not in gaps
        ]
    if job.method == "lora" and kind in LORA_EXPORT_GAPS:
        gaps.append(LORA_EXPORT_GAPS[kind])
    return gaps


def _refuse_gaps(plan: Plan, kind: str, job: ExportJob) -> None:
    gaps = _gaps(plan, kind, job)
    if not gaps:
        return
    others = [k for k in _GAPS if k != kind and not _gaps(plan, k, job)]
    instead = (
        f"the {' or '.join(others)} export{'s' if len(others) > 1 else ''} can"
        if others
        else "no framework export expresses it; use torchrun, skypilot or kubernetes with your own script"
    )
    raise ArgumentError(
        f"the {kind} export cannot express this plan ({describe(plan)}): {'; '.join(gaps)}; {instead}",
        field="export",
    )


# --------------------------------------------------------------------------- launchers


def torchrun(plan: Plan, job: ExportJob) -> str:
    """A torchrun command line, the layout exported as environment variables for the script."""
    where = (
        [f"run on each of the {plan.hosts} nodes with NODE_RANK (0-{plan.hosts - 1}) and MASTER_ADDR (node 0) set"]
        if plan.hosts > 1
        else []
    )
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in layout_env(plan).items())
    return _comment(_header(plan, job.precision, where)) + f"export {env}\n" + _torchrun_line(plan, "train.py") + "\n"


def _sky_name(name: str) -> str:
    """A SkyPilot task name (sky/task.py _VALID_NAME_REGEX: ASCII letters and digits, runs of at most two of
    '._-' between them); ``gpuplan-job`` where nothing of the job's name is left."""
    words = re.findall(r"[A-Za-z0-9]+", name)
    return "-".join(words)[:63].strip("-") or "gpuplan-job"


def skypilot_accelerator(sku: str) -> str:
    """SkyPilot's name for a gpuplan SKU (``SKYPILOT_ACCELERATORS``); the SKU's own name where it has none."""
    return SKYPILOT_ACCELERATORS.get(sku, (sku, None))[0]


# SkyPilot's cloud names (sky.Task.from_yaml_config resources.cloud, skypilot 0.14.1) for the catalogs' providers:
# the plan's price is that provider's, so the task is pinned to it; a provider SkyPilot does not know (a
# reserved cluster, Nodus) leaves the cloud to SkyPilot's optimizer.
SKYPILOT_CLOUDS = frozenset({"aws", "gcp", "azure", "lambda", "runpod", "oci", "nebius"})


def skypilot(plan: Plan, job: ExportJob) -> str:
    """A SkyPilot task: one node per ``num_nodes``, torchrun over SkyPilot's SKYPILOT_* variables."""
    run_args = _torchrun_args(
        "$SKYPILOT_NUM_NODES",
        "$SKYPILOT_NUM_GPUS_PER_NODE",
        "$SKYPILOT_NODE_RANK",
        "$MASTER_ADDR",
        str(MASTER_PORT),
        "train.py",
    )
    accelerator, note = SKYPILOT_ACCELERATORS.get(plan.sku, (plan.sku, None))
    cloud = provider if (provider := (plan.provider or "").lower()) in SKYPILOT_CLOUDS else None
    task = {
        "name": _sky_name(job.name),
        "num_nodes": plan.hosts,
        "resources": {
            **({"cloud": cloud} if cloud else {}),
            "accelerators": f"{accelerator}:{plan.host_gpus}",
            "use_spot": plan.spot,
        },
        "workdir": ".",
        "envs": layout_env(plan),
        "setup": "set -e\nif [ -f requirements.txt ]; then pip install -r requirements.txt; fi\n",
        "run": (
            'set -e\nMASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n' + "torchrun " + " ".join(run_args) + "\n"
        ),
    }
    lines = ["sky launch -c <cluster> this.yaml (workdir . is synced to each node; train.py reads the envs)"]
    if cloud:
        lines.append(f"cloud: {cloud}, the provider whose price the plan used ({plan.offer})")
    if plan.sku not in SKYPILOT_ACCELERATORS:  # no name of SkyPilot's: the SKU's own goes out
        note = (
            f"SkyPilot's catalog may not list {plan.sku} ({SKYPILOT_VERSION} has no name for it): "
            "set accelerators to the name your cloud uses (sky show-gpus)"
        )
    if accelerator != plan.sku:
        lines.append(f"accelerators: SkyPilot's name {accelerator} for {plan.sku} ({SKYPILOT_SOURCE})")
    return _comment(_header(plan, job.precision, lines, [note] if note else [])) + _yaml(task)


def _dns_label(name: str, limit: int = 52) -> str:
    """A Kubernetes DNS-1035 label (Service names), short enough for '<job>-<index>' pod hostnames."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:limit].strip("-")
    if not label or not label[0].isalpha():
        label = ("job-" + label).strip("-")[:limit].rstrip("-")
    return label


def _gfd_product(device_name: str) -> str:
    """GPU Feature Discovery's nvidia.com/gpu.product for a driver device name (resource.go sanitise)."""
    return "-".join(re.sub(r"[^A-Za-z0-9_. -]", "", device_name).split())


def _node_affinity(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """The pod's node affinity and the header lines that say what it asks for.

    NVIDIA (``GFD_SOURCE``): required, nvidia.com/gpu.memory above the plan's per-GPU need in MiB (at most the
    capacity it was planned on, which is at most what the driver reports, so the SKU's own nodes always
    qualify); preferred, the SKU's nvidia.com/gpu.product where its device name is known. AMD
    (``AMD_LABELLER_SOURCE``): preferred, amd.com/gpu.device-id; amd.com/gpu.vram is no integer."""
    # Gt: GPUs of at least the whole MiB the plan needs (an A100 80GB plan using all 81,920 MiB had asked
    # for more than 81,920, which excluded the SKU's own nodes)
    need_mib = math.ceil(min(plan.memory_gib.total, plan.memory_gib.capacity) * 1024 - 1e-6) - 1
    if _is_amd(plan.sku):
        ids = AMD_DEVICE_IDS.get(plan.sku)
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
    if plan.sku in NVIDIA_DEVICE_NAMES:
        product = _gfd_product(NVIDIA_DEVICE_NAMES[plan.sku])
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


def kubernetes(plan: Plan, job: ExportJob) -> str:
    """A headless Service and a ``batch/v1`` Indexed Job: one pod per node, torchrun rendezvous on pod 0."""
    job_name = _dns_label(job.name)
    gpu = "amd.com/gpu" if _is_amd(plan.sku) else "nvidia.com/gpu"
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
    container = {
        "name": "trainer",
        "image": TRAINING_IMAGE,
        "command": ["torchrun"],
        "args": _torchrun_args(
            "$(NNODES)", "$(NPROC_PER_NODE)", "$(NODE_RANK)", "$(MASTER_ADDR)", "$(MASTER_PORT)", "train.py"
        ),
        "env": env,
        "ports": [{"name": "rendezvous", "containerPort": MASTER_PORT}],
        "resources": {"limits": {gpu: str(plan.host_gpus)}},  # a quantity: the client wants a string
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    affinity, affinity_lines = _node_affinity(plan)
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
        "metadata": {"name": job_name, "labels": labels},
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
    ]
    return _comment(_header(plan, job.precision, lines)) + _yaml(service) + "---\n" + _yaml(job_spec)


def nodus(plan: Plan, job: ExportJob) -> str:
    """The seed's job spec (``spec.resources.gpu: {type, count, minMemory}`` per node), which Nodus reads.
    The seed applies it with ``nodus apply --dry-run=server``, to a Kubernetes-style server for a ``batch/v1``
    Job, whose name Kubernetes takes only as a DNS label (lowercase letters, digits, hyphens): it is written
    as the Kubernetes export writes it."""
    min_memory_gi = math.floor(plan.memory_gib.capacity)
    spec = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": _dns_label(job.name, 63)},
        "spec": {
            "parallelism": plan.hosts,
            "completions": plan.hosts,
            "resources": {"gpu": {"type": plan.sku, "count": plan.host_gpus, "minMemory": f"{min_memory_gi}Gi"}},
        },
    }
    lines = ["the seed's spec.resources.gpu job spec (a provider format, not a Kubernetes object)"]
    return _comment(_header(plan, job.precision, lines)) + _yaml(spec)


# --------------------------------------------------------------------------- frameworks


def deepspeed(plan: Plan, job: ExportJob) -> str:
    """DeepSpeed config JSON. ``train_batch_size`` = micro x accumulation x DP ranks, DP = GPUs / (TP x PP)."""
    _refuse_gaps(plan, "deepspeed", dataclasses.replace(job, seq_len=None))  # a config without a sequence length
    s, precision = plan.strategy, job.precision
    dp_ranks = plan.gpus // (s.tp * s.pp)
    notes = []
    stage = s.zero_stage
    if s.offload != "none" and stage == 0:
        stage = 1  # one data-parallel rank: ZeRO-1 shards nothing, and is how DeepSpeed turns on ZeRO-Offload
        notes.append("ZeRO-Offload needs ZeRO stage 1 or more; over one data-parallel rank ZeRO-1 shards nothing")
    zero: dict[str, Any] = {
        "stage": stage,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "offload_optimizer": {"device": "cpu", "pin_memory": True} if s.offload != "none" else {"device": "none"},
        "offload_param": {"device": "none"},
    }
    if _hybrid(s):
        zero["zero_hpz_partition_size"] = s.shard_degree  # ZeRO++ hierarchical partitioning (hybrid shard)
    lines = []
    if s.tp > 1:
        lines.append(
            f"TP {s.tp}: tensor_parallel.autotp_size (DeepSpeed AutoTP training, Hugging Face models); pass "
            f"deepspeed.initialize an mpu whose data-parallel world size is {dp_ranks}, as DeepSpeed's AutoTP "
            "example does, so that it checks train_batch_size against the DP ranks, not every GPU"
        )
    if s.pp > 1:
        lines.append(
            f"PP {s.pp}: build the model as deepspeed.pipe.PipelineModule(layers, num_stages={s.pp}, "
            f"partition_method='parameters'); pipeline.stages records it, DeepSpeed reads the stages from code"
        )
    if _ep(s) > 1:
        lines.append(f"EP {_ep(s)}: deepspeed.moe.layer.MoE(..., ep_size={_ep(s)}) in the model (DeepSpeed-MoE)")
    lines += _adapter_line(job.method)
    if s.recompute == "selective":
        notes.append("selective recompute has no DeepSpeed setting: checkpoint the attention core in your model")
    if precision == "fp8":
        notes.append("DeepSpeed's config has no FP8 matmuls: bf16 here, FP8 through Transformer Engine in the model")
    if precision == "nvfp4":
        notes.append("DeepSpeed's config has no NVFP4 matmuls: bf16 here, NVFP4 through Transformer Engine")
    config: dict[str, Any] = {
        "_comment": _header(plan, precision, lines, notes),
        "train_batch_size": s.micro_batch * s.grad_accum * dp_ranks,
        "train_micro_batch_size_per_gpu": s.micro_batch,
        "gradient_accumulation_steps": s.grad_accum,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": precision != "fp16"},
        "fp16": {"enabled": precision == "fp16"},
        "zero_optimization": zero,
    }
    if s.tp > 1:
        config["tensor_parallel"] = {"autotp_size": s.tp}
    if s.pp > 1:
        config["pipeline"] = {
            "stages": s.pp,
            "partition": "parameters",
            "activation_checkpoint_interval": 1 if s.recompute == "full" else 0,
        }
    if s.recompute != "none":
        config["activation_checkpointing"] = {
            "partition_activations": s.tp > 1,
            "contiguous_memory_optimization": False,
            "cpu_checkpointing": False,
        }
    return json.dumps(config, indent=2) + "\n"


def uneven_pipeline_ends(num_layers: int | None, pp: int) -> tuple[int, int] | None:
    """Where PP does not divide the layers: the layers of the first and last stages, the middle stages
    holding ceil(layers / PP) each as gpuplan's time model assumes (its slowest stage), as Megatron-Core
    takes them (TransformerConfig num_layers_in_first/last_pipeline_stage: the middle layers must split
    evenly over the middle stages; without them it asserts that PP divides the layers). None where PP
    divides them (or they are unknown)."""
    if num_layers is None or pp < 2 or num_layers % pp == 0:
        return None
    slowest = -(-num_layers // pp)
    for middle in range(slowest, 0, -1):
        ends = num_layers - middle * (pp - 2)
        if 2 <= ends <= 2 * slowest:
            return ends // 2, ends - ends // 2
    return None


# job.optimizer -> Megatron-LM's --optimizer choice (frameworks.py: Megatron runs these two)
MEGATRON_OPTIMIZERS = {"adamw": "adam", "sgd": "sgd"}


def megatron_args(
    plan: Plan,
    seq_len: int | None = None,
    precision: str = "bf16",
    num_layers: int | None = None,
    optimizer: str = "adamw",
) -> list[str]:
    """The parallelism, batch, recompute, activation offload and precision arguments of Megatron-LM's
    ``pretrain_gpt.py``.

    Names checked against ``MEGATRON_SOURCE``; virtual stages use ``--num-virtual-stages-per-pipeline-rank``
    (current arguments.py has no ``--virtual-pipeline-model-parallel-size``). Activation offload is
    ``--cpu-offloading-num-layers``: arguments.py turns cpu_offloading on when it is positive, and
    Megatron-Core (transformer_config.py) takes fewer than num_layers; every layer but the last is offloaded
    (cpu_offloading_activations defaults to True, model_parallel_config.py)."""
    s = plan.strategy
    args = [
        f"--tensor-model-parallel-size {s.tp}",
        f"--pipeline-model-parallel-size {s.pp}",
    ]
    if s.virtual_stages > 1:
        args.append(f"--num-virtual-stages-per-pipeline-rank {s.virtual_stages}")
    if (ends := uneven_pipeline_ends(num_layers, s.pp)) is not None:
        # Megatron-LM's flags for TransformerConfig's num_layers_in_first/last_pipeline_stage, which it excludes
        # from its generated flags (arguments.py _add_network_size_args; argument_utils.py maps them back)
        args += [f"--decoder-first-pipeline-num-layers {ends[0]}", f"--decoder-last-pipeline-num-layers {ends[1]}"]
    args += [f"--context-parallel-size {s.cp}", f"--expert-model-parallel-size {_ep(s)}"]
    if getattr(s, "expert_tp", None):
        args.append(f"--expert-tensor-parallel-size {s.expert_tp}")
    if s.tp > 1:
        args.append("--sequence-parallel")
    # the planned optimizer's state, not Megatron's default (adam): --optimizer offers adam (decoupled weight
    # decay: AdamW) and sgd among gpuplan's optimizers (the framework rule refuses the others)
    args.append(f"--optimizer {MEGATRON_OPTIMIZERS[optimizer]}")
    if s.zero_stage >= 1 or s.offload != "none":
        args.append("--use-distributed-optimizer")
    if s.offload != "none":
        args += ["--optimizer-cpu-offload", "--optimizer-offload-fraction 1.0", "--use-precision-aware-optimizer"]
    if s.activation_offload and num_layers:
        args.append(f"--cpu-offloading-num-layers {num_layers - 1}")
    args += [
        f"--micro-batch-size {s.micro_batch}",
        f"--global-batch-size {s.global_batch}",
        f"--seq-length {seq_len or DEFAULT_SEQ_LEN}",
    ]
    if s.recompute == "selective":
        args.append("--recompute-granularity selective")
    elif s.recompute == "full":
        args += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    args.append("--fp16" if precision == "fp16" else "--bf16")
    if precision == "fp8":
        args.append("--fp8-format hybrid")
    elif precision == "nvfp4":
        args.append("--fp4-format e2m1")
    return args


def megatron(plan: Plan, job: ExportJob) -> str:
    """A torchrun command for Megatron-LM's ``pretrain_gpt.py`` with the plan's layout; add model/data flags."""
    _refuse_gaps(plan, "megatron", job)
    s = plan.strategy
    lines = [
        f"Megatron-LM derives DP = GPUs / (TP x PP x CP) = {s.dp} and {s.grad_accum} micro-batches per step "
        f"from --global-batch-size {s.global_batch} / (--micro-batch-size {s.micro_batch} x DP {s.dp})",
        "add your model (--num-layers, --hidden-size, ...), tokenizer and data flags",
        f"flags checked against {MEGATRON_SOURCE}",
    ]
    notes = [] if job.seq_len else [f"sequence length {DEFAULT_SEQ_LEN} (the plan carries none): set --seq-length"]
    command = [
        _torchrun_line(plan, "pretrain_gpt.py"),
        *megatron_args(plan, job.seq_len, job.precision, job.num_layers, job.optimizer),
    ]
    env = ""
    if s.tp > 1 or s.cp > 1:
        lines.append(
            "CUDA_DEVICE_MAX_CONNECTIONS=1: Megatron-LM asserts it for TP or CP above 1 before Blackwell "
            "(arguments.py validate_args), and its example scripts set it"
        )
        env = "export " + " ".join(f"{k}={v}" for k, v in MEGATRON_ENV.items()) + "\n"
    return _comment(_header(plan, job.precision, lines, notes)) + env + " \\\n  ".join(command) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    # a TOML basic string: JSON's escapes are TOML's, except that JSON writes a character past U+FFFF as
    # two surrogate escapes, which TOML refuses; unescaped, it is itself (DEL, which TOML must escape, too)
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml(sections: dict[str, dict[str, Any]]) -> str:
    return "\n".join(
        f"[{name}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in keys.items()) for name, keys in sections.items()
    )


def torchtitan_sections(
    plan: Plan,
    name: str = "gpuplan-job",
    seq_len: int | None = None,
    precision: str = "bf16",
    num_layers: int | None = None,
) -> dict[str, dict[str, Any]]:
    """The torchtitan job config as TOML sections (keys: ``TORCHTITAN_TOML_SOURCE``).

    Batch: torchtitan's ``local_batch_size`` is per data-parallel rank per accumulation step and
    ``global_batch_size`` / (local x DP) its gradient accumulation; with PP the local batch is cut into
    ``pipeline_parallel_microbatch_size`` micro-batches instead, so local = micro x accumulation."""
    s = plan.strategy
    if s.zero_stage == 0:
        shard, replicate = 1, s.dp  # DDP (FSDP2 over the CP ranks only)
    elif _hybrid(s):
        shard, replicate = s.shard_degree // s.cp, s.dp * s.cp // s.shard_degree  # HSDP
    else:
        shard, replicate = s.dp, 1  # FSDP2 over DP x CP
    training: dict[str, Any] = {
        "local_batch_size": s.micro_batch * s.grad_accum if s.pp > 1 else s.micro_batch,
        "global_batch_size": s.global_batch,
        "seq_len": seq_len or DEFAULT_SEQ_LEN,
        "mixed_precision_param": "bfloat16",
    }
    if s.offload != "none":
        training["enable_cpu_offload"] = True
    parallelism: dict[str, Any] = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
    }
    if s.zero_stage in (1, 2):
        parallelism["fsdp_reshard_after_forward"] = "never"  # FSDP2 keeping gathered weights: ZeRO-2
    parallelism["tensor_parallel_degree"] = s.tp
    parallelism["pipeline_parallel_degree"] = s.pp
    if s.pp > 1:
        parallelism["pipeline_parallel_schedule"] = "Interleaved1F1B" if s.virtual_stages > 1 else "1F1B"
        parallelism["pipeline_parallel_microbatch_size"] = s.micro_batch
        if s.virtual_stages > 2 and num_layers:
            # ceil((layers + first-less + last-less) / per stage) stages: with no allowance for the embedding
            # and output, exactly PP x v stages of equal layers, as planned
            parallelism["pipeline_parallel_layers_per_stage"] = num_layers // (s.pp * s.virtual_stages)
            parallelism["pipeline_parallel_first_stage_less_layers"] = 0
            parallelism["pipeline_parallel_last_stage_less_layers"] = 0
    parallelism["context_parallel_degree"] = s.cp
    if _ep(s) > 1:
        parallelism["expert_parallel_degree"] = _ep(s)
    sections: dict[str, dict[str, Any]] = {
        "job": {"description": f"{name}: {describe(plan)}", "dump_folder": "./outputs"},
        "training": training,
        "parallelism": parallelism,
        "activation_checkpoint": {"mode": s.recompute},
    }
    if s.recompute == "selective":
        sections["activation_checkpoint"]["selective_ac_option"] = "op"
    if s.optimizer_in_backward:
        sections["optimizer"] = {"early_step_in_backward": True}
    if precision == "fp8":
        sections["model"] = {"converters": ["quantize.linear.float8"]}
        sections["quantize.linear.float8"] = {"recipe_name": "rowwise"}
    return sections


# TOML keys torchtitan 0.3.0 has no flag for: its OptimizerConfig has no early_step_in_backward (0.2.2's
# job_config.py Optimizer had it; the 0.3.0 parser answers "Unrecognized options")
TORCHTITAN_030_MISSING = {("optimizer", "early_step_in_backward")}


def torchtitan_flags(sections: dict[str, dict[str, Any]]) -> list[str]:
    """The same values as torchtitan 0.3.0 command-line flags (``TORCHTITAN_FLAGS_SOURCE``), less those it
    has none for (``TORCHTITAN_030_MISSING``)."""
    flags = []
    for section in ("training", "parallelism", "optimizer"):
        for key, value in sections.get(section, {}).items():
            if (section, key) in TORCHTITAN_030_MISSING:
                continue
            flag = f"--{section}.{key.replace('_', '-')}"
            if isinstance(value, bool):
                flags.append(flag if value else f"--{section}.no-{key.replace('_', '-')}")
            else:
                flags.append(f"{flag} {value}")
    parallelism = sections["parallelism"]
    if parallelism["pipeline_parallel_degree"] > 1 or parallelism.get("expert_parallel_degree", 1) > 1:
        # 0.3.0's trainer (Trainer.Config._validate_cuda_graphs) refuses CUDA graphs with PP, and with EP under
        # a token dispatcher that synchronises with the CPU (the default all-to-all); no 0.2.2 key
        flags.append("--training.disable-cuda-graphs")
    flags.append(f"activation-checkpoint:{sections['activation_checkpoint']['mode']}")  # a tyro subcommand: last
    return flags


def torchtitan(plan: Plan, job: ExportJob) -> str:
    """A torchtitan job TOML (torchtitan <= 0.2.2, ``--job.config_file``) whose header gives the same
    values as torchtitan 0.3.0 flags (0.3.0 reads configs from Python functions, no TOML)."""
    _refuse_gaps(plan, "torchtitan", job)
    precision = job.precision
    sections = torchtitan_sections(plan, job.name, job.seq_len, precision, job.num_layers)
    launch = _torchrun_line(plan, "-m torchtitan.train")
    lines = [
        "torchtitan <= 0.2.2 reads this file:",
        f"  {launch} --job.config_file this.toml",
        f"  keys: {TORCHTITAN_TOML_SOURCE}",
        "torchtitan 0.3.0 reads no TOML (a Python config function instead); the same values as its flags:",
        f"  {launch} --module <model> --config <config function> " + " ".join(torchtitan_flags(sections)),
        f"  flags: {TORCHTITAN_FLAGS_SOURCE}",
    ]
    notes = [] if job.seq_len else [f"sequence length {DEFAULT_SEQ_LEN} (the plan carries none): set training.seq_len"]
    if precision in ("fp16", "nvfp4"):
        notes.append(f"torchtitan has no {precision} mixed precision: bfloat16 here")
    if precision == "fp8":
        notes.append("torchtitan 0.3.0 sets Float8 through the model converters in your config function, not a flag")
    if plan.strategy.optimizer_in_backward:
        notes.append(
            "torchtitan 0.3.0 cannot run this plan as costed: it has no optimizer step in backward, on which the "
            "plan's gradient memory counts (its line above leaves it out); run torchtitan 0.2.2 with this TOML"
        )
    s = plan.strategy
    if s.zero_stage < 3 and s.dp > 1 and (s.tp > 1 or s.pp > 1):
        # v0.2.2 models/llama3/infra/parallelize.py: 'DDP has not supported > 1D parallelism'; 0.3.0 runs it
        # as HSDP with a shard degree of 1
        notes.append(
            "torchtitan 0.2.2 refuses data parallelism without FSDP beside TP or PP ('DDP has not supported > 1D "
            "parallelism'): run this plan with 0.3.0's line above"
        )
    return _comment(_header(plan, precision, lines, notes)) + _toml(sections)


FSDP_STRATEGY = {0: "NO_SHARD", 1: "SHARD_GRAD_OP", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}
ACCELERATE_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "nvfp4": "bf16"}


def accelerate(plan: Plan, job: ExportJob) -> str:
    """An accelerate FSDP config (data parallelism only: plans with TP or PP raise)."""
    _refuse_gaps(plan, "accelerate", dataclasses.replace(job, seq_len=None))  # a config without a sequence length
    s, precision = plan.strategy, job.precision
    strategy = "HYBRID_SHARD" if _hybrid(s) else FSDP_STRATEGY[s.zero_stage]
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "mixed_precision": ACCELERATE_PRECISION.get(precision, "bf16"),
        "num_machines": plan.hosts,
        "num_processes": plan.gpus,
        "machine_rank": 0,
        # accelerate (commands/launch.py, utils/launch.py prepare_multi_gpu_env) hands torchrun the rendezvous
        # endpoint main_process_ip:main_process_port over nodes; without the address it is "None:29500"
        **({"main_process_port": MASTER_PORT} if plan.hosts > 1 else {}),
        "main_training_function": "main",
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
        "fsdp_config": {
            "fsdp_sharding_strategy": strategy,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_activation_checkpointing": s.recompute != "none",
            "fsdp_offload_params": s.offload != "none",
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": True,
        },
    }
    lines = [f"per-GPU micro-batch {s.micro_batch}, gradient accumulation {s.grad_accum} (set them in your script)"]
    if plan.hosts > 1:
        lines += [
            f"run on each of the {plan.hosts} nodes with NODE_RANK (0-{plan.hosts - 1}) and MASTER_ADDR (node 0) set:",
            "accelerate launch --config_file this.yaml --machine_rank $NODE_RANK --main_process_ip $MASTER_ADDR "
            f"--main_process_port {MASTER_PORT} train.py",
        ]
    else:
        lines.append("accelerate launch --config_file this.yaml train.py")
    lines += _adapter_line(job.method)
    notes = []
    if s.zero_stage == 1:
        notes.append("FSDP has no ZeRO-1; SHARD_GRAD_OP (ZeRO-2) is the closest strategy and needs less memory")
    if s.offload != "none":
        notes.append("FSDP offloads parameters with their optimizer state: less GPU memory than planned, slower")
    if s.recompute == "selective":
        notes.append("FSDP's activation checkpointing recomputes whole blocks (full), more than the selective plan")
    if precision == "nvfp4":
        notes.append("accelerate has no NVFP4 setting: bf16 here")
    return _comment(_header(plan, precision, lines, notes)) + _yaml(config)


def _facts(job: JobSpec | ExportJob | None, **given: Any) -> ExportJob:
    """The job's facts (defaults without a job), each keyword given (not None) in place of its fact: the one
    place the keyword form of ``export`` meets ``ExportJob``."""
    facts = job_facts(job) if isinstance(job, JobSpec) else job or ExportJob()
    return dataclasses.replace(facts, **{key: value for key, value in given.items() if value is not None})


def export(
    plan: Plan,
    kind: str,
    name: str | None = None,
    seq_len: int | None = None,
    *,
    job: JobSpec | ExportJob | None = None,
    precision: str | None = None,
    num_layers: int | None = None,
    method: str | None = None,
    optimizer: str | None = None,
) -> str:
    """The launcher config ``kind`` (one of ``KINDS``) for ``plan``, as text to write to a file.

    ``job``: the plan's job (a JobSpec, or its ``ExportJob`` facts), which says what a Plan does not: the
    name, sequence length, precision, layer count, method and optimizer (``ExportJob``). Without it, the
    keywords give them one by one (each defaulting as ``ExportJob`` does); with it, a keyword given replaces
    the job's fact."""
    facts = _facts(
        job, name=name, seq_len=seq_len, precision=precision, num_layers=num_layers, method=method, optimizer=optimizer
    )
    kind = kind.lower()
    if facts.precision not in PRECISIONS:
        raise ArgumentError(
            f"unknown precision {facts.precision!r}; choose one of {', '.join(PRECISIONS)}", field="export"
        )
    if kind not in KINDS and kind != "k8s":
        raise ArgumentError(f"unknown export {kind!r}; choose one of {', '.join(KINDS)}", field="export")
    _check_layout(plan)
    if kind == "skypilot":
        return skypilot(plan, facts)
    if kind in ("kubernetes", "k8s"):
        return kubernetes(plan, facts)
    if kind == "nodus":
        return nodus(plan, facts)
    if kind == "deepspeed":
        return deepspeed(plan, facts)
    if kind == "megatron":
        return megatron(plan, facts)
    if kind == "torchtitan":
        return torchtitan(plan, facts)
    if kind == "accelerate":
        return accelerate(plan, facts)
    return torchrun(plan, facts)
