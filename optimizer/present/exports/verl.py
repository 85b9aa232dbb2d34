"""The verl export: a GRPO job's plan (issue 52, docs/roles.md) as verl runs it, one launch line.

verl (volcengine/verl v0.7.0, commit f9c855f7cf04d603c9546bc01776c74806a879c1) runs GRPO as ``python3 -m
verl.trainer.main_ppo algorithm.adv_estimator=grpo ...`` (examples/grpo_trainer/run_qwen2-7b_math.sh): a
``@hydra.main`` over verl/trainer/config/ppo_trainer.yaml, every argument a Hydra override applied in struct mode.
A colocated plan is verl's hybrid engine (the rollout and the actor on the same GPUs, its default); a disaggregated
asynchronous plan is its one-step-off-policy recipe (``python3 -m recipe.one_step_off_policy.main_ppo``,
recipe/one_step_off_policy/config/one_step_off_ppo_trainer.yaml: ``actor_rollout_ref.hybrid_engine=false``, the
rollout's own ``rollout.nnodes`` x ``rollout.n_gpus_per_node``, the trainer's ``trainer.nnodes`` x
``trainer.n_gpus_per_node``; its README's "Configuration Guidelines": the same nodes split between the two, or whole
nodes each). The overrides carry:

- the batch: ``data.train_batch_size`` (prompts a step), ``actor_rollout_ref.rollout.n`` (samples a prompt),
  ``actor_rollout_ref.actor.ppo_mini_batch_size`` = the step's prompts (verl multiplies it by n: one optimizer step a
  GRPO step, as planned), ``ppo_epochs=1``, the micro-batches (``ppo_micro_batch_size_per_gpu`` and the log-prob
  passes' ``log_prob_micro_batch_size_per_gpu``: job.roles.micro_batch) and ``data.max_prompt_length`` /
  ``max_response_length`` (the longest response, rollout.max_response_tokens, and what the sequence leaves).
- the engine: vLLM (``rollout.name``), ``tensor_model_parallel_size``, ``gpu_memory_utilization``, ``max_num_seqs``.
- the trainer: gpuplan's plan, FSDP over the policy's GPUs (``actor.strategy=fsdp``) with every layer recomputed
  (``model.enable_gradient_checkpointing=true``).
- the forward passes: the reference's log-probs where verl loads the reference (``actor.use_kl_loss``,
  verl/trainer/main_ppo.py), the old policy's unless taken from the rollout
  (``algorithm.rollout_correction.bypass_mode``, with ``rollout.calculate_log_probs``; the one-step-off recipe sets
  both, so its step runs one pass fewer than a plan of 2 assumed).
- where: ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` (hosts: a GB200 NVL72 rack's trays of 4), and the run's
  length, ``trainer.total_training_steps``.

Refused (``verl_gaps``): a synchronous disaggregated plan (verl separates the rollout's GPUs only one step off-policy),
a split its resource pools cannot hold, a step's sequences that do not shard evenly over the actor's ranks (verl's
DataProto.chunk asserts it), and the job's settings every GRPO export refuses (exports/grpo.py). Beyond one host,
Ray runs over the hosts first (``ray start --head`` on one, ``ray start --address`` on the others: verl's
docs/start/multinode.rst) and the line runs on the head. Read back by tests/exports/test_grpo_export.py: bash runs the script
with ``python3`` stubbed, Hydra's own command-line parser (``hydra._internal.utils.get_args_parser``, what
``@hydra.main`` reads) splits it, and Hydra's override parser and applier set the overrides in struct mode on verl's
flattened trainer config (verl/trainer/config/_generated_ppo_trainer.yaml, which its CI keeps equal to the composed
ppo_trainer.yaml) and the recipe's, vendored at the commit above in tests/data/verl.
"""

from __future__ import annotations

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

VERL_COMMIT = "f9c855f7cf04d603c9546bc01776c74806a879c1"  # volcengine/verl v0.7.0
HYBRID_ENGINE = "verl.trainer.main_ppo"  # colocated: rollout and actor on the same GPUs
ONE_STEP_OFF = "recipe.one_step_off_policy.main_ppo"  # disaggregated, the rollout one step ahead
TRAINER_KEYS = "trainer.nnodes x trainer.n_gpus_per_node"


