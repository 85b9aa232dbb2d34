"""A GRPO job's launch as NeMo RL runs it (issue 52, docs/roles.md; optimizer/present/exports/nemo_rl.py), read back
by the tools that run it: bash runs the script (``uv`` and ``sbatch`` stubbed to print their arguments), NeMo RL's
examples/run_grpo.py argparse splits the line into ``--config`` and overrides, and NeMo RL's own
nemo_rl/utils/config.py steps (its config inheritance, then Hydra's ``OverridesParser`` and ``ConfigLoaderImpl``
applying the overrides in struct mode, where a key the config lacks fails) set them on NeMo RL's published configs,
vendored at v0.7.0 (tests/data/nemo_rl). The values are then checked against the plan's split and the job file's
batch, and against NeMo RL's own rules for placing non-colocated generation (nemo_rl/algorithms/grpo.py setup)."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from paths import DATA, ROOT
from role_edits import with_roles
from typer.testing import CliRunner

from optimizer import load_catalog, load_job
from optimizer.cli import app
from optimizer.inputs.roles import parse_role_flag
from optimizer.present import roles as present_roles
from optimizer.present.exports import find_launcher, kinds_text
from optimizer.solver.roles import check_roles

JOB = ROOT / "problems" / "grpo-llama-3.1-8b.yaml"
DRAFTER_JOB = ROOT / "problems" / "seed-003-drafter-roles.yaml"
ONE_MODEL_JOB = ROOT / "problems" / "llama-70b-within-5-days.yaml"
NEMO_RL = DATA / "nemo_rl"  # NVIDIA-NeMo/RL v0.7.0 (81aa43d) examples/configs
VERL = DATA / "verl"  # volcengine/verl v0.7.0 (f9c855f): the trainer's config and the recipe's
runner = CliRunner()


@pytest.fixture(scope="module")
def problem():
    return load_job(JOB)


@pytest.fixture(scope="module")
def catalog(problem):
    return load_catalog((JOB.parent / problem.catalog).resolve())


def exported(problem, catalog, rollout: str, policy: str, kind: str = "nemo-rl") -> tuple[str, object]:
    """The ``kind`` export of a checked split, and the checked plan."""
    split = [parse_role_flag(f"rollout={rollout}", "grpo"), parse_role_flag(f"policy={policy}", "grpo")]
    result = check_roles(problem, split, catalog=catalog)
    done = present_roles.Answered(result, problem, catalog, present_roles.Outputs(kind))
    return present_roles.launch_text(done, kind), result.best.plan


def launched(script: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    """What bash runs: ``uv``'s arguments, and ``sbatch``'s (empty where the script runs on one host), with both
    stubbed; beyond one host ray.sub runs COMMAND on the head node through bash, as the stub does."""
    path = tmp_path / "launch.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    stubs = (
        'uv() { printf "UV\\0"; printf "%s\\0" "$@"; }\n'
        'python3() { printf "PYTHON3\\0"; printf "%s\\0" "$@"; }\n'
        'sbatch() { printf "SBATCH\\0"; printf "%s\\0" "$@"; bash -c "$(declare -f uv); $COMMAND"; }\n'
        "export -f uv\n"
        f"CONTAINER=image source {path}\n"
    )
    out = subprocess.run(["bash", "-c", stubs], capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    words = out.split("\0")[:-1]
    if words[0] == "PYTHON3":  # verl's line: python3 -m MODULE OVERRIDES
        return ["python3", *words[1:]], []
    sbatch = words[1 : words.index("UV")] if words[0] == "SBATCH" else []
    return ["uv", *words[words.index("UV") + 1 :]], sbatch


def run_grpo_args(argv: list[str]) -> tuple[str, list[str]]:
    """examples/run_grpo.py's parse_args (v0.7.0): ``--config`` and, as overrides, every other argument."""
    assert argv[:4] == ["uv", "run", "python", "examples/run_grpo.py"], argv
    parser = argparse.ArgumentParser(description="Run GRPO training with configuration")
    parser.add_argument("--config", type=str, default=None, help="Path to YAML config file")
    args, overrides = parser.parse_known_args(argv[4:])
    return args.config, overrides


