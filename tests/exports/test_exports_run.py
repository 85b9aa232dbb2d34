"""Exports that start the run (issue 51): each carries the plan's steps, checkpoints and model, read back by the
tool's own parser where it is installed and otherwise by the field and flag names its source defines (cited at
the commit read). The 70B job of the README (a full fine-tune of Llama 3.1 70B on 20B tokens) and variants."""

from __future__ import annotations

import argparse
import math
import shlex
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml
from paths import ROOT

from optimizer import CheckRequest, GpuplanError, check, load_job
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.present.exports import export
from optimizer.present.exports.megatron_run import model_args, moe_args
from optimizer.present.exports.run import PRETRAINED, TORCHTITAN_MODELS
from optimizer.results import Plan

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

LLAMA_70B = ROOT / "problems" / "llama-70b-within-5-days.yaml"

# torchtitan v0.2.2 (73a0e6979dd1) torchtitan/config/job_config.py: the fields of the sections the run adds
TORCHTITAN_022_FIELDS = {
    "model": {"name", "flavor", "hf_assets_path", "tokenizer_path", "converters", "print_after_conversion"},
    "training": {
        "dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len", "max_norm", "steps",
        "enable_cpu_offload", "dtype", "mixed_precision_param", "mixed_precision_reduce", "gc_freq", "gc_debug",
    },
    "checkpoint": {
        "enable", "enable_ft_dataloader_checkpoints", "folder", "interval", "initial_load_path",
        "initial_load_model_only", "initial_load_in_hf", "initial_load_in_hf_quantized", "last_save_model_only",
        "last_save_in_hf", "export_dtype", "async_mode", "keep_latest_k", "load_step", "exclude_from_loading",
        "enable_first_step_checkpoint", "create_seed_checkpoint", "load_only",
    },
}  # fmt: skip


def job_problem(model: str, **job) -> Problem:
    data = {"job": {"name": f"{model}-run", "model": model, "method": "full", "tokens": "20B", "seq_len": 4096, **job}}
    return Problem.model_validate(expand_models(data))


@cache
def llama70b(framework: str = "torchtitan", **layout) -> tuple[Problem, Plan]:
    problem = load_job(LLAMA_70B)
    problem = problem.model_copy(update={"job": problem.job.model_copy(update={"framework": framework})})
    request = CheckRequest("B200", 32, nodes=4, compare=False, **(layout or {"tp": 1, "pp": 1, "zero": 3}))
    return problem, check(problem, request).plan


def steps_of(problem: Problem, p: Plan) -> int:
    return math.ceil(problem.job.total_tokens / (p.strategy.global_batch * problem.job.seq_len))


# --------------------------------------------------------------------------- torchtitan


def test_torchtitan_starts_the_planned_70b_fine_tune():
    """The TOML names llama3 70B (not torchtitan's default debugmodel), runs the plan's steps, checkpoints into a
    folder at the reliability model's interval, and starts from the pretrained weights (a named placeholder)."""
    problem, p = llama70b()
    config = tomllib.loads(export(p, "torchtitan", job=problem.job))
    assert (config["model"]["name"], config["model"]["flavor"]) == ("llama3", "70B")
    assert config["training"]["steps"] == steps_of(problem, p) == math.ceil(20e9 / (256 * 4096))
    checkpoint = config["checkpoint"]
    assert checkpoint["enable"] is True and checkpoint["folder"]
    assert 1 <= checkpoint["interval"] < config["training"]["steps"]
    assert checkpoint["initial_load_path"] == PRETRAINED and checkpoint["initial_load_model_only"] is True
    for section, fields in TORCHTITAN_022_FIELDS.items():
        assert set(config[section]) <= fields, section