def one_step_off_pools(p: GrpoPlacement) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(rollout, trainer) as (nodes, GPUs a node) for the one-step-off recipe: on one host, each its GPUs of it; beyond
    one, whole hosts each, or the same share of every host (its README's two layouts); None: neither holds the split."""
    if p.hosts == 1:
        return (1, p.rollout_gpus), (1, p.policy_gpus)
    host = p.gpus_per_host
    if p.rollout_gpus % host == 0 and p.policy_gpus % host == 0:
        return (p.rollout_gpus // host, host), (p.policy_gpus // host, host)
    if p.rollout_gpus % p.hosts == 0 and p.policy_gpus % p.hosts == 0:
        return (p.hosts, p.rollout_gpus // p.hosts), (p.hosts, p.policy_gpus // p.hosts)
    return None


def verl_gaps(g: GrpoExport) -> list[str]:
    """What verl cannot run as the plan has it, each naming the job's field or the split and the fix."""
    p, r = g.placement, g.recipe
    gaps = whole_hosts_gaps(p, "verl", TRAINER_KEYS)
    if not p.colocated and not p.asynchronous:
        gaps.append(
            "verl runs the rollout on GPUs of its own only one step off-policy (recipe/one_step_off_policy), and this "
            "disaggregated plan is synchronous: set job.roles.async: true, or placement: colocated (verl's hybrid "
            "engine), or export it with --export nemo-rl"
        )
    elif not p.colocated and not gaps and one_step_off_pools(p) is None:
        gaps.append(
            f"verl's one-step-off recipe gives the rollout and the trainer whole hosts each or the same share of every "
            f"host (rollout.nnodes x rollout.n_gpus_per_node), and the plan's {p.rollout_gpus} rollout + "
            f"{p.policy_gpus} policy GPUs over {p.hosts} hosts of {p.gpus_per_host} are neither: check such a split"
        )
    gaps += shard_gaps(g, "verl", "verl/protocol.py DataProto.chunk asserts it")
    if r.forward_passes > 2:
        gaps.append(
            f"job.roles.forward_passes is {r.forward_passes}, and verl's GRPO step runs at most 2 (the reference's "
            "and the old policy's log-probs): set it to 2 or fewer"
        )
    return gaps + job_gaps(r, "verl", "actor_rollout_ref.actor.optim.optimizer: AdamW")


def verl_overrides(g: GrpoExport) -> list[str]:
    """The Hydra overrides carrying the plan: the algorithm, the data, the actor, the rollout, where it runs."""
    r, p = g.recipe, g.placement
    bypass = not p.colocated or r.forward_passes == 0  # the old log-probs from the rollout (the recipe's own)
    reference = r.forward_passes >= (1 if bypass else 2)
    out = [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        f"data.train_batch_size={r.prompts_per_step}",
        f"data.max_prompt_length={r.max_total_sequence_length - r.max_response_length}",
        f"data.max_response_length={r.max_response_length}",
        f"actor_rollout_ref.model.path={r.model_name or POLICY_MODEL}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.actor.strategy=fsdp",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={r.prompts_per_step}",
        "actor_rollout_ref.actor.ppo_epochs=1",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={r.micro_batch}",
        f"actor_rollout_ref.actor.use_kl_loss={'true' if reference else 'false'}",
        "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.n={r.samples_per_prompt}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={r.rollout_tp}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={r.memory_utilization:g}",
        f"actor_rollout_ref.rollout.max_num_seqs={r.max_num_seqs}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={r.micro_batch}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={r.micro_batch}",
    ]
    if bypass and p.colocated:  # what the one-step-off recipe's config sets itself
        out += ["actor_rollout_ref.rollout.calculate_log_probs=true", "algorithm.rollout_correction.bypass_mode=true"]
    pools = one_step_off_pools(p)
    if p.colocated or pools is None:
        out += [f"trainer.nnodes={p.hosts}", f"trainer.n_gpus_per_node={p.gpus_per_host}"]
    else:
        (rollout_nodes, rollout_gpus), (train_nodes, train_gpus) = pools
        out += [
            "actor_rollout_ref.hybrid_engine=false",
            f"trainer.nnodes={train_nodes}",
            f"trainer.n_gpus_per_node={train_gpus}",
            f"rollout.nnodes={rollout_nodes}",
            f"rollout.n_gpus_per_node={rollout_gpus}",
        ]
    return [*out, f"trainer.total_training_steps={r.steps}"]


def launch_args(g: GrpoExport) -> list[str]:
    """``python3 -m MODULE OVERRIDES...``: the hybrid engine's trainer, or the one-step-off recipe's."""
    return ["python3", "-m", HYBRID_ENGINE if g.placement.colocated else ONE_STEP_OFF, *verl_overrides(g)]


def header_lines(g: GrpoExport) -> list[str]:
    p, r = g.placement, g.recipe
    lines = [
        *plan_lines(g),
        f"verl v0.7.0 ({VERL_COMMIT[:7]}): run from its checkout; set data.train_files and data.val_files to your "
        "prompts (verl's defaults are GSM8K's parquet files); prompts longer than data.max_prompt_length are an "
        "error (data.truncation), the plan's prompt length being a mean",
        "the trainer as planned: FSDP over the policy's GPUs, every layer recomputed, every sequence of a step in "
        "one optimizer step",
    ]
    if not p.colocated and r.forward_passes == 2:
        lines.append(
            "the one-step-off recipe takes the old log-probs from the rollout (algorithm.rollout_correction."
            "bypass_mode): one forward pass fewer than planned"
        )
    if p.hosts > 1:
        lines.append(
            f"{p.hosts} hosts: start Ray over them first (ray start --head on this one, ray start --address=HEAD:6379 "
            "on the others), then run this on the head"
        )
    return lines


def write_verl(g: GrpoExport) -> str:
    """The launch script: the header, then the command, one override a line."""
    refuse(g, "verl", verl_gaps(g))
    return "#!/bin/bash\n" + comment(header_lines(g)) + "set -euo pipefail\n" + continued(launch_args(g), head=3)


LAUNCHER = Launcher(
    "verl",
    one_model_refused("verl", "verl's main_ppo with the plan's rollout and training"),
    suffix="sh",
    summary="verl's main_ppo with the plan as Hydra overrides",
)