def nemo_rl_config(config: str, overrides: list[str]) -> dict:
    """The config run_grpo.py trains with: nemo_rl/utils/config.py load_config (``defaults:`` inheritance) and
    parse_hydra_overrides (struct mode, Hydra's parser and override applier), resolved as run_grpo.py resolves it."""
    pytest.importorskip("hydra", reason="hydra-core (the integrations extra) reads NeMo RL's overrides")
    from omegaconf import DictConfig, OmegaConf

    def load(path: Path) -> DictConfig:  # load_config_with_inheritance, single inheritance as the configs use it
        cfg = OmegaConf.load(path)
        if "defaults" in cfg:
            parent = load(path.parent / str(cfg.pop("defaults")))
            cfg = OmegaConf.merge(parent, cfg)
        return cfg

    assert config.startswith("examples/configs/"), config
    for name, fn in {"mul": lambda a, b: a * b, "div": lambda a, b: a / b, "max": max}.items():
        if not OmegaConf.has_resolver(name):  # register_omegaconf_resolvers
            OmegaConf.register_new_resolver(name, fn)
    return apply_overrides(load(NEMO_RL / Path(config).name), overrides)


def apply_overrides(cfg, overrides: list[str]) -> dict:
    """Hydra's override parser and applier on ``cfg`` in struct mode (as NeMo RL's parse_hydra_overrides and a
    @hydra.main composition apply them), resolved."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    OmegaConf.set_struct(cfg, True)
    parsed = OverridesParser.create().parse_overrides(overrides=overrides)
    ConfigLoaderImpl._apply_overrides_to_config(overrides=parsed, cfg=cfg)
    return OmegaConf.to_container(cfg, resolve=True)


def verl_config(argv: list[str]) -> tuple[str, dict]:
    """What verl trains with: Hydra's command line (``@hydra.main``'s parser) read off ``python3 -m MODULE ...``, the
    overrides applied on the trainer's config, the one-step-off recipe's merged over it (its ``defaults:
    [ppo_trainer, _self_]``)."""
    pytest.importorskip("hydra", reason="hydra-core (the integrations extra) reads verl's overrides")
    from hydra._internal.utils import get_args_parser
    from omegaconf import OmegaConf

    assert argv[:2] == ["python3", "-m"], argv
    module, overrides = argv[2], get_args_parser().parse_args(argv[3:]).overrides
    cfg = OmegaConf.load(VERL / "_generated_ppo_trainer.yaml")
    if module == "recipe.one_step_off_policy.main_ppo":
        recipe = OmegaConf.load(VERL / "one_step_off_ppo_trainer.yaml")
        cfg = OmegaConf.merge(cfg, {k: v for k, v in recipe.items() if k not in ("defaults", "hydra")})
    else:
        assert module == "verl.trainer.main_ppo", module
    # verl's own interpolations (oc.select) resolve in OmegaConf; its config's ??? (rollout.name) must be set
    return module, apply_overrides(cfg, overrides)


def verl_gpus(cfg: dict) -> tuple[int, int]:
    """(rollout GPUs, actor GPUs) as verl's resource pools take them: the trainer's for both on the hybrid engine,
    else the rollout's own pool (recipe/one_step_off_policy)."""
    trainer = cfg["trainer"]["nnodes"] * cfg["trainer"]["n_gpus_per_node"]
    if cfg["actor_rollout_ref"]["hybrid_engine"]:
        return trainer, trainer
    return cfg["rollout"]["nnodes"] * cfg["rollout"]["n_gpus_per_node"], trainer


def read_back(script: str, tmp_path: Path) -> tuple[dict, list[str]]:
    argv, sbatch = launched(script, tmp_path)
    return nemo_rl_config(*run_grpo_args(argv)), sbatch