def test_torchtitan_interval_is_youngs_for_the_plan():
    """The interval in steps is Young's sqrt(2 delta M) over the plan's step time: delta = 70.55B x 14 bytes
    over 4 hosts at 2 GB/s, M = 1 / (32 GPUs x 1.97e-5 failures per GPU-hour)."""
    problem, p = llama70b()
    interval = tomllib.loads(export(p, "torchtitan", job=problem.job))["checkpoint"]["interval"]
    delta_h = 70.55e9 * 14 / (4 * 2e9) / 3600
    rate = 32 * 1.97e-5
    expected = math.sqrt(2 * delta_h / rate) * 3600 / p.step_s
    assert interval == pytest.approx(expected, rel=0.02)


def test_torchtitan_pretraining_loads_nothing_and_an_unknown_model_is_named_not_defaulted():
    """A pre-training (tokens past compute-optimal) has no initial_load_path; a model torchtitan has no flavour of
    gets placeholders torchtitan refuses, never its silent default llama3 'debugmodel', and a line saying so."""
    problem = job_problem("llama-3.1-8b", tokens="400B", global_batch=512, framework="torchtitan")
    p = check(problem, CheckRequest("B200", 8, zero=3, compare=False)).plan
    config = tomllib.loads(export(p, "torchtitan", job=problem.job))
    assert (config["model"]["name"], config["model"]["flavor"]) == ("llama3", "8B")
    assert "initial_load_path" not in config["checkpoint"]
    assert config["training"]["steps"] == steps_of(problem, p)

    problem = job_problem("mistral-7b", framework="torchtitan")
    p = check(problem, CheckRequest("B200", 8, zero=3, compare=False)).plan
    text = export(p, "torchtitan", job=problem.job)
    model = tomllib.loads(text)["model"]
    assert model["flavor"] != "debugmodel" and model["name"] not in {known.name for known in TORCHTITAN_MODELS.values()}
    assert "set [model] name and flavor" in text


def test_torchtitan_030_line_names_the_model_config_and_the_run():
    """torchtitan 0.3.0's line picks the model's config function and carries the steps and checkpoint flags;
    with torchtitan installed, its ConfigManager parses them."""
    problem, p = llama70b()
    text = export(p, "torchtitan", job=problem.job)
    (line,) = [line for line in text.splitlines() if "--config llama3_70b" in line]
    flags = shlex.split(line.split("--config llama3_70b", 1)[1])
    assert f"--training.steps={steps_of(problem, p)}" in " ".join(flags).replace("steps ", "steps=")
    assert "--checkpoint.enable" in flags and "--checkpoint.initial-load-path" in flags
    config_manager = pytest.importorskip("torchtitan.config").ConfigManager
    config = config_manager().parse_args(["--module", "llama3", "--config", "llama3_70b", *flags])
    assert config.training.steps == steps_of(problem, p) and config.checkpoint.enable


# --------------------------------------------------------------------------- Megatron-LM

