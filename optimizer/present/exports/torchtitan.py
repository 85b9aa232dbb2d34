"""The torchtitan export: a job TOML (torchtitan <= 0.2.2) whose header gives the same values as 0.3.0 flags.

``torchtitan_sections``: the TOML sections (batch as torchtitan counts it, FSDP2 / HSDP / DDP degrees, TP,
PP with its schedule and layers per stage, CP, EP, activation checkpointing, Float8), keys checked against
``TORCHTITAN_TOML_SOURCE``; ``torchtitan_flags``: the same values as torchtitan 0.3.0 command-line flags
(``TORCHTITAN_FLAGS_SOURCE``; 0.3.0 reads no TOML). ``with_run`` adds the run (``run_sections``: the model's
torchtitan name and flavour, ``training.steps``, ``[checkpoint]``; tests/exports/test_exports_run.py). ``gaps``: what it cannot run (activation offload,
a hybrid shard CP does not divide, more than 2 virtual stages without the layer count). Read back by
``tomllib`` and torchtitan's own ``ConfigManager`` (0.2.2's TOML, 0.3.0's flags): tests/exports/test_exports.py
test_torchtitan_config_parses_with_torchtitan, test_torchtitan_takes_an_expert_parallel_plan_with_its_moe_
config, test_torchtitan_030_flags_carry_no_optimizer_step_in_backward, test_torchtitan_needs_the_layer_count_
for_more_than_two_virtual_stages and test_torchtitan_toml_says_0_2_2_refuses_ddp_beside_tp;
tests/physics/test_finetune_memory.py.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from ...planning.stage_splits import torchtitan_stage_split
from ...results import Plan
from .common import DEFAULT_SEQ_LEN, Command, ExportJob, Launcher, comment, describe, ep, header, hybrid
from .gaps import memory_option_gaps
from .run import (
    CHECKPOINT_DIR,
    CHECKPOINTS_KEPT,
    PRETRAINED,
    checkpoint_interval_steps,
    interval_note,
    steps_note,
    torchtitan_model,
    train_steps,
)
from .torchrun import torchrun_line

TORCHTITAN_TOML_SOURCE = "pytorch/torchtitan torchtitan/config/job_config.py at v0.2.2 (the last release with TOML)"
TORCHTITAN_FLAGS_SOURCE = (
    "pytorch/torchtitan 0.3.0 torchtitan/config/configs.py (TrainingConfig, ParallelismConfig) and "
    "torchtitan/distributed/activation_checkpoint.py; TOML job files were removed in pytorch/torchtitan#2386, "
    "and main (b5bcd76) renames the batch keys to token counts"
)


def gaps(plan: Plan, job: ExportJob) -> list[str]:
    """What torchtitan's job config cannot express for this plan (``Launcher.gaps``)."""
    s = plan.strategy
    out = memory_option_gaps(plan, "torchtitan", in_backward=True, offload=False)
    if hybrid(s) and s.shard_degree % s.cp:
        out.append(f"torchtitan shards over data_parallel_shard_degree x CP, which {s.shard_degree} GPUs is not")
    if s.virtual_stages > 2 and job.num_layers is None:
        out.append(
            f"torchtitan's Interleaved1F1B defaults to 2 stages per rank; {s.virtual_stages} need "
            "pipeline_parallel_layers_per_stage, which needs the model's layer count: "
            "pass num_layers (export(plan, 'torchtitan', num_layers=...))"
        )
    return out


def layers_per_stage(num_layers: int, stages: int) -> dict[str, int]:
    """torchtitan's keys for exactly ``stages`` pipeline stages (planning/stage_splits.py torchtitan_stage_split, the
    rule the planner keeps)."""
    ok, per, weight = torchtitan_stage_split(num_layers, stages)
    if not ok:
        raise ValueError(f"torchtitan cannot split {num_layers} layers into {stages} stages")
    return {
        "pipeline_parallel_layers_per_stage": int(per),
        "pipeline_parallel_first_stage_less_layers": int(weight),
        "pipeline_parallel_last_stage_less_layers": int(weight),
    }


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
    elif hybrid(s):
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
            parallelism.update(layers_per_stage(num_layers, s.pp * s.virtual_stages))
    parallelism["context_parallel_degree"] = s.cp
    if ep(s) > 1:
        parallelism["expert_parallel_degree"] = ep(s)
    sections: dict[str, dict[str, Any]] = {
        "job": {"description": f"{name}: {describe(plan)}", "dump_folder": "./outputs"},
        "training": training,
        "parallelism": parallelism,
        "activation_checkpoint": {"mode": "selective" if s.recompute == "op" else s.recompute},
    }
    if s.recompute in ("selective", "op"):
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