def training_gpus(cfg: dict) -> tuple[int, int]:
    """(generation GPUs, training GPUs) as NeMo RL's setup places them (nemo_rl/algorithms/grpo.py, v0.7.0): all
    of the cluster for both where colocated; otherwise on one node the generation's gpus_per_node of it and the
    rest for training, beyond one node whole nodes each (its asserts, restated)."""
    cluster, gen = cfg["cluster"], cfg["policy"]["generation"]["colocated"]
    total = cluster["num_nodes"] * cluster["gpus_per_node"]
    if gen["enabled"]:
        return total, total
    res = gen["resources"]
    if cluster["num_nodes"] == 1:
        assert res["gpus_per_node"] > 0 and res["num_nodes"] in (None, 1)
        return res["gpus_per_node"], cluster["gpus_per_node"] - res["gpus_per_node"]
    assert res["num_nodes"] > 0 and res["gpus_per_node"] == cluster["gpus_per_node"]
    inference = res["num_nodes"] * res["gpus_per_node"]
    assert cluster["num_nodes"] - res["num_nodes"] > 0
    return inference, total - inference


def test_colocated_8b_on_8_h100_reads_back_as_the_plan(problem, catalog, tmp_path):
    text, plan = exported(problem, catalog, "8xH100", "8xH100")
    cfg, sbatch = read_back(text, tmp_path)
    assert sbatch == [] and text.startswith("#!/bin/bash\n# gpuplan ")
    assert training_gpus(cfg) == (8, 8) == (plan.split.producers, plan.split.consumers) and plan.split.shared
    assert (cfg["cluster"]["num_nodes"], cfg["cluster"]["gpus_per_node"]) == (1, 8)
    grpo, policy = cfg["grpo"], cfg["policy"]
    rollout = problem.job.roles.rollout  # the job file: NeMo RL's recipe, 64 prompts x 32 samples, 500 steps
    assert (grpo["num_prompts_per_step"], grpo["num_generations_per_prompt"], grpo["max_num_steps"]) == (64, 32, 500)
    assert policy["train_global_batch_size"] == rollout.prompts_per_step * rollout.samples_per_prompt == 2048
    assert policy["train_micro_batch_size"] == policy["logprob_batch_size"] == problem.job.roles.micro_batch
    assert policy["max_total_sequence_length"] == 4096 == problem.job.seq_len  # 200 prompt + 3,896 response
    assert policy["generation"]["max_new_tokens"] == 3896
    assert policy["model_name"] == "meta-llama/Llama-3.1-8B" == policy["tokenizer"]["name"]
    assert policy["dtensor_cfg"]["enabled"] and not policy["megatron_cfg"]["enabled"]
    assert policy["dtensor_cfg"]["tensor_parallel_size"] == 1 and policy["dtensor_cfg"]["activation_checkpointing"]
    assert not policy["sequence_packing"]["enabled"] and not grpo["async_grpo"]["enabled"]
    vllm = policy["generation"]["vllm_cfg"]
    assert (vllm["tensor_parallel_size"], vllm["gpu_memory_utilization"]) == (rollout.tp, 0.6)
    assert vllm["max_model_len"] == 4096 and policy["generation"]["vllm_kwargs"] == {"max_num_seqs": 256}
    assert cfg["loss_fn"]["reference_policy_kl_penalty"] == 0.01  # the reference's pass kept (forward_passes: 2)
    assert "planned: 16,960 tokens/s" in text  # docs/roles.md's colocated 8-H100 figure


def test_a_key_nemo_rl_does_not_have_fails_the_read_back(tmp_path):
    # struct mode, as parse_hydra_overrides sets it: the round trip can fail (vLLM's max_num_seqs is no vllm_cfg key)
    errors = pytest.importorskip("hydra.errors", reason="hydra-core (the integrations extra) reads the overrides")
    with pytest.raises(errors.ConfigCompositionException, match="Could not override"):
        nemo_rl_config("examples/configs/grpo_math_8B.yaml", ["policy.generation.vllm_cfg.max_num_seqs=256"])