# Megatron-LM's flags the export writes, as its parser takes them: NVIDIA/Megatron-LM d98e8a64ddf3
# megatron/training/arguments.py (explicit add_argument) and the flags it generates from megatron-core's and
# megatron/training/config's dataclasses (argument_utils.ArgumentGroupFactory: '--' + field name with dashes, a
# bool field a store_true flag; add_bias_linear's arg_names --disable-bias-linear). None: a switch.
MEGATRON_FLAGS: dict[str, type | None] = {
    # parallelism, batch, optimizer, precision (megatron_args)
    "--tensor-model-parallel-size": int, "--pipeline-model-parallel-size": int,
    "--num-virtual-stages-per-pipeline-rank": int, "--pipeline-model-parallel-layout": str,
    "--decoder-first-pipeline-num-layers": int,
    "--decoder-last-pipeline-num-layers": int, "--context-parallel-size": int, "--expert-model-parallel-size": int,
    "--cp-comm-type": str,
    "--expert-tensor-parallel-size": int, "--sequence-parallel": None, "--optimizer": str,
    "--use-distributed-optimizer": None, "--optimizer-cpu-offload": None, "--optimizer-offload-fraction": float,
    "--use-precision-aware-optimizer": None, "--cpu-offloading-num-layers": int, "--micro-batch-size": int,
    "--global-batch-size": int, "--seq-length": int, "--recompute-granularity": str, "--recompute-method": str,
    "--recompute-num-layers": int, "--fp16": None, "--bf16": None, "--fp8-format": str, "--fp4-format": str,
    "--grad-reduce-in-bf16": None,
    # the model (megatron_run.model_args)
    "--num-layers": int, "--hidden-size": int, "--ffn-hidden-size": int, "--num-attention-heads": int,
    "--group-query-attention": None, "--num-query-groups": int, "--kv-channels": int,
    "--multi-latent-attention": None, "--q-lora-rank": int, "--kv-lora-rank": int, "--v-head-dim": int,
    "--max-position-embeddings": int, "--position-embedding-type": str, "--normalization": str,
    "--disable-bias-linear": None, "--swiglu": None, "--untie-embeddings-and-output-weights": None,
    "--qk-layernorm": None,
    # experts (megatron_run.moe_args)
    "--num-experts": int, "--moe-router-topk": int, "--moe-grouped-gemm": None, "--moe-token-dispatcher-type": str,
    "--moe-flex-dispatcher-backend": str, "--moe-ffn-hidden-size": int, "--moe-shared-expert-intermediate-size": int,
    "--moe-layer-freq": str, "--moe-router-dtype": str,
    # the run (megatron_run.run_args, data_args)
    "--train-iters": int, "--save": str, "--load": str, "--save-interval": int, "--pretrained-checkpoint": str,
    "--finetune": None, "--exit-signal-handler": None, "--tokenizer-type": str, "--tokenizer-model": str, "--data-path": str,
}  # fmt: skip
MEGATRON_CHOICES = {  # arguments.py and transformer_config.py Literals
    "--position-embedding-type": ["learned_absolute", "rope", "yarn", "mrope", "relative", "none"],
    "--normalization": ["LayerNorm", "RMSNorm"],
    "--moe-token-dispatcher-type": ["allgather", "alltoall", "flex"],
    "--moe-flex-dispatcher-backend": ["deepep", "hybridep", "ncclep"],
    "--moe-router-dtype": ["fp32", "fp64"],
    "--cp-comm-type": ["p2p", "a2a", "allgather", "a2a+p2p"],  # arguments.py's help: one type for every layer
}


def megatron_parse(text: str):
    """The export's pretrain_gpt.py arguments through an argparse parser of Megatron-LM's flags (an unknown flag
    or a bad value exits)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    for flag, kind in MEGATRON_FLAGS.items():
        if kind is None:
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=kind, choices=MEGATRON_CHOICES.get(flag))
    command = text.split("pretrain_gpt.py", 1)[1].replace("\\\n", " ")
    return parser.parse_args(shlex.split(command))


def test_megatron_starts_the_planned_70b_fine_tune():
    """Megatron-LM's parser finds the plan's layout and batch, its steps (--train-iters: update_train_iters
    fails on None), the model's shape, checkpoints that resume and the pretrained weights a fine-tune loads."""
    problem, p = llama70b("megatron", tp=8, pp=4)
    args = megatron_parse(export(p, "megatron", job=problem.job))
    s = p.strategy
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size) == (s.tp, s.pp)
    assert (args.global_batch_size, args.micro_batch_size) == (s.global_batch, s.micro_batch)
    assert args.train_iters == steps_of(problem, p)
    model = problem.job.model
    assert (args.num_layers, args.hidden_size, args.ffn_hidden_size) == (model.layers, model.hidden, model.ffn_hidden)
    assert (args.num_attention_heads, args.num_query_groups) == (model.heads, model.kv_heads)
    assert args.group_query_attention and args.swiglu and args.untie_embeddings_and_output_weights
    assert (args.normalization, args.position_embedding_type) == ("RMSNorm", "rope")
    assert args.max_position_embeddings == args.seq_length == problem.job.seq_len
    assert args.save == args.load and 1 <= args.save_interval < args.train_iters
    assert args.pretrained_checkpoint == PRETRAINED and not args.finetune  # --finetune would reset each resume


