"""A question without a file: the job flags build the job a file would, so the answer is the file's; with a
file the flags override its fields; --save writes the job so a one-liner becomes a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizer import cli
from optimizer.errors import ArgumentError
from optimizer.inputs.question import global_batch_value, seq_len_value

ROOT = Path(__file__).resolve().parent.parent
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
    # a job file's global_batch: 1000 is 1,000 sequences; the flag's 1e3 was read as 1e3 tokens (a batch of 1)
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