def test_disaggregated_async_on_one_host(problem, catalog, tmp_path):
    split = with_roles(problem, placement="disaggregated", asynchronous=True)
    text, plan = exported(split, catalog, "4xH100", "4xH100")
    cfg, sbatch = read_back(text, tmp_path)
    assert sbatch == [] and not plan.split.shared
    assert training_gpus(cfg) == (4, 4) and (cfg["cluster"]["num_nodes"], cfg["cluster"]["gpus_per_node"]) == (1, 8)
    assert cfg["grpo"]["async_grpo"]["enabled"] and cfg["grpo"]["async_grpo"]["max_trajectory_age_steps"] == 1
    # what async_grpo_train asserts (nemo_rl/algorithms/grpo.py v0.7.0)
    assert cfg["loss_fn"]["use_importance_sampling_correction"]
    assert cfg["policy"]["generation"]["vllm_cfg"]["async_engine"]
    sync, _ = exported(with_roles(problem, placement="disaggregated"), catalog, "4xH100", "4xH100")
    assert "async_grpo" not in sync and "asynchronous" not in sync.splitlines()[1]


def test_a_step_that_does_not_shard_over_the_policy_is_refused(problem, catalog):
    # 2,048 sequences over 6 policy ranks: NeMo RL's shard_by_batch_size asserts an even split
    with pytest.raises(Exception, match="2048 is not a multiple of 6") as refused:
        exported(with_roles(problem, placement="disaggregated"), catalog, "2xH100", "6xH100")
    assert refused.value.field == "export" and "job.roles.rollout.prompts_per_step" in str(refused.value)


@pytest.mark.parametrize(
    ("placement", "rollout", "policy", "generating", "training"),
    [("colocated", "16xH100", "16xH100", 16, 16), ("disaggregated", "8xH100", "8xH100", 8, 8)],
)
def test_two_nodes_run_under_ray_sub(problem, catalog, tmp_path, placement, rollout, policy, generating, training):
    text, plan = exported(with_roles(problem, placement=placement), catalog, rollout, policy)
    cfg, sbatch = read_back(text, tmp_path)
    assert plan.nodes == 2 and (cfg["cluster"]["num_nodes"], cfg["cluster"]["gpus_per_node"]) == (2, 8)
    assert sbatch[:2] == ["--nodes=2", "--gres=gpu:8"] and sbatch[-1] == "ray.sub"
    assert training_gpus(cfg) == (generating, training)


def test_part_of_a_host_beyond_one_host_is_refused(problem, catalog):
    with pytest.raises(Exception, match="whole hosts of 8") as refused:
        exported(with_roles(problem, placement="disaggregated"), catalog, "4xH100", "12xH100")
    assert "4 rollout + 12 policy GPUs over 2 hosts" in str(refused.value)


def test_a_gb200_rack_runs_as_its_trays(problem, catalog, tmp_path):
    # an NVL72 rack is one node of 72 to the plan and hosts of 4 to Ray (catalogs: gpus_per_host)
    text, plan = exported(problem, catalog, "8xGB200", "8xGB200")
    cfg, sbatch = read_back(text, tmp_path)
    assert plan.nodes == 1 and (cfg["cluster"]["num_nodes"], cfg["cluster"]["gpus_per_node"]) == (2, 4)
    assert sbatch[:2] == ["--nodes=2", "--gres=gpu:4"] and training_gpus(cfg) == (8, 8)