# torchtitan's model keys where it has no flavour of the job's model: names no train spec has, so that
# torchtitan stops at them (get_train_spec: "TrainSpec ... is not registered") instead of training its
# default llama3 "debugmodel"
UNKNOWN_MODEL = {"name": "<TORCHTITAN_MODEL>", "flavor": "<TORCHTITAN_FLAVOR>"}


def run_sections(plan: Plan, job: ExportJob) -> dict[str, dict[str, Any]]:
    """The run's keys (issue 51): ``[model]`` (torchtitan's name and flavour for the job's model, its
    Hugging Face assets), ``training.steps`` and ``[checkpoint]`` (enabled, the folder under dump_folder, the
    interval; a fine-tune's pretrained weights as ``initial_load_path``, a placeholder). Keys: v0.2.2
    (73a0e69) torchtitan/config/job_config.py Model (name, flavor, hf_assets_path), Training.steps and
    Checkpoint (enable, folder, interval, initial_load_path, initial_load_model_only, initial_load_in_hf);
    main (b5bcd76) keeps the checkpoint names (torchtitan/components/checkpointer/base.py)."""
    known = torchtitan_model(job.model)
    model: dict[str, Any] = dict(UNKNOWN_MODEL)
    if known is not None:
        model = {
            "name": known.name,
            "flavor": known.flavor,
            "hf_assets_path": f"./assets/hf/{known.hub.rsplit('/', 1)[-1]}",
        }
    checkpoint: dict[str, Any] = {
        "enable": True,
        "folder": CHECKPOINT_DIR,
        "interval": checkpoint_interval_steps(plan, job),
        "keep_latest_k": CHECKPOINTS_KEPT,  # the disk the skypilot export asks for holds this many
    }
    if job.finetune:
        # the pretrained weights in Hugging Face's safetensors (model only: the optimizer starts afresh);
        # ignored once the run's own folder holds a checkpoint, so a restart resumes the run
        checkpoint.update(initial_load_path=PRETRAINED, initial_load_model_only=True, initial_load_in_hf=True)
    out: dict[str, dict[str, Any]] = {"model": model, "checkpoint": checkpoint}
    if (steps := train_steps(plan, job)) is not None:
        out["training"] = {"steps": steps}
    return out


def with_run(sections: dict[str, dict[str, Any]], plan: Plan, job: ExportJob) -> dict[str, dict[str, Any]]:
    """``sections`` with the run's keys added (``[model]`` first: a converter the layout set stays)."""
    run = run_sections(plan, job)
    merged = {"job": sections["job"], "model": {**run["model"], **sections.get("model", {})}}
    for name, keys in sections.items():
        merged.setdefault(name, dict(keys))
    merged["training"] = {**merged["training"], **run.get("training", {})}
    merged["checkpoint"] = run["checkpoint"]
    return merged


