"""A question without a file: the job flags build the job a file would, so the answer is the file's; with a
file the flags override its fields; --save writes the job so a one-liner becomes a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from paths import DATA, ROOT
from typer.testing import CliRunner

from optimizer import cli
from optimizer.errors import ArgumentError
from optimizer.inputs.question import global_batch_value, model_value, saved_document, seq_len_value

runner = CliRunner()


def best_of(*args) -> dict:
    r = runner.invoke(cli.app, ["solve", *args, "-f", "json", "--time-limit", "30"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["best"]


def same_plan(a: dict, b: dict) -> bool:
    return (a["offer"], a["gpus"], a["strategy"], a["cost_usd"]) == (
        b["offer"],
        b["gpus"],
        b["strategy"],
        b["cost_usd"],
    )


def test_flags_plan_the_job_a_file_would(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(
        "catalog: nodus-2026-11\njob:\n  name: q\n  model: llama-3.1-8b\n  method: lora\n  tokens: 1B\n  seq_len: 8192\n"
        "constraints:\n  deadline: 1d\n"
    )
    flags = ["--model", "llama-3.1-8b", "--method", "lora", "--tokens", "1B", "--seq-len", "8k", "--deadline", "1d"]
    assert same_plan(best_of(*flags, "--catalog", "nodus-2026-11"), best_of(str(job)))


def test_save_writes_a_job_file_that_answers_the_same(tmp_path):
    saved = tmp_path / "saved.yaml"
    flags = ["--model", "qwen3-8b", "--tokens", "2B", "--global-batch", "128", "--catalog", "nodus-2026-11"]
    first = runner.invoke(cli.app, ["solve", *flags, "--save", str(saved), "-f", "json"])
    assert first.exit_code == 0, first.output
    assert f"wrote the job to {saved}" in first.stderr
    again = best_of(str(saved), "--catalog", "nodus-2026-11")
    assert same_plan(json.loads(first.stdout)["best"], again)
    assert "global_batch: 128" in saved.read_text()


def test_flags_over_a_file_override_its_fields(tmp_path):
    readme_job = ROOT / "problems" / "llama-70b-within-5-days.yaml"
    edited = tmp_path / "five-b.yaml"
    edited.write_text(readme_job.read_text().replace("tokens: 20B", "tokens: 5B"))
    assert same_plan(best_of(str(readme_job), "--tokens", "5B"), best_of(str(edited)))


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--tokens", "1B"], "--model"),
        (["--model", "llama-3.1-8b"], "--tokens"),
        (["--model", "llama-3.1-8b", "--tokens", "-1"], "--tokens"),
        (["--model", "llama-3.1-8b", "--tokens", "1B", "--seq-len", "abc"], "--seq-len"),
        (["--model", "llama-9-8b", "--tokens", "1B"], "--model"),
        (["--model", "llama-3.1-8b", "--tokens", "1B", "--method", "dpo"], "--method"),
        (["--model", "llama-3.1-8b", "--tokens", "1B", "--save", "job.txt"], "--save"),
    ],
)
def test_a_bad_job_flag_is_refused_naming_it(args, flag):
    r = runner.invoke(cli.app, ["solve", *args])
    assert r.exit_code == 2, r.output
    assert flag in r.stderr and "Traceback" not in r.output, r.stderr


def test_context_lengths_count_in_1024s():
    assert (seq_len_value("8k"), seq_len_value("128K"), seq_len_value("4096"), seq_len_value("4,096")) == (
        8192,
        131072,
        4096,
        4096,
    )


@pytest.mark.parametrize("given", ["1000", "1e3", "1,000", "1000.0", "1_000", " 1000 "])
def test_global_batch_flag_is_sequences_however_the_number_is_written(given):
    assert global_batch_value(given) == 1000


def test_global_batch_flag_takes_tokens_only_with_their_unit():
    assert global_batch_value("4M tokens") == "4M tokens"
    for text in ("4M", "1000.5", "abc", "0", "-5", "tokens", "1,00", "1e400"):
        with pytest.raises(ArgumentError) as refused:
            global_batch_value(text)
        assert refused.value.field == "global_batch", text
    with pytest.raises(ArgumentError, match="needs its unit"):
        global_batch_value("4M")


@pytest.mark.parametrize("given", ["1e3", "1,000", "1000.0"])
def test_global_batch_flag_plans_the_batch_a_job_file_gives(tmp_path, given):
    # a job file's global_batch: 1000 is 1,000 sequences, and so is the flag's 1e3 (not 1e3 tokens, a batch of 1)
    job = tmp_path / "job.yaml"
    job.write_text("job: {name: b, model: llama-3.1-8b, method: lora, tokens: 200M, global_batch: 1000}\n")
    flags = ["--model", "llama-3.1-8b", "--method", "lora", "--tokens", "200M", "--global-batch", given]
    by_flag = best_of(*flags, "--time-limit", "5")
    assert by_flag["strategy"]["global_batch"] == 1000
    assert same_plan(by_flag, best_of(str(job)))


@pytest.mark.parametrize("given", ["1000.5", "abc", "4M"])
def test_global_batch_flag_refuses_what_is_no_batch(given):
    r = runner.invoke(cli.app, ["solve", "--model", "llama-3.1-8b", "--tokens", "1B", "--global-batch", given])
    assert r.exit_code == 2, r.output
    assert "--global-batch" in r.stderr and "Traceback" not in r.output


# --------------------------------------------------------------------------- --save asks the same question

BASE = {"--model": "llama-3.1-8b", "--method": "lora", "--tokens": "200M", "--catalog": "nodus-2026-11"}
CONFIG = DATA / "llama-3.1-8b-config.json"

# every job flag and every constraint flag solve takes, with a value that changes the answer or the question
ROUND_TRIPS = {
    "model": {"--model": "qwen3-8b"},
    "model-path": {"--model": "model/config.json"},
    "method": {"--method": "qlora"},
    "tokens": {"--tokens": "300M"},
    "seq-len": {"--seq-len": "8k"},
    "global-batch": {"--global-batch": "1e3"},
    "global-batch-tokens": {"--global-batch": "2M tokens"},
    "precision": {"--precision": "fp8"},
    "optimizer": {"--optimizer": "adamw8bit"},
    "lora-rank": {"--lora-rank": "64"},
    "gradient-dtype": {"--gradient-dtype": "fp32", "--method": "full"},
    "lora-targets": {"--lora-targets": "attention"},
    "master-weights": {"--no-master-weights": None, "--method": "full"},
    "objective": {"--objective": "time"},
    "deadline": {"--deadline": "6h"},
    "budget": {"--budget": "$5"},
    "max-nodes": {"--max-nodes": "1", "--objective": "time"},
    "max-gpus": {"--max-gpus": "2", "--objective": "time"},
    "gpu-types": {"--gpu-types": "B300,H200"},
    "min-memory": {"--min-memory": "200GB"},
    "deadline-quantile": {"--deadline": "12h", "--deadline-quantile": "p90"},
    "measured": {"--measured": "1xB200:30k tok/s"},
    "framework": {"--framework": "deepspeed"},
    "spot": {"--spot": None, "--catalog": "public-2026-11"},
    "no-spot": {"--no-spot": None, "--catalog": "public-2026-11"},
    "catalog-name": {"--catalog": "public-2026-11"},
    "catalog-path": {"--catalog": "catalogs/mine.yaml"},
}


def answer(*args: str) -> dict:
    """What a JSON answer says about the plan, without what names the file it came from."""
    r = runner.invoke(cli.app, ["solve", *args, "-f", "json", "--time-limit", "10"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)

    def plan(p: dict | None) -> tuple | None:
        return p and (p["offer"], p["gpus"], p["strategy"], p["cost_usd"], p["hours"])

    return {
        "status": data["status"],
        "best": plan(data["best"]),
        "frontier": [plan(p) for p in data["frontier"]],
        "deadline_h": data["deadline_h"],
        "budget_usd": data["budget_usd"],
    }


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working folder with a catalog and a model config.json of its own, and a folder to save into."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "catalogs").mkdir()
    (tmp_path / "catalogs" / "mine.yaml").write_text("include: [nodus-2026-11]\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(CONFIG.read_text())
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


def as_args(flags: dict) -> list[str]:
    return [word for flag, value in flags.items() for word in ([flag] if value is None else [flag, value])]


@pytest.mark.parametrize("case", list(ROUND_TRIPS))
def test_save_then_solve_answers_as_the_flags_do(folder, case):
    args = as_args({**BASE, **ROUND_TRIPS[case]})
    saved = Path("elsewhere") / "job.yaml"  # another folder: relative paths in it must still name their files
    direct = answer(*args)
    assert answer(*args, "--save", str(saved)) == direct
    assert answer(str(saved)) == direct, saved.read_text()


def test_save_over_a_job_file_keeps_its_relative_catalog_and_model(folder):
    (folder / "jobs").mkdir()
    job = folder / "jobs" / "job.yaml"
    job.write_text(
        "catalog: ../catalogs/mine.yaml\njob:\n  name: j\n  model: {hf_config: ../model/config.json}\n"
        "  method: lora\n  tokens: 200M\n"
    )
    flags = ["--deadline", "8h", "--no-spot", "--gpu-types", "H200,B200", "--objective", "time"]
    direct = answer(str(job), *flags)
    saved = folder / "elsewhere" / "deeper" / "job.yaml"
    saved.parent.mkdir()
    assert answer(str(job), *flags, "--tokens", "200M", "--save", str(saved)) == direct
    assert answer(str(saved)) == direct
    text = yaml.safe_load(saved.read_text())
    assert text["catalog"] == "../../catalogs/mine.yaml"
    assert text["job"]["model"] == {"hf_config": "../../model/config.json"}
    assert text["constraints"] == {"deadline": "8h", "gpu": {"types": ["H200", "B200"]}, "spot": "never"}
    assert text["objective"] == "time"


def test_save_writes_every_constraint_flag_where_a_job_file_says_it(folder):
    flags = as_args({**BASE, "--deadline": "2d", "--budget": "$900", "--max-nodes": "2", "--max-gpus": "8"})
    flags += ["--gpu-types", "B200", "--min-memory", "80GB", "--deadline-quantile", "p90", "--no-spot"]
    flags += ["--framework", "fsdp", "--objective", "cost", "--measured", "8xB200:40k tok/s", "--catalog", "default"]
    r = runner.invoke(cli.app, ["solve", *flags, "--save", "q.yaml", "--time-limit", "5", "-q"])
    assert r.exit_code == 0, r.output
    saved = yaml.safe_load(Path("q.yaml").read_text())
    assert saved["catalog"] == "default" and saved["objective"] == "cost"
    assert saved["constraints"] == {
        "deadline": "2d",
        "budget": "$900",
        "max_nodes": 2,
        "max_gpus": 8,
        "gpu": {"types": ["B200"], "min_memory": "80GB"},
        "deadline_quantile": "p90",
        "spot": "never",
    }
    assert saved["job"]["framework"] == "fsdp"
    assert saved["job"]["measured"] == [{"sku": "B200", "gpus": 8, "tokens_per_s": 40000.0}]


def test_saved_document_has_one_spelling_of_each_field_and_leaves_the_input_alone():
    document = {"job": {"name": "j"}, "constraints": {"deadline_s": 3600, "gpu": {"min_memory_bytes": 1e11}}}
    saved = saved_document(document, {"deadline": "2h", "min_memory": "80GB", "budget": None})
    assert saved["constraints"] == {"deadline": "2h", "gpu": {"min_memory": "80GB"}}
    assert document["constraints"]["deadline_s"] == 3600  # a copy


def test_a_model_path_wins_over_a_hub_id_of_the_same_name_in_model_and_solve(folder, monkeypatch):
    # a folder named like a Hub id, holding a config.json unlike the Hub's: both commands read the folder
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(folder / "empty-cache"))
    local = folder / "meta-llama" / "Llama-3.1-8B"
    local.mkdir(parents=True)
    config = json.loads(CONFIG.read_text())
    config["num_hidden_layers"] = 16  # half the Hub's model: which one was read shows in its size
    (local / "config.json").write_text(json.dumps(config))
    shown = runner.invoke(cli.app, ["model", "meta-llama/Llama-3.1-8B", "-f", "json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["layers"] == 16
    assert model_value("meta-llama/Llama-3.1-8B") == {"hf_config": "meta-llama/Llama-3.1-8B"}
    flags = ["--model", "meta-llama/Llama-3.1-8B", "--tokens", "100M", "--catalog", "nodus-2026-11"]
    r = runner.invoke(cli.app, ["solve", *flags, "--save", "q.yaml"])
    assert r.exit_code == 0, r.output  # the cache is empty and offline: only the folder can answer
    assert yaml.safe_load(Path("q.yaml").read_text())["job"]["model"] == {"hf_config": "meta-llama/Llama-3.1-8B"}
    assert model_value("llama-3.1-8b") == "llama-3.1-8b" and model_value("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"


def test_save_over_a_spec_block_keeps_the_flag_that_overrides_its_filter(folder):
    # the seed's spec.resources.gpu filters, overridden by --gpu-types / --min-memory: the saved file keeps the
    # flag's filter alone (both kept, they disagree and the saved file is refused)
    Path("spec.yaml").write_text(
        "catalog: nodus-2026-11\njob: {name: s, model: llama-3.1-8b, method: lora, tokens: 200M}\n"
        "spec: {resources: {gpu: {type: B200, minMemory: 100GB, count: 8}}}\n"
    )
    for flags in (["--gpu-types", "H200"], ["--gpu-types", "H200", "--min-memory", "120GB"]):
        direct = answer("spec.yaml", *flags)
        assert answer("spec.yaml", *flags, "--save", "elsewhere/s.yaml") == direct
        assert answer("elsewhere/s.yaml") == direct
    assert yaml.safe_load(Path("elsewhere/s.yaml").read_text())["spec"] == {"resources": {"gpu": {"count": 8}}}


def test_a_model_path_flag_over_a_job_file_is_read_from_the_working_folder(folder):
    # the job file's own paths are read from its folder; a flag's path from where the command runs
    (folder / "jobs").mkdir()
    Path("jobs/job.yaml").write_text(
        "catalog: nodus-2026-11\njob: {name: j, model: qwen3-8b, method: lora, tokens: 200M}\n"
    )
    direct = answer("--model", "model", "--method", "lora", "--tokens", "200M", "--catalog", "nodus-2026-11")
    assert answer("jobs/job.yaml", "--model", "model", "--save", "elsewhere/m.yaml") == direct
    assert answer("elsewhere/m.yaml") == direct
    assert yaml.safe_load(Path("elsewhere/m.yaml").read_text())["job"]["model"] == {"hf_config": "../model"}


def test_a_job_from_a_config_path_is_named_for_the_model_folder(folder):
    r = runner.invoke(cli.app, ["options", "--model", "model/config.json", "--tokens", "1B", "--save", "q.yaml", "-q"])
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(Path("q.yaml").read_text())["job"]["name"] == "model"  # not 'config.json'