def test_the_exports_run_the_context_parallel_exchange_the_plan_timed():
    """Ulysses (job.context_parallel all_to_all) at CP 8 on 128k tokens: Megatron-LM's --cp-comm-type a2a (its ring,
    p2p, is the default and left unwritten); torchtitan, whose context parallelism is ring attention only, is
    refused naming the rule."""
    problem = job_problem("llama-3.1-8b", seq_len=131072, global_batch=8, framework="megatron")
    job = problem.job.model_copy(update={"context_parallel": "all_to_all"})
    problem = problem.model_copy(update={"job": job})
    p = check(problem, CheckRequest("B200", 8, tp=1, cp=8, zero=1, recompute="full", compare=False)).plan
    args = megatron_parse(export(p, "megatron", job=job))
    assert (args.context_parallel_size, args.cp_comm_type) == (8, "a2a")
    ring = check(
        job_problem("llama-3.1-8b", seq_len=131072, global_batch=8, framework="megatron"),
        CheckRequest("B200", 8, tp=1, cp=8, zero=1, recompute="full", compare=False),
    ).plan
    assert (
        megatron_parse(export(ring, "megatron", job=job.model_copy(update={"context_parallel": "ring"}))).cp_comm_type
        is None
    )
    with pytest.raises(GpuplanError, match="Ulysses"):
        export(p, "torchtitan", job=job)


def test_megatron_moe_export_carries_the_experts_and_the_dispatcher_the_plan_timed():
    """A Qwen3-30B-A3B plan at EP 8: the experts, top-k, grouped GEMM and the dispatcher gpuplan's time assumed
    (all-to-all by default; DeepEP as Megatron's flex dispatcher); DeepSeek-V3's dense first layers as a list."""
    problem = job_problem("qwen3-30b-a3b", global_batch=96, framework="megatron")
    p = check(problem, CheckRequest("B200", 8, ep=8, zero=1, compare=False)).plan
    args = megatron_parse(export(p, "megatron", job=problem.job))
    assert (args.num_experts, args.moe_router_topk, args.expert_model_parallel_size) == (128, 8, 8)
    assert args.moe_grouped_gemm and args.moe_token_dispatcher_type == "alltoall"
    model = problem.job.model
    assert args.moe_ffn_hidden_size == (model.moe_ffn_hidden or model.ffn_hidden) == 768 and args.qk_layernorm
    args = megatron_parse(export(p, "megatron", job=problem.job, moe_dispatcher="deepep"))
    assert (args.moe_token_dispatcher_type, args.moe_flex_dispatcher_backend) == ("flex", "deepep")
    # the default, auto, times EP 16 across two nodes with DeepEP (physics/moe.py) and exports it so
    two_nodes = check(problem, CheckRequest("B200", 16, ep=16, zero=1, compare=False)).plan
    args = megatron_parse(export(two_nodes, "megatron", job=problem.job))
    assert (args.moe_token_dispatcher_type, args.moe_flex_dispatcher_backend) == ("flex", "deepep")

    deepseek = job_problem("deepseek-v3").job.model
    args = megatron_parse("pretrain_gpt.py " + " ".join(model_args(deepseek, 4096) + moe_args(deepseek, "alltoall")))
    freq = eval(args.moe_layer_freq)  # Megatron-LM's moe_freq_type evaluates the list expression as this does
    assert len(freq) == deepseek.layers and freq[: deepseek.dense_layers] == [0] * deepseek.dense_layers
    assert args.multi_latent_attention and args.kv_lora_rank == deepseek.kv_lora_rank
    assert args.moe_router_dtype == ("fp32" if deepseek.router_fp32 else None)