def _run_lines(plan: Plan, job: ExportJob, sections: dict[str, dict[str, Any]]) -> list[str]:
    """The header lines that say what the run's keys hold and which placeholders to fill in."""
    model = sections["model"]
    lines = [steps_note(plan, job), interval_note(plan, job)]
    if model["name"] == UNKNOWN_MODEL["name"]:
        name = job.model.name if job.model is not None and job.model.name else "this model"
        lines.append(
            f"torchtitan has no flavour of {name} that gpuplan knows: set [model] name and flavor to the train spec "
            "and flavour you register (torchtitan's own default, llama3 'debugmodel', is not your model)"
        )
    else:
        known = torchtitan_model(job.model)
        hub = known.hub if known else ""
        lines.append(
            f"[model] {model['name']} {model['flavor']}: fetch its tokenizer with torchtitan's "
            f"scripts/download_hf_assets.py --repo_id {hub} --assets tokenizer"
        )
    if job.finetune:
        lines.append(
            f"fine-tune: set checkpoint.initial_load_path ({PRETRAINED}) to the pretrained weights' safetensors "
            "folder (download_hf_assets.py --assets safetensors); a restart resumes from checkpoint.folder instead"
        )
    lines.append("set the data: training.dataset (and training.dataset_path) name your data, not torchtitan's c4_test")
    return lines


def torchtitan_flags(sections: dict[str, dict[str, Any]]) -> list[str]:
    """The same values as torchtitan 0.3.0 command-line flags (``TORCHTITAN_FLAGS_SOURCE``), less those it
    has none for (``TORCHTITAN_030_MISSING``)."""
    flags = []
    for section in ("training", "parallelism", "optimizer", "checkpoint", "compile"):
        for key, value in sections.get(section, {}).items():
            if (section, key) in TORCHTITAN_030_MISSING:
                continue
            flag = f"--{section}.{key.replace('_', '-')}"
            if isinstance(value, bool):
                flags.append(flag if value else f"--{section}.no-{key.replace('_', '-')}")
            else:
                flags.append(f"{flag} {shlex.quote(str(value))}")
    parallelism = sections["parallelism"]
    if parallelism["pipeline_parallel_degree"] > 1 or parallelism.get("expert_parallel_degree", 1) > 1:
        # 0.3.0's trainer (Trainer.Config._validate_cuda_graphs) refuses CUDA graphs with PP, and with EP under
        # a token dispatcher that synchronises with the CPU (the default all-to-all); no 0.2.2 key
        flags.append("--training.disable-cuda-graphs")
    flags.append(f"activation-checkpoint:{sections['activation_checkpoint']['mode']}")  # a tyro subcommand: last
    return flags


def write(plan: Plan, job: ExportJob) -> str:
    """A torchtitan job TOML (torchtitan <= 0.2.2, ``--job.config_file``) whose header gives the same
    values as torchtitan 0.3.0 flags (0.3.0 reads configs from Python functions, no TOML)."""
    precision = job.precision
    sections = torchtitan_sections(plan, job.name, job.seq_len, precision, job.num_layers)
    if job.compile:  # the compiled run the plan's speed assumed (v0.2.2 job_config.py Compile.enable)
        sections["compile"] = {"enable": True}
    sections = with_run(sections, plan, job)
    launch = torchrun_line(plan, "-m torchtitan.train")
    known = torchtitan_model(job.model)
    module = (
        f"--module {known.name} --config {known.name}_{known.flavor.lower().replace('.', '_').replace('-', '_')}"
        if known
        else "--module <model> --config <config function>"
    )
    lines = [
        "torchtitan <= 0.2.2 reads this file:",
        f"  {launch} --job.config_file this.toml",
        f"  keys: {TORCHTITAN_TOML_SOURCE}",
        "torchtitan 0.3.0 reads no TOML (a Python config function instead); the same values as its flags:",
        f"  {launch} {module} " + " ".join(torchtitan_flags(sections)),
        f"  flags: {TORCHTITAN_FLAGS_SOURCE}",
        *_run_lines(plan, job, sections),
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
    return comment(header(plan, precision, lines, notes)) + _toml(sections)


# The file name a launcher (Slurm) writes this export's TOML under, beside its own script
TOML_NAME = "torchtitan.toml"


def command(plan: Plan, job: ExportJob) -> Command:
    """torchtitan 0.2.2's trainer reading this export's TOML (written beside the launcher's script)."""
    return Command(["-m torchtitan.train", f"--job.config_file {TOML_NAME}"], files={TOML_NAME: write(plan, job)})


LAUNCHER = Launcher("torchtitan", write, gaps=gaps, suffix="toml", summary="a job TOML and its flags", command=command)