@pytest.mark.parametrize(("passes", "kl", "on_policy"), [(1, 0, False), (0, 0, True)])
def test_fewer_forward_passes_drop_the_reference_and_the_old_log_probs(
    problem, catalog, tmp_path, passes, kl, on_policy
):
    text, _ = exported(with_roles(problem, forward_passes=passes), catalog, "8xH100", "8xH100")
    cfg, _ = read_back(text, tmp_path)
    assert cfg["loss_fn"]["reference_policy_kl_penalty"] == kl and cfg["loss_fn"]["force_on_policy_ratio"] is on_policy
    with pytest.raises(Exception, match="forward_passes is 3"):
        exported(with_roles(problem, forward_passes=3), catalog, "8xH100", "8xH100")
    # verl: the reference where it loads one (use_kl_loss), the old log-probs unless taken from the rollout
    text, _ = exported(with_roles(problem, forward_passes=passes), catalog, "8xH100", "8xH100", "verl")
    _, cfg = verl_config(launched(text, tmp_path)[0])
    assert not cfg["actor_rollout_ref"]["actor"]["use_kl_loss"]
    assert cfg["algorithm"]["rollout_correction"]["bypass_mode"] is on_policy
    assert cfg["actor_rollout_ref"]["rollout"]["calculate_log_probs"] is on_policy


def test_the_cli_writes_it_for_check_and_solve(tmp_path):
    out = tmp_path / "grpo.sh"
    args = ["check", str(JOB), "--role", "rollout=8xH100", "--role", "policy=8xH100", "--export", "nemo-rl"]
    written = runner.invoke(app, [*args, "--out", str(out)])
    assert written.exit_code == 0, written.output
    assert "cluster.gpus_per_node=8" in out.read_text()
    solved = runner.invoke(app, ["solve", str(JOB), "--gpu-types", "H100-SXM", "--export", "nemo-rl"])
    assert solved.exit_code == 0, solved.output
    cfg, sbatch = read_back(solved.stdout, tmp_path)
    nodes = int(sbatch[0].removeprefix("--nodes="))
    assert cfg["cluster"]["num_nodes"] == nodes > 1 and f"on {nodes} hosts of 8" in solved.stdout.splitlines()[1]


@pytest.mark.parametrize(
    ("job", "kind", "says"),
    [
        (JOB, "slurm", "--export nemo-rl writes NeMo RL's GRPO launch"),
        (DRAFTER_JOB, "nemo-rl", "is a drafter job, whose roles run as two launches"),
        (DRAFTER_JOB, "verl", "is a drafter job, whose roles run as two launches"),
        (ONE_MODEL_JOB, "nemo-rl", "trains one model on all its GPUs"),
    ],
)
def test_a_kind_the_workload_has_not_is_refused(tmp_path, job, kind, says):
    out = tmp_path / "launch.sh"
    refused = runner.invoke(app, ["solve", str(job), "--export", kind, "--out", str(out)])
    assert refused.exit_code == 2 and "Traceback" not in refused.output, refused.output
    assert says in " ".join(refused.output.split()) and not out.exists()


def test_the_kind_is_listed_for_a_grpo_job():
    assert find_launcher("NeMo-RL").kind == "nemo-rl" and "for a GRPO job: nemo-rl (" in kinds_text()
    assert find_launcher("verl").kind == "verl" and ", verl (verl's main_ppo" in kinds_text()


