"""The nemo-rl export: a GRPO job's plan (issue 52, docs/roles.md) as NeMo RL runs it, one launch line.

NeMo RL (NVIDIA-NeMo/RL v0.7.0, commit 81aa43dda4765b0429cf31dab44441e4e4383911; the framework of the published
rows in validation/rl_runs.yaml) runs GRPO as ``uv run python examples/run_grpo.py --config
examples/configs/grpo_math_8B.yaml`` followed by Hydra overrides (its README.md, "GRPO Multi-node"):
examples/run_grpo.py reads ``--config`` with argparse and hands the rest to nemo_rl/utils/config.py
``parse_hydra_overrides`` (Hydra's ``OverridesParser`` over the config in struct mode: a key the config lacks fails).
The export writes that line with the plan in it:

- where: ``cluster.num_nodes`` (operating-system hosts, Ray's nodes) and ``cluster.gpus_per_node`` (a host's GPUs:
  a GB200 NVL72 rack's tray of 4, the SKU's ``gpus_per_host``; the plan's GPUs where they are part of one host).
- the placement: colocated, ``policy.generation.colocated.enabled=true``; disaggregated, ``false`` with
  ``colocated.resources.gpus_per_node`` and ``num_nodes``: on one host the rollout's GPUs of it (the policy trains on
  the rest), beyond one host whole hosts each, as many as the host has (nemo_rl/algorithms/grpo.py ``setup``: its
  asserts on those keys).
- the engine: vLLM (``policy.generation.backend``), ``vllm_cfg.tensor_parallel_size`` (job.roles.rollout.tp),
  ``gpu_memory_utilization``, and vLLM's ``max_num_seqs`` as ``+policy.generation.vllm_kwargs.max_num_seqs``
  (nemo_rl/models/generation/vllm/vllm_worker.py passes ``vllm_kwargs`` to vLLM's engine; ``+``: Hydra adds a key).
- the trainer: gpuplan's plan, FSDP (ZeRO-3) over the policy's GPUs with every layer recomputed: the DTensor backend
  (``policy.dtensor_cfg.enabled=true``, ``tensor_parallel_size=1``, ``activation_checkpointing=true``, Megatron off).
- the batch: ``grpo.num_prompts_per_step``, ``grpo.num_generations_per_prompt``, ``policy.train_global_batch_size``
  (every sequence of the step in one optimizer step, as planned), ``train_micro_batch_size`` and
  ``logprob_batch_size`` (job.roles.micro_batch: the plan's micro-batches, whole sequences, so
  ``policy.sequence_packing.enabled=false``), ``policy.max_total_sequence_length`` (prompt + longest response) and
  ``policy.generation.max_new_tokens`` (rollout.max_response_tokens).
- the forward passes: 2 (the reference's and the old policy's log-probs, NeMo RL's default); 1: no reference,
  ``loss_fn.reference_policy_kl_penalty=0``; 0: also no old log-probs, ``loss_fn.force_on_policy_ratio=true``.
- async (disaggregated, ``async: true``: one step of staleness): ``grpo.async_grpo.enabled=true``,
  ``max_trajectory_age_steps=1``, with the two settings ``async_grpo_train`` asserts
  (``loss_fn.use_importance_sampling_correction=true``, ``policy.generation.vllm_cfg.async_engine=true``).
- the run: ``grpo.max_num_steps`` (rollout.steps, else the job's tokens over a step's), ``policy.model_name`` (the
  job's Hub id, its preset's, else a placeholder to fill) and ``policy.precision``.

Beyond one host the same command runs under NeMo RL's ``ray.sub`` (``COMMAND=... sbatch --nodes=N --gres=gpu:G
ray.sub``, its README's multi-node form). What NeMo RL cannot run as planned is refused, one paragraph naming it
(``nemo_rl_gaps``; what every GRPO export shares is exports/grpo.py's): a disaggregated split of part of a host
beyond one host, a step's sequences that do not shard evenly over the policy's ranks and micro-batches, more than
two forward passes, a precision, method or optimizer the plan assumed that the launch does not carry. Read back by tests/exports/test_grpo_export.py: bash runs the script with
``uv`` and ``sbatch`` stubbed, run_grpo.py's argparse splits the line, and Hydra's parser and override applier set
the overrides on NeMo RL's own configs (tests/data/nemo_rl, vendored at the commit above), a key they lack failing.
"""

from __future__ import annotations

import math
import shlex

