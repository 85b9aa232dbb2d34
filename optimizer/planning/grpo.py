"""A GRPO job's GPUs: how many generate and how many train, and what a step takes (issue 52, docs/roles.md).

The policy (the job's model) generates ``samples_per_prompt`` responses to each of ``prompts_per_step`` prompts
on rollout engines of ``rollout_tp`` GPUs (physics/decode.py), its reference and recomputed log-probabilities
are forward passes over the finished sequences, and gpuplan's ``step_time`` trains it data-parallel with fully
sharded weights (FSDP, verl's and OpenRLHF's default trainer); the new weights then reach the engines
(physics/rl.py). ``colocated``: all GPUs do each stage in turn. ``disaggregated``: ``r`` GPUs generate and
``G - r`` train, synchronously (the step the sum) or asynchronously (the slower side), and every split with
whole engines on the rollout side is tried (brute force: at most a node's GPUs). Rates are in tokens (prompt +
response, every sample) a second, the unit RL frameworks report (NeMo RL's tokens/sec/GPU x GPUs).

The log-probability passes (the reference's and the policy's own) are forward passes on the trainer's GPUs in
the trainer's layout: the same sharded weights gathered for each micro-batch, the same pipeline, micro-batches
no larger. gpuplan charges them at the training step's achieved hardware FLOP rate, not at the matmuls' peak
share: a forward pass is no cheaper per FLOP than training. verl's published breakdown says so (and that it is
dearer): Qwen2.5-Math-7B, colocated FSDP2 on 32 / 64 / 128 H20, ``old_log_prob`` 107.71 / 70.26 / 53.92 s
against ``update_actor`` 269.80 / 133.41 / 113.81 s a step (volcengine/verl@b178a3cd docs/advance/fully_async.md,
"colocate sync" rows), one forward pass at 0.40-0.53 of a training update whose FLOPs are three to four times
a forward's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import JobError
from ..physics.decode import DecodeEngine, Generation, generate_s, kv_bytes_per_token, kv_capacity_tokens
from ..physics.layout import Cluster, Layout, Recompute, RunSettings
from ..physics.memory import memory_breakdown
from ..physics.rl import Placement, RlStep, all_gather_s, broadcast_s, host_round_trip_s
from ..physics.roles import forward_flops_per_token, host_link_bytes_per_s
from ..physics.shapes import ModelShape, TrainingState
from ..physics.time import flops_per_token, step_time
from .role_hardware import DEFAULT_LINK_EFFICIENCY, DEFAULT_OVERLAP, RoleHardware

# A causal query sees half its sequence on average.
CAUSAL_SPAN = 0.5
# vLLM's default scheduler cap on sequences decoded together (EngineArgs max_num_seqs: 256); NeMo RL leaves it
# to vLLM, verl sets 1024 (volcengine/verl@1acd108 verl/trainer/config/ppo_trainer.yaml rollout.max_num_seqs).
DEFAULT_MAX_NUM_SEQS = 256
# Share of each GPU's memory the engine takes: verl's rollout default (same file,
# actor_rollout_ref.rollout.gpu_memory_utilization: 0.5), colocated beside the trainer's state; NeMo RL's 0.6.
DEFAULT_MEMORY_UTILIZATION = 0.5
# Forward passes over each finished sequence besides training: the reference's log-probs and the policy's own,
# recomputed (verl ray_trainer.fit: compute_ref_log_prob, compute_log_prob).
DEFAULT_FORWARD_PASSES = 2


@dataclass(frozen=True)
class GrpoRecipe:
    """A step's batch and the engines' settings, as the frameworks' configs name them."""

    prompts_per_step: int  # verl data.train_batch_size; NeMo RL num_prompts_per_step
    samples_per_prompt: int  # verl rollout.n; NeMo RL num_generations_per_prompt (the group)
    prompt_tokens: float  # mean prompt length
    response_tokens: float  # mean response length
    max_response_tokens: float = 0.0  # the longest response a step waits for (0: the mean's waves only)
    rollout_tp: int = 1
    # the job left the engine's size open: on each GPU the smallest that holds the policy (fitting_rollout_tp)
    rollout_tp_auto: bool = False
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    forward_passes: int = DEFAULT_FORWARD_PASSES
    micro_batch: int = 1  # sequences a training micro-batch
    # The trainer as the run sets it (all 1 / False: gpuplan's FSDP plan). Megatron-Core (NeMo RL's, verl's and
    # slime's Megatron backend): tensor, pipeline and expert parallel degrees, its distributed optimizer (the
    # optimizer state sharded over the data-parallel ranks, ZeRO-1) and Transformer Engine's fused layers.
    train_tp: int = 1
    train_pp: int = 1
    train_ep: int = 1
    megatron: bool = False
    # Sequence packing: a micro-batch holds this many tokens of whole sequences (NeMo RL's train_mb_tokens,
    # max_total_sequence_length x train_micro_batch_size); 0: ``micro_batch`` sequences.
    pack_tokens: float = 0.0
    recompute: bool = True  # full activation recomputation (NeMo RL's activation_checkpointing)
    placement: Placement = "colocated"
    asynchronous: bool = False  # disaggregated only: one step of staleness

    @property
    def sequences(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    @property
    def seq_tokens(self) -> float:
        return self.prompt_tokens + self.response_tokens

    @property
    def tokens_per_step(self) -> float:
        return self.sequences * self.seq_tokens


@dataclass(frozen=True)
class GrpoJob:
    policy: ModelShape  # the trained model, which also generates
    train: TrainingState
    recipe: GrpoRecipe
    tokens: float  # tokens (prompt + response, every sample) to process: steps x tokens a step
    weight_bytes: float  # the policy's bf16 weights, as the engines hold them
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY
    overlap: float = DEFAULT_OVERLAP

    def flops_per_token(self, context_tokens: float) -> float:
        """One token's forward FLOPs at ``context_tokens`` keys a query (2 N + 4 L w s)."""
        width = self.policy.attention_width or self.policy.q_width
        return forward_flops_per_token(self.policy.active_params, self.policy.layers, width, context_tokens)


def _node_link(hw: RoleHardware, gpus: int, efficiency: float) -> float:
    """One direction of one GPU's link to ``gpus`` others: NVLink within a node, the network beyond it."""
    if gpus > hw.gpus_per_node:
        return hw.network_bytes_per_s * efficiency
    return hw.intra_node_bytes_per_s / 2.0 * efficiency


def generation(job: GrpoJob, hw: RoleHardware, rollout_gpus: int) -> Generation:
    """The rollout on ``rollout_gpus``: each engine's share of the step's sequences (physics/decode.py)."""
    r = job.recipe
    if rollout_gpus % r.rollout_tp or r.rollout_tp > hw.gpus_per_node:
        raise JobError(f"{rollout_gpus} rollout GPUs are not whole engines of tensor parallel {r.rollout_tp}")
    engines = rollout_gpus // r.rollout_tp
    shape = job.policy
    engine = DecodeEngine(
        weight_bytes=job.weight_bytes,
        flops_per_token=job.flops_per_token((r.prompt_tokens + r.response_tokens / 2.0) * CAUSAL_SPAN),
        kv_bytes_per_token=kv_bytes_per_token(shape.layers, shape.kv_width),
        layers=shape.layers,
        hidden=shape.hidden,
        tp=r.rollout_tp,
        peak_flops_per_s=hw.peak_bf16_flops_per_s,
        efficiency=hw.compute_efficiency,
        hbm_bytes_per_s=hw.hbm_bytes_per_s,
        link_bytes_per_s=_node_link(hw, r.rollout_tp, job.link_efficiency),
    )
    kv = kv_capacity_tokens(
        hw.memory_bytes, r.memory_utilization, job.weight_bytes, r.rollout_tp, engine.kv_bytes_per_token
    )
    return generate_s(
        engine,
        r.sequences / engines,
        r.samples_per_prompt,
        r.prompt_tokens,
        r.response_tokens,
        kv,
        r.max_num_seqs,
        r.max_response_tokens,
    )


def fitting_rollout_tp(job: GrpoJob, hw: RoleHardware) -> int | None:
    """The smallest engine tensor parallel (a power of two within a node) whose share of the policy's weights
    leaves KV cache for one whole sequence (the prompt and the longest response) in ``memory_utilization`` of
    each GPU: vLLM refuses to start an engine whose KV cache cannot hold one request of its max_model_len
    (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory). None where no engine within one node does."""
    r = job.recipe
    sequence_tokens = r.prompt_tokens + max(r.response_tokens, r.max_response_tokens)
    kv_bytes = kv_bytes_per_token(job.policy.layers, job.policy.kv_width)
    tp = 1
    while tp <= hw.gpus_per_node:
        if splits_heads(job.policy, tp) and (
            kv_capacity_tokens(hw.memory_bytes, r.memory_utilization, job.weight_bytes, tp, kv_bytes) >= sequence_tokens
        ):
            return tp
        tp *= 2
    return None


def splits_heads(policy: ModelShape, tp: int) -> bool:
    """Whether an engine of ``tp`` GPUs splits the policy's attention heads evenly, as vLLM requires ("Total number
    of attention heads must be divisible by tensor parallel size": vllm/config ModelConfig.verify_with_parallel_config)."""
    return policy.heads <= 0 or policy.heads % tp == 0


def on_hardware(job: GrpoJob, hw: RoleHardware) -> GrpoJob:
    """The job on ``hw``: an engine size the job left open set to the smallest that holds the policy there."""
    if not job.recipe.rollout_tp_auto:
        return job
    tp = fitting_rollout_tp(job, hw)
    if tp is None or tp == job.recipe.rollout_tp:
        return job
    return replace(job, recipe=replace(job.recipe, rollout_tp=tp))


def engine_fit_reason(job: GrpoJob, hw: RoleHardware) -> str | None:
    """Why the job's rollout engines cannot generate on ``hw`` (their weights leave no KV cache for a sequence),
    naming the engine size that would; None where they can."""
    r = job.recipe
    fits = fitting_rollout_tp(job, hw)
    if fits is not None and fits <= r.rollout_tp:
        return None
    share = f"{r.memory_utilization:.0%} of a {hw.sku}'s memory"
    over = "" if r.rollout_tp_auto else f" over {r.rollout_tp} GPU{'s' * (r.rollout_tp > 1)}"
    weights = f"the policy's weights ({job.weight_bytes / 1e9:,.1f} GB{over})"
    if fits is None:
        return (
            f"{weights} leave no KV cache for one sequence in {share}, even over the {hw.gpus_per_node} GPUs of a "
            "node; raise job.roles.rollout.memory_utilization or plan on GPUs with more memory"
        )
    return (
        f"{weights} leave no KV cache for one sequence in {share}; an engine of {fits} GPUs does: set "
        f"job.roles.rollout.tp: {fits} (or raise job.roles.rollout.memory_utilization)"
    )


def _train_layout(recipe: GrpoRecipe, gpus: int) -> Layout:
    """The trainer's layout on ``gpus``: FSDP over all of them (gpuplan's plan), or the run's Megatron-Core
    degrees with the distributed optimizer over the data-parallel ranks; micro-batches of whole sequences, as
    many as ``pack_tokens`` holds where sequences are packed."""
    r = recipe
    model_gpus = r.train_tp * r.train_pp
    if gpus % model_gpus:
        raise JobError(f"{gpus} training GPUs are not whole groups of TP {r.train_tp} x PP {r.train_pp}")
    dp = gpus // model_gpus
    micro = max(1, int(r.pack_tokens // r.seq_tokens)) if r.pack_tokens else r.micro_batch
    accum = max(1, round(r.sequences / (dp * micro)))
    recompute = Recompute.FULL if r.recompute else Recompute.NONE
    if not r.megatron:
        return Layout(dp=gpus, zero=3, shard=gpus, micro_batch=micro, grad_accum=accum, recompute=recompute)
    return Layout(
        tp=r.train_tp,
        pp=r.train_pp,
        dp=dp,
        zero=1,
        shard=dp,
        micro_batch=micro,
        grad_accum=accum,
        recompute=recompute,
        ep=r.train_ep,
    )


def _train_settings(job: GrpoJob) -> RunSettings:
    r = job.recipe
    return RunSettings(
        seq_len=r.seq_tokens,
        overlap=job.overlap,
        link_efficiency=job.link_efficiency,
        fused_kernels=r.megatron,
        fused_framework=r.megatron,
        sequence_parallel=r.train_tp > 1,
    )


def trainer_bytes(job: GrpoJob, hw: RoleHardware, gpus: int) -> float:
    """The trainer's memory a GPU while it trains on ``gpus`` GPUs (its layout, ``_train_layout``): weights,
    gradients, optimizer state, activations and the framework's reserve, as ``check`` counts a single model's
    (physics/memory.py). Colocated, the engine has slept by then (its weights and KV cache off the GPU: the
    switch in ``grpo_step``), so the trainer has the whole GPU."""
    layout = _train_layout(job.recipe, gpus)
    return float(memory_breakdown(job.policy, job.train, layout, _train_settings(job), hw.memory_bytes).total)


def trainer_memory_reason(job: GrpoJob, hw: RoleHardware, gpus: int) -> str | None:
    """Why the policy cannot train on ``gpus`` GPUs of ``hw`` (its state and activations exceed a GPU), or None."""
    need = trainer_bytes(job, hw, gpus)
    if need <= hw.memory_bytes:
        return None
    r = job.recipe
    how = f"TP {r.train_tp} x PP {r.train_pp}, distributed optimizer" if r.megatron else "FSDP over them"
    recompute = ", every layer recomputed" if r.recompute else ""
    return (
        f"training the policy does not fit {gpus} x {hw.sku}: {need / 1e9:,.1f} GB a GPU ({how}{recompute}) "
        f"against {hw.memory_bytes / 1e9:,.1f} GB; give it more GPUs"
    )


def train_s(job: GrpoJob, hw: RoleHardware, gpus: int) -> tuple[float, float]:
    """(forward passes, training) seconds a step on ``gpus`` GPUs: the trainer's layout (``_train_layout``),
    every sequence trained once (one PPO epoch)."""
    r = job.recipe
    nodes = max(1, -(-gpus // hw.gpus_per_node))
    cluster = Cluster(
        peak_flops=hw.peak_bf16_flops_per_s,
        hbm_bytes_per_s=hw.hbm_bytes_per_s,
        intra_bytes_per_s=hw.intra_node_bytes_per_s,
        network_bytes_per_s=hw.network_bytes_per_s if nodes > 1 else hw.intra_node_bytes_per_s,
        gpus_per_node=min(gpus, hw.gpus_per_node),
        compute_efficiency=hw.compute_efficiency,
        nodes=float(nodes),
    )
    layout = _train_layout(r, gpus)
    step = step_time(job.policy, job.train, cluster, layout, _train_settings(job))
    train = r.tokens_per_step / float(step.tokens_per_s)
    # The log-probability passes run on the trainer's layout, its weights gathered and its micro-batches as
    # small: at the training step's achieved hardware FLOP rate (module docstring).
    _, hw_flops_per_token = flops_per_token(
        job.policy, job.train, r.seq_tokens, layout.recompute, layout.recomputed_share(job.policy.layers)
    )
    achieved_flops_per_s = float(hw_flops_per_token) * float(step.tokens_per_s)
    flops = r.forward_passes * job.flops_per_token(r.seq_tokens * CAUSAL_SPAN)
    forward = r.tokens_per_step * flops / achieved_flops_per_s
    return forward, train


def grpo_step(job: GrpoJob, hw: RoleHardware, rollout_gpus: int, train_gpus: int) -> RlStep:
    """One step on ``rollout_gpus`` + ``train_gpus`` (disaggregated) or on ``rollout_gpus`` GPUs doing every
    stage (colocated: ``train_gpus`` the same GPUs)."""
    r = job.recipe
    gen = generation(job, hw, rollout_gpus)
    forward, train = train_s(job, hw, train_gpus)
    switch = 0.0
    if r.placement == "colocated":
        sync = all_gather_s(job.weight_bytes, rollout_gpus, _node_link(hw, rollout_gpus, job.link_efficiency))
        optimizer_bytes = job.train.optimizer_bytes * job.train.trainable_params / train_gpus  # sharded over all
        moved = job.weight_bytes / r.rollout_tp + optimizer_bytes
        switch = host_round_trip_s(moved, host_link_bytes_per_s(job.link_efficiency))
    else:
        sync = broadcast_s(
            job.weight_bytes / r.rollout_tp, _node_link(hw, rollout_gpus + train_gpus, job.link_efficiency)
        )
    return RlStep(r.tokens_per_step, gen.seconds, forward, train, sync, r.placement, r.asynchronous, switch)


def shards_evenly(sequences: int, policy_gpus: int, micro_batch: int) -> bool:
    """Whether a step's sequences split evenly over the policy's GPUs and their micro-batches, as NeMo RL's
    BatchedDataDict.shard_by_batch_size and verl's DataProto.chunk assert."""
    return sequences % (policy_gpus * micro_batch) == 0


def launch_reason(job: GrpoJob, hw: RoleHardware, rollout_gpus: int, train_gpus: int) -> str | None:
    """Why the RL frameworks gpuplan writes the launch of (NeMo RL, verl: present/exports/grpo.py) could not run
    this split as planned; None where they can. A step's sequences split evenly over the policy's GPUs and their
    micro-batches (NeMo RL's BatchedDataDict.shard_by_batch_size and verl's DataProto.chunk assert it); beyond one
    host each role of a disaggregated split takes whole hosts (NeMo RL's generation resources take
    cluster.gpus_per_node GPUs a node: nemo_rl/algorithms/grpo.py setup; verl's resource pools n_gpus_per_node on
    each of nnodes)."""
    r = job.recipe
    if not shards_evenly(r.sequences, train_gpus, r.micro_batch):
        return (
            f"a step's {r.sequences} sequences ({r.prompts_per_step} prompts x {r.samples_per_prompt}) do not split "
            f"evenly over {train_gpus} policy GPUs in micro-batches of {r.micro_batch}, as NeMo RL and verl shard "
            "them: take a policy GPU count that divides them, or change job.roles.rollout.prompts_per_step"
        )
    host = hw.host_gpus
    beyond_host = (rollout_gpus if r.placement == "colocated" else rollout_gpus + train_gpus) > host
    if r.placement != "colocated" and beyond_host and (rollout_gpus % host or train_gpus % host):
        return (
            f"beyond one host NeMo RL and verl give each role whole hosts of {host} {hw.sku}, and "
            f"{rollout_gpus} + {train_gpus} splits one: take multiples of {host} for each role"
        )
    return None


def rollout_splits(job: GrpoJob, gpus: int, hw: RoleHardware | None = None) -> list[tuple[int, int]]:
    """(rollout, train) GPUs of every split of ``gpus``: colocated, all of them doing both; disaggregated,
    whole engines generating and at least one GPU training; on ``hw``, only the splits the RL frameworks launch
    (``launch_reason``)."""
    r = job.recipe
    if r.placement == "colocated":
        pairs = [(gpus, gpus)]
    else:
        pairs = [(g, gpus - g) for g in range(r.rollout_tp, gpus, r.rollout_tp)]
    return pairs if hw is None else [(g, t) for g, t in pairs if launch_reason(job, hw, g, t) is None]