def test_check_exports_the_dispatcher_the_job_assumed(tmp_path):
    """`check --export megatron` of a job whose assumptions name DeepEP writes Megatron's flex dispatcher with
    DeepEP: the dispatcher the plan's time assumed (the CLI and the service had passed the job alone, so the
    export fell back to the all-to-all gpuplan assumes by default)."""
    from typer.testing import CliRunner

    from optimizer.cli import app

    job = tmp_path / "moe.yaml"
    data = {"catalog": "default", "job": {"name": "moe", "model": "qwen3-30b-a3b", "method": "full"}}
    data["job"] |= {"tokens": "20B", "seq_len": 4096, "global_batch": 96, "framework": "megatron"}
    data["assumptions"] = {"moe_dispatcher": "deepep"}
    job.write_text(yaml.safe_dump(data))
    out = tmp_path / "run.sh"
    flags = ["--sku", "B200", "--gpus", "8", "--ep", "8", "--zero", "1", "--no-compare"]
    result = CliRunner().invoke(app, ["check", str(job), *flags, "--export", "megatron", "--out", str(out)])
    assert result.exit_code == 0, result.output
    args = megatron_parse(out.read_text())
    assert (args.moe_token_dispatcher_type, args.moe_flex_dispatcher_backend) == ("flex", "deepep")


# --------------------------------------------------------------------------- Slurm