from .common import Launcher, comment
from .grpo import (
    POLICY_MODEL,
    GrpoExport,
    GrpoPlacement,
    continued,
    job_gaps,
    one_model_refused,
    plan_lines,
    refuse,
    shard_gaps,
    whole_hosts_gaps,
)
from .slurm import TIME_MARGIN, slurm_time

NEMO_RL_COMMIT = "81aa43dda4765b0429cf31dab44441e4e4383911"  # NVIDIA-NeMo/RL v0.7.0
NEMO_RL_SCRIPT = "examples/run_grpo.py"  # v0.7.0; v0.4's examples/run_grpo_math.py, gone since v0.6
# The published GRPO configs on the DTensor backend (gpuplan's FSDP plan), by the policy each was written for: the
# nearest by size is the base (its learning rate and schedule); the plan's settings are overrides on it.
# grpo_math_1B.yaml: Qwen/Qwen2.5-1.5B (1.54B, its model card); grpo_math_8B.yaml: Llama 3.1 8B (8.03B).
BASE_CONFIGS: tuple[tuple[float, str], ...] = (
    (1.54e9, "examples/configs/grpo_math_1B.yaml"),
    (8.03e9, "examples/configs/grpo_math_8B.yaml"),
)
MOST_FORWARD_PASSES = 2  # the reference's log-probs and the old policy's: what NeMo RL's GRPO step computes
CLUSTER_KEYS = "cluster.num_nodes x cluster.gpus_per_node"


def base_config(params: float) -> str:
    """The published DTensor config nearest the policy's size (on a log scale)."""
    return min(BASE_CONFIGS, key=lambda row: abs(math.log(params / row[0])))[1]


def _placement_gaps(p: GrpoPlacement) -> list[str]:
    if gaps := whole_hosts_gaps(p, "NeMo RL", CLUSTER_KEYS):
        return gaps
    if p.colocated or p.hosts == 1:
        return []
    if p.rollout_gpus % p.gpus_per_host or p.policy_gpus % p.gpus_per_host:
        return [
            f"beyond one host NeMo RL gives generation whole hosts of {p.gpus_per_host} GPUs "
            "(policy.generation.colocated.resources.gpus_per_node must equal cluster.gpus_per_node: "
            f"nemo_rl/algorithms/grpo.py setup), and the plan's {p.rollout_gpus} rollout + {p.policy_gpus} policy GPUs "
            f"over {p.hosts} hosts split one; check a split of whole hosts (--role rollout=NxSKU --role policy=MxSKU, "
            f"N and M multiples of {p.gpus_per_host})"
        ]
    return []


def nemo_rl_gaps(g: GrpoExport) -> list[str]:
    """What NeMo RL cannot run as the plan has it, each naming the job's field or the split and the fix."""
    r = g.recipe
    source = (
        "nemo_rl/distributed/batched_data_dict.py shard_by_batch_size asserts it; the DTensor worker drops a remainder"
    )
    gaps = _placement_gaps(g.placement) + shard_gaps(g, "NeMo RL", source)
    if r.forward_passes > MOST_FORWARD_PASSES:
        gaps.append(
            f"job.roles.forward_passes is {r.forward_passes}, and NeMo RL's GRPO step runs at most "
            f"{MOST_FORWARD_PASSES} (the reference's and the old policy's log-probs): set it to 2 or fewer"
        )
    return gaps + job_gaps(r, "NeMo RL", "policy.optimizer.name: torch.optim.AdamW")