def test_the_service_exports_it_as_the_cli_does():
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from optimizer.server.app import create_app
    from optimizer.server.service import Service

    data = yaml.safe_load(JOB.read_text()) | {"catalog": "default"}
    split = {"rollout": "8xH100", "policy": "8xH100"}
    cli = runner.invoke(app, ["check", str(JOB), "--role", "rollout=8xH100", "--role", "policy=8xH100",
                              "--export", "nemo-rl"])  # fmt: skip
    service = Service()
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1") as client:
            body = json.dumps(data | {"export": {"kind": "nemo-rl", "roles": split}})
            r = client.post("/v1/export", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 200, r.text
            assert 'filename="grpo-llama-3.1-8b-nemo-rl.sh"' in r.headers["content-disposition"]
            assert r.text == cli.stdout
            body = json.dumps(data | {"export": {"kind": "kubernetes"}})
            r = client.post("/v1/export", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 422 and "--export nemo-rl" in r.text and "Traceback" not in r.text
    finally:
        service.close()


# --------------------------------------------------------------------------- verl


def test_verl_runs_a_colocated_plan_on_its_hybrid_engine(problem, catalog, tmp_path):
    text, plan = exported(problem, catalog, "8xH100", "8xH100", "verl")
    module, cfg = verl_config(launched(text, tmp_path)[0])
    assert module == "verl.trainer.main_ppo" and verl_gpus(cfg) == (8, 8) == (plan.split.producers, plan.split.gpus)
    data, actor, rollout = cfg["data"], cfg["actor_rollout_ref"]["actor"], cfg["actor_rollout_ref"]["rollout"]
    assert cfg["algorithm"]["adv_estimator"] == "grpo" and (data["train_batch_size"], rollout["n"]) == (64, 32)
    # one optimizer step a GRPO step: the mini-batch is the step's prompts, verl multiplying it by n (fsdp_workers.py)
    assert actor["ppo_mini_batch_size"] * rollout["n"] == 2048 and actor["ppo_epochs"] == 1
    assert (data["max_prompt_length"], data["max_response_length"]) == (200, 3896)
    assert rollout["prompt_length"] + rollout["response_length"] == problem.job.seq_len  # verl's own interpolation
    assert (rollout["name"], rollout["tensor_model_parallel_size"], rollout["max_num_seqs"]) == ("vllm", 1, 256)
    assert rollout["gpu_memory_utilization"] == 0.6 and actor["strategy"] == "fsdp" and actor["use_kl_loss"]
    assert cfg["actor_rollout_ref"]["model"]["path"] == "meta-llama/Llama-3.1-8B"
    assert cfg["actor_rollout_ref"]["model"]["enable_gradient_checkpointing"]
    assert cfg["trainer"]["total_training_steps"] == 500


def test_verl_runs_an_asynchronous_split_one_step_off(problem, catalog, tmp_path):
    split = with_roles(problem, placement="disaggregated", asynchronous=True)
    text, _ = exported(split, catalog, "4xH100", "4xH100", "verl")
    module, cfg = verl_config(launched(text, tmp_path)[0])
    assert module == "recipe.one_step_off_policy.main_ppo" and verl_gpus(cfg) == (4, 4)
    assert cfg["algorithm"]["rollout_correction"]["bypass_mode"]  # the recipe's: one pass fewer, said so
    assert "one forward pass fewer than planned" in text
    text, _ = exported(split, catalog, "8xH100", "8xH100", "verl")
    module, cfg = verl_config(launched(text, tmp_path)[0])
    assert (cfg["rollout"]["nnodes"], cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"]) == (1, 1, 8)
    with pytest.raises(Exception, match="verl runs the rollout on GPUs of its own only one step off-policy"):
        exported(with_roles(problem, placement="disaggregated"), catalog, "4xH100", "4xH100", "verl")


def test_verl_refuses_what_its_pools_cannot_hold(problem, catalog, tmp_path):
    split = with_roles(problem, placement="disaggregated", asynchronous=True)
    # 20 + 4 over 3 hosts of 8: neither whole hosts each nor the same share of each (its README's two layouts)
    with pytest.raises(Exception, match="20 rollout \\+ 4 policy GPUs over 3 hosts of 8 are neither"):
        exported(split, catalog, "20xH100", "4xH100", "verl")
    text, _ = exported(split, catalog, "12xH100", "4xH100", "verl")  # 6 + 2 on each host of 2
    _, cfg = verl_config(launched(text, tmp_path)[0])
    assert (cfg["rollout"]["nnodes"], cfg["rollout"]["n_gpus_per_node"]) == (2, 6) and verl_gpus(cfg) == (12, 4)
    with pytest.raises(Exception, match="2048 is not a multiple of 6"):
        exported(split, catalog, "2xH100", "6xH100", "verl")
