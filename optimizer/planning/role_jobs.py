"""A job file's ``roles:`` (inputs/roles.py) as the role model's ``RoleJob`` (planning/roles.py), and the
catalog's offers as the hardware each split runs on (issue 52, docs/roles.md).

The distill workload: the teacher (``roles.teacher``, held as ``roles.target``) runs forward on the producers;
the student is the job's ``model``, trained on the consumers on every teacher token by gpuplan's own shapes and
training state (planning/model_state.py), as a single-role job would train it; what crosses is the teacher's
top-k logits or hidden states.

The drafter workload: the target (``roles.target``) runs forward on the producers; the drafter is the job's
``model``, trained on the consumers. Its shapes give what it trains: every layer's attention and gated MLP plus
the projection of the tapped layers' hidden states (DFlash's ``fc``), the target's embedding and LM head held
frozen (SpecForge ``OnlineDFlashModel``: ``target_lm_head``, ``target_embed_tokens``). It trains on
anchors x block tokens of each target sequence and projects every context token (its keys and values).
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import GpuplanError, JobError
from ..inputs.catalog import find_sku, sku_key
from ..inputs.schema import Catalog, Offer, Problem
from ..physics.shapes import ModelShape, TrainingState
from .grpo import DEFAULT_FORWARD_PASSES, GrpoJob, GrpoRecipe, splits_heads
from .model_state import model_shape, optimizer_bytes_per_param, training_state
from .roles import ForwardRole, RoleHardware, RoleJob, RoleSplit, TrainRole, calibrated_producer, plan_roles

# A causal query sees half its sequence on average: the attention span the forward FLOPs count.
CAUSAL_SPAN = 0.5
DRAFTER_SHAPES = ("layers", "hidden", "heads", "ffn_hidden", "vocab")


def offer_hardware(catalog: Catalog, offer: Offer) -> RoleHardware:
    """An offer's GPU as the roles see it: the SKU's figures, the offer's price and its node's GPU count."""
    hw = RoleHardware.from_sku(find_sku(catalog, offer.sku), offer.price_usd_per_gpu_hour)
    return replace(hw, gpus_per_node=offer.gpus_per_node)


def _drafter(problem: Problem) -> TrainRole:
    job, roles = problem.job, problem.job.roles
    assert roles is not None
    model = job.model
    missing = [name for name in DRAFTER_SHAPES if getattr(model, name) is None]
    if missing:
        raise JobError(
            f"a drafter job trains job.model, whose shapes it needs: give job.model.{', '.join(missing)} "
            "(the drafter's config.json: num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, "
            "vocab_size)",
            field="job.model",
        )
    h = float(model.hidden or 0)
    head_dim = float(model.head_dim or h / float(model.heads or 1))
    q = float(model.heads or 0) * head_dim
    kv = float(model.kv_heads or model.heads or 0) * head_dim
    ffn = float(model.ffn_hidden or 0)
    layers = float(model.layers or 0)
    tapped = roles.bytes_per_token / 2.0 / roles.target.hidden  # hidden states of this many layers
    layer = h * q + 2 * h * kv + q * h + (3 if model.gated_mlp else 2) * h * ffn
    fc = tapped * roles.target.hidden * h  # the projection of the tapped layers' hidden states
    trained = layers * layer + fc
    head = float(model.vocab or 0) * h
    shape = ModelShape(
        params=trained + 2 * head,
        active_params=head,  # the frozen LM head: forward and data gradient (gpuplan's frozen-base count)
        layers=layers,
        hidden=h,
        heads=float(model.heads or 0),
        kv_width=kv,
        q_width=q,
        ffn_active=ffn,
        vocab=float(model.vocab or 0),
        gated_mlp=model.gated_mlp,
        has_shapes=True,
    )
    train = TrainingState(
        trainable_params=trained,
        weight_bytes=2.0,  # bf16 weights and gradients; the job's optimizer's state (docs/design.md section 4)
        adapter_weight_bytes=2.0,
        grad_bytes=2.0,
        optimizer_bytes=optimizer_bytes_per_param(job),
        lora=True,  # a frozen part (the LM head) beside the trained one: gpuplan's frozen-base accounting
    )
    seq = float(job.seq_len)
    drafter = roles.drafter
    return TrainRole(
        name=drafter.name,
        shape=shape,
        train=train,
        seq_len=seq * CAUSAL_SPAN,
        micro_batch=drafter.micro_batch,
        grad_accum=drafter.grad_accum,
        trained_tokens_per_target_token=drafter.anchors * drafter.block / seq,
        context_flops_per_target_token=6.0 * (fc + layers * 2 * h * kv),
    )


def _student(problem: Problem) -> TrainRole:
    """A distill job's student: the job's model trained as a single-role job trains it, on every teacher token
    (no anchors, no context term)."""
    job, roles = problem.job, problem.job.roles
    assert roles is not None
    shape = model_shape(job.model)
    return TrainRole(
        name=job.model.name or roles.drafter.name,
        shape=shape,
        train=training_state(job, shape),
        seq_len=float(job.seq_len),  # step_time takes the causal span itself
        micro_batch=roles.drafter.micro_batch,
        grad_accum=roles.drafter.grad_accum,
        trained_tokens_per_target_token=1.0,
    )


def _grpo(problem: Problem) -> RoleJob:
    """A grpo job: the policy (job.model) generates on the producers' slot and trains on the consumers'
    (planning/grpo.py), its bf16 weights what the engines hold and what syncs back each step."""
    job, roles = problem.job, problem.job.roles
    assert roles is not None and roles.rollout is not None
    r = roles.rollout
    shape = model_shape(job.model)
    if not shape.has_shapes:
        raise JobError(
            "a grpo job decodes job.model, whose shapes it needs for the KV cache: give job.model.layers, hidden, "
            "heads, kv_heads, ffn_hidden and vocab (its config.json)",
            field="job.model",
        )
    if r.tp is not None and not splits_heads(shape, r.tp):
        raise JobError(
            f"an engine of {r.tp} GPUs does not split the policy's {shape.heads:.0f} attention heads evenly, which "
            "vLLM requires: give a tensor parallel size that divides them, or leave it unset for gpuplan to choose",
            field="job.roles.rollout.tp",
        )
    recipe = GrpoRecipe(
        prompts_per_step=r.prompts_per_step,
        samples_per_prompt=r.samples_per_prompt,
        prompt_tokens=float(r.prompt_tokens),
        response_tokens=float(r.response_tokens),
        max_response_tokens=float(r.max_response_tokens or 0.0),
        rollout_tp=r.tp or 1,
        rollout_tp_auto=r.tp is None,
        memory_utilization=r.memory_utilization,
        max_num_seqs=r.max_num_seqs,
        forward_passes=roles.forward_passes if roles.forward_passes is not None else DEFAULT_FORWARD_PASSES,
        micro_batch=roles.micro_batch,
        placement=roles.placement,
        asynchronous=roles.asynchronous,
    )
    tokens = float(r.steps) * recipe.tokens_per_step if r.steps else float(problem.job.total_tokens)
    weights = 2.0 * shape.params  # bf16, as the engines hold them
    rl = GrpoJob(shape, training_state(job, shape), recipe, tokens, weights, problem.assumptions.link_efficiency,
                 problem.assumptions.overlap)  # fmt: skip
    width = shape.attention_width or shape.q_width
    producer = ForwardRole("rollout", shape.active_params, weights, shape.layers, width, recipe.seq_tokens / 2, 0.0,
                           None, mfu_is_training_efficiency=True)  # fmt: skip
    consumer = TrainRole(job.model.name or "policy", shape, rl.train, recipe.seq_tokens, roles.micro_batch, 1, 1.0)
    return RoleJob(producer, consumer, tokens, recipe.tokens_per_step, weights / recipe.tokens_per_step, rl=rl,
                   link_efficiency=rl.link_efficiency, overlap=rl.overlap,
                   across_offers=roles.across_offers)  # fmt: skip


def role_job(problem: Problem, catalog: Catalog) -> RoleJob:
    """The job's roles as the role model takes them; bad input names its field."""
    roles = problem.job.roles
    if roles is None:
        raise JobError("this job has no roles: section; plan it with gpuplan solve or check --sku", field="job.roles")
    if roles.workload == "grpo":
        if problem.job.measured:
            raise JobError("a grpo job is not calibrated yet: plan it without job.measured", field="job.measured")
        return _grpo(problem)
    target = roles.target
    top_k = roles.passes.top_k_logits if roles.passes is not None else None
    vocab = problem.job.model.vocab
    if top_k is not None and vocab and top_k.k > vocab:
        raise JobError(
            f"the teacher's top {top_k.k:,} logits a token are more than the {vocab:,} entries of the vocabulary "
            "(job.model.vocab): give k at most the vocabulary (Gemma 3's recipe: 256)",
            field="job.roles.passes.top_k_logits.k",
        )
    mfu = target.mfu
    measured_on: RoleHardware | None = None
    if mfu is not None and mfu.sku is not None:
        try:
            measured_on = RoleHardware.from_sku(find_sku(catalog, mfu.sku), 0.0)
        except GpuplanError as exc:
            raise JobError(exc.reason, field="job.roles.target.mfu.sku") from None
    seq = float(problem.job.seq_len)
    producer = ForwardRole(
        name=target.name,
        active_params=float(target.params),
        weight_bytes=target.weight_bytes,
        attention_layers=float(target.attention_layers),
        attention_width=float(target.attention_width),
        seq_len=seq * CAUSAL_SPAN,
        mfu=mfu.value if mfu is not None else 0.0,
        mfu_hardware=measured_on,
        mfu_peak=mfu.peak if mfu is not None else "bf16",
        mfu_counts_attention=mfu.counts_attention if mfu is not None else True,
        mfu_is_training_efficiency=mfu is None,
    )
    job = RoleJob(
        producer=producer,
        consumer=_student(problem) if roles.workload == "distill" else _drafter(problem),
        tokens=problem.job.total_tokens,
        batch_tokens=float(roles.batch_tokens or seq),
        bytes_per_token=roles.bytes_per_token,
        link=roles.link,
        link_efficiency=problem.assumptions.link_efficiency,
        overlap=problem.assumptions.overlap,
        across_offers=roles.across_offers,
    )
    return _calibrated(problem, catalog, job)


def _calibrated(problem: Problem, catalog: Catalog, job: RoleJob) -> RoleJob:
    """The producer's MFU set by the job's measurement (one: it calibrates the producers), on the best split
    of its GPUs, where those producers bind it (planning/roles.py ``calibrated_producer``)."""
    measured = problem.job.measured
    if not measured:
        return job
    if len(measured) > 1:
        raise JobError("a role job takes one measurement: it sets the producers' MFU", field="job.measured")
    m = measured[0]
    offers = [o for o in catalog.offers if sku_key(o.sku) == sku_key(find_sku(catalog, m.sku).name)]
    offers = [o for o in offers if o.gpus_per_node >= m.gpus] or offers
    if not offers:
        raise JobError(f"no offer of {m.sku} in the catalog to calibrate on", field="job.measured")
    hw = offer_hardware(catalog, offers[0])
    answer = plan_roles(job, hw, [m.gpus])
    if answer.best is None:
        raise JobError(answer.refused or f"no split of {m.gpus} x {m.sku} runs", field="job.measured")
    split: RoleSplit = answer.best.split
    return calibrated_producer(job, hw, split, float(m.tokens_per_s))