def nemo_rl_overrides(g: GrpoExport) -> list[str]:
    """The Hydra overrides carrying the plan, in the order the config lists the sections (grpo, loss_fn, policy,
    cluster)."""
    r, p = g.recipe, g.placement
    out = [
        f"grpo.num_prompts_per_step={r.prompts_per_step}",
        f"grpo.num_generations_per_prompt={r.samples_per_prompt}",
        f"grpo.max_num_steps={r.steps}",
    ]
    if p.asynchronous:
        out += ["grpo.async_grpo.enabled=true", "grpo.async_grpo.max_trajectory_age_steps=1"]
        out.append("loss_fn.use_importance_sampling_correction=true")
    if r.forward_passes < MOST_FORWARD_PASSES:  # no reference model (grpo.py setup skips its log-probs)
        out.append("loss_fn.reference_policy_kl_penalty=0")
    if r.forward_passes < 1:  # no old log-probs: the ratio is 1 (lm_policy.py, grpo_train)
        out.append("loss_fn.force_on_policy_ratio=true")
    out += [
        f"policy.model_name={r.model_name or POLICY_MODEL}",
        "policy.precision=bfloat16",
        f"policy.train_global_batch_size={r.sequences}",
        f"policy.train_micro_batch_size={r.micro_batch}",
        f"policy.logprob_batch_size={r.micro_batch}",
        f"policy.max_total_sequence_length={r.max_total_sequence_length}",
        "policy.dtensor_cfg.enabled=true",
        "policy.dtensor_cfg.tensor_parallel_size=1",
        "policy.dtensor_cfg.activation_checkpointing=true",
        "policy.megatron_cfg.enabled=false",
        "policy.sequence_packing.enabled=false",
        "policy.generation.backend=vllm",
    ]
    if r.max_new_tokens is not None:
        out.append(f"policy.generation.max_new_tokens={r.max_new_tokens}")
    out += [
        f"policy.generation.vllm_cfg.tensor_parallel_size={r.rollout_tp}",
        f"policy.generation.vllm_cfg.gpu_memory_utilization={r.memory_utilization:g}",
    ]
    if p.asynchronous:
        out.append("policy.generation.vllm_cfg.async_engine=true")
    out += [
        f"+policy.generation.vllm_kwargs.max_num_seqs={r.max_num_seqs}",
        f"policy.generation.colocated.enabled={'true' if p.colocated else 'false'}",
    ]
    if not p.colocated:
        one = p.hosts == 1  # one host: the rollout's GPUs of it; beyond: whole hosts (grpo.py setup)
        out += [
            f"policy.generation.colocated.resources.gpus_per_node={p.rollout_gpus if one else p.gpus_per_host}",
            f"policy.generation.colocated.resources.num_nodes={1 if one else p.rollout_gpus // p.gpus_per_host}",
        ]
    out += [f"cluster.num_nodes={p.hosts}", f"cluster.gpus_per_node={p.gpus_per_host}"]
    return out


def launch_args(g: GrpoExport) -> list[str]:
    """``uv run python examples/run_grpo.py --config BASE OVERRIDES...``: the command NeMo RL's README runs."""
    return ["uv", "run", "python", NEMO_RL_SCRIPT, "--config", base_config(g.recipe.params), *nemo_rl_overrides(g)]


def header_lines(g: GrpoExport) -> list[str]:
    return [
        *plan_lines(g),
        f"NeMo RL v0.7.0 ({NEMO_RL_COMMIT[:7]}): run from its checkout; {base_config(g.recipe.params)} is the base "
        "(its learning rate and schedule), the plan's settings its overrides",
        "the trainer as planned: FSDP over the policy's GPUs (DTensor), every layer recomputed, every sequence of a "
        "step in one optimizer step",
        "sequence packing is off: the plan's micro-batches are whole sequences (packing runs faster than planned)",
    ]


def write_nemo_rl(g: GrpoExport) -> str:
    """The launch script: the header, then the command (under NeMo RL's ray.sub beyond one host)."""
    refuse(g, "nemo-rl", nemo_rl_gaps(g))
    p = g.placement
    lines = header_lines(g)
    if p.hosts == 1:
        return "#!/bin/bash\n" + comment(lines) + "set -euo pipefail\n" + continued(launch_args(g), head=6)
    command = " ".join(shlex.quote(arg) for arg in launch_args(g))
    time_limit = slurm_time(g.hours * (1.0 + TIME_MARGIN))
    lines.append(
        f"{p.hosts} hosts: NeMo RL's ray.sub starts Ray over them and runs COMMAND on its head (sbatch from the "
        f"checkout's root; CONTAINER your NeMo RL image); time limit: the plan's {g.hours:,.1f} h plus {TIME_MARGIN:.0%}"
    )
    return (
        "#!/bin/bash\n"
        + comment(lines)
        + "set -euo pipefail\n"
        + f"COMMAND={shlex.quote(command)} \\\n"
        + 'CONTAINER="${CONTAINER:?set CONTAINER to your NeMo RL image}" \\\n'
        + 'MOUNTS="$PWD:$PWD" \\\n'
        + f"sbatch --nodes={p.hosts} --gres=gpu:{p.gpus_per_host} --time={time_limit} ray.sub\n"
    )


LAUNCHER = Launcher(
    "nemo-rl",
    one_model_refused("nemo-rl", "NeMo RL's run_grpo.py with the plan's rollout and training"),
    suffix="sh",
    summary="NeMo RL's run_grpo.py with the plan as Hydra overrides",
)