def _bash_n(text: str, tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def _directives(text: str) -> dict[str, str]:
    lines = [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]
    return {option: value for option, _, value in (line.partition("=") for line in lines)}


def test_slurm_runs_the_megatron_exports_command(tmp_path):
    """The sbatch script runs pretrain_gpt.py with the very arguments the Megatron export writes (Megatron's
    parser reads the same run from both), writes its output to a file named for the job, and bash parses it."""
    problem, p = llama70b("megatron", tp=8, pp=4)
    text = export(p, "slurm", job=problem.job)
    _bash_n(text, tmp_path)
    assert megatron_parse(text) == megatron_parse(export(p, "megatron", job=problem.job))
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in text and "train.py" not in text
    directives = _directives(text)
    assert directives["--output"] == f"{problem.job.name}-%j.out"
    assert not {"--requeue", "--signal", "--open-mode"} & set(directives)  # on-demand capacity


def test_slurm_requeues_and_signals_a_spot_plan(tmp_path):
    """On spot capacity the job is requeued when preempted, appends to its output, and is signalled ahead of its
    time limit by at least twice a checkpoint's write; Megatron saves on that signal (--exit-signal-handler)."""
    problem, p = llama70b("megatron", tp=8, pp=4)
    spot = p.model_copy(update={"spot": True})
    text = export(spot, "slurm", job=problem.job)
    _bash_n(text, tmp_path)
    directives = _directives(text)
    assert directives["--requeue"] == "" and directives["--open-mode"] == "append"
    signal, lead = directives["--signal"].split("@")
    write_s = 70.55e9 * 14 / (2e9 * spot.hosts)
    assert signal == "TERM" and int(lead) >= max(300, 2 * write_s)
    assert megatron_parse(text).exit_signal_handler


def test_slurm_writes_the_torchtitan_toml_it_runs_and_a_hostile_name_stays_inside(tmp_path):
    """A torchtitan plan: the script writes the torchtitan export's TOML (a quoted here-document) and runs
    torchtitan.train on it; a job name that tries to end the here-document stays one TOML string."""
    problem, p = llama70b()
    text = export(p, "slurm", job=problem.job)
    _bash_n(text, tmp_path)
    body = text.split("<<'GPUPLAN_EOF'\n", 1)[1].split("\nGPUPLAN_EOF\n", 1)[0] + "\n"
    assert body == export(p, "torchtitan", job=problem.job)
    assert "-m torchtitan.train" in text and "--job.config_file torchtitan.toml" in text
    hostile = problem.job.model_copy(update={"name": "x\nGPUPLAN_EOF\nrm -rf ~\n"})
    text = export(p, "slurm", job=hostile)
    _bash_n(text, tmp_path)
    assert "rm -rf ~" not in text.splitlines() and text.count("\nGPUPLAN_EOF\n") == 1


def test_slurm_falls_back_to_train_py_where_the_framework_has_no_export():
    """A DeepSpeed or FSDP plan: train.py with the layout in the environment, and a line saying why."""
    problem, p = llama70b("deepspeed", tp=1, pp=1, zero=3)
    text = export(p, "slurm", job=problem.job)
    assert "train.py" in text and f"TP={p.strategy.tp}" in text and "no launch command" in text


# --------------------------------------------------------------------------- accelerate


def test_accelerate_on_one_gpu_is_not_distributed(tmp_path):
    """One GPU, nothing offloaded: distributed_type 'NO' (a string YAML keeps quoted, as accelerate config writes
    it), one process, no FSDP section; with accelerate installed, its own loader reads DistributedType.NO."""
    problem = job_problem("llama-3.1-8b", method="lora", tokens="1B", global_batch=16)
    p = check(problem, CheckRequest("H100", 1, compare=False)).plan
    assert p.gpus == 1 and p.strategy.offload == "none"
    text = export(p, "accelerate", job=problem.job)
    config = yaml.safe_load(text)
    assert config["distributed_type"] == "NO" and config["num_processes"] == 1 and "fsdp_config" not in config
    assert "LoRA" in text or "lora" in text  # the adapter line still says what the script must add
    cluster = pytest.importorskip("accelerate.commands.config.config_args").ClusterConfig
    path = tmp_path / "accelerate.yaml"
    path.write_text(text)
    assert cluster.from_yaml_file(path).distributed_type.value == "NO"


# --------------------------------------------------------------------------- SkyPilot


def test_skypilot_runs_a_spot_plan_as_a_managed_job_with_disk_for_its_checkpoints():
    """A spot plan: resources.job_recovery (SkyPilot's yaml-spec: strategy, max_restarts_on_errors) and the
    header's sky jobs launch; every plan: a disk_size (GB) that holds two 988 GB checkpoints of the 70B's weights
    and optimizer state with room to spare. An on-demand plan stays a sky launch without job_recovery."""
    problem, p = llama70b("megatron", tp=8, pp=4)
    spot = p.model_copy(update={"spot": True})
    text = export(spot, "skypilot", job=problem.job)
    task = yaml.safe_load(text)
    resources = task["resources"]
    assert resources["use_spot"] is True
    assert resources["job_recovery"]["strategy"] in ("FAILOVER", "EAGER_NEXT_REGION")
    assert isinstance(resources["job_recovery"]["max_restarts_on_errors"], int)
    assert "sky jobs launch" in text and "sky launch -c" not in text
    checkpoint_gb = 70.55e9 * 14 / 1e9
    assert resources["disk_size"] >= 2 * checkpoint_gb and resources["disk_size"] % 100 == 0

    on_demand = yaml.safe_load(export(p, "skypilot", job=problem.job))["resources"]
    assert "job_recovery" not in on_demand and on_demand["disk_size"] == resources["disk_size"]
    sky = pytest.importorskip("sky")
    parsed = sky.Task.from_yaml_config(task)
    (res,) = parsed.resources
    assert res.use_spot and res.disk_size == resources["disk_size"]


# --------------------------------------------------------------------------- Kubernetes


def test_kubernetes_multi_node_requests_rdma_and_is_gang_scheduled():
    """A 4-node plan: every pod asks for the RDMA device plugin's resource with IPC_LOCK and NCCL on InfiniBand,
    and the Job carries Kueue's queue label (all pods admitted together); a one-node plan has neither. With the
    official client installed, it deserializes the Job."""
    from optimizer.present.exports.kubernetes import KUEUE_QUEUE_LABEL, RDMA_RESOURCE

    problem, p = llama70b("megatron", tp=8, pp=4)
    assert p.hosts == 4
    _, job = yaml.safe_load_all(export(p, "kubernetes", job=problem.job))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"][RDMA_RESOURCE] == "1"
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    assert {"name": "NCCL_IB_DISABLE", "value": "0"} in container["env"]
    assert job["metadata"]["labels"][KUEUE_QUEUE_LABEL]
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 4

    problem = job_problem("llama-3.1-8b", method="lora", tokens="1B", global_batch=16)
    single = check(problem, CheckRequest("H100", 8, compare=False)).plan
    _, job = yaml.safe_load_all(export(single, "kubernetes", job=problem.job))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert RDMA_RESOURCE not in container["resources"]["limits"] and KUEUE_QUEUE_LABEL not in job["metadata"]["labels"]

    client = pytest.importorskip("kubernetes.client")
    _, job = yaml.safe_load_all(export(p, "kubernetes", job=problem.job))
    api = client.ApiClient()
    parsed = api._ApiClient__deserialize(job, "V1Job")  # the official client's model, as tests/exports/test_exports.py
    assert parsed.spec.template.spec.containers[0].security_context.capabilities.add == ["IPC_LOCK"]


def test_skypilot_runs_the_frameworks_command(tmp_path):
    """The task's run is the Megatron export's pretrain_gpt.py with the same arguments (Megatron's parser reads
    the same run), its environment among the envs; a torchtitan plan's run writes the TOML it trains on."""
    problem, p = llama70b("megatron", tp=8, pp=4)
    task = yaml.safe_load(export(p, "skypilot", job=problem.job))
    _bash_n(task["run"], tmp_path)
    assert megatron_parse(task["run"]) == megatron_parse(export(p, "megatron", job=problem.job))
    assert task["envs"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    problem, p = llama70b()
    task = yaml.safe_load(export(p, "skypilot", job=problem.job))
    _bash_n(task["run"], tmp_path)
    assert export(p, "torchtitan", job=problem.job) in task["run"] and "-m torchtitan.train" in task["run"]


def test_megatron_model_flags_build_a_megatron_core_transformer():
    """With megatron-core installed: the parsed model flags make a TransformerConfig that validates (its
    __post_init__ checks heads against query groups and TP, the experts against EP) with the plan's layout."""
    problem = job_problem("qwen3-30b-a3b", global_batch=96, framework="megatron")
    p = check(problem, CheckRequest("B200", 8, ep=8, zero=1, compare=False)).plan
    args = megatron_parse(export(p, "megatron", job=problem.job))
    transformer_config = pytest.importorskip("megatron.core.transformer").TransformerConfig
    config = transformer_config(
        num_layers=args.num_layers,
        hidden_size=args.hidden_size,
        ffn_hidden_size=args.ffn_hidden_size,
        num_attention_heads=args.num_attention_heads,
        num_query_groups=args.num_query_groups,
        kv_channels=args.kv_channels,
        normalization=args.normalization,
        gated_linear_unit=args.swiglu,  # arguments.py: --swiglu sets gated_linear_unit with SiLU
        add_bias_linear=not args.disable_bias_linear,
        qk_layernorm=args.qk_layernorm,
        num_moe_experts=args.num_experts,  # arguments.py's --num-experts
        moe_router_topk=args.moe_router_topk,
        moe_grouped_gemm=args.moe_grouped_gemm,
        moe_token_dispatcher_type=args.moe_token_dispatcher_type,
        moe_ffn_hidden_size=args.moe_ffn_hidden_size,
        tensor_model_parallel_size=args.tensor_model_parallel_size,
        expert_model_parallel_size=args.expert_model_parallel_size,
        sequence_parallel=args.sequence_parallel,
        bf16=args.bf16,
    )
    assert (config.num_moe_experts, config.moe_router_topk, config.expert_model_parallel_size) == (128, 8, 8)
    assert config.num_query_groups == problem.job.model.kv_heads and config.normalization == "RMSNorm"
