"""What the command line declares once: the job flags (``--model``, ``--method``, ``--tokens``, ``--seq-len``,
``--global-batch``, ``--precision``, ``--optimizer``, ``--lora-rank``, ``--lora-targets``,
``--master-weights/--no-master-weights``, ``--gradient-dtype``, ``--dataset-tokens``, ``--epochs``, ``--loss``,
``--attention``, ``--variable-lengths``, ``--activation-offload``, ``--offload``) for check, solve and options
(``cli.shared.JOB_FLAG_OPTIONS``; check's --offload is its layout flag), each reaching its own field of the job (they
were eight positional values matched to fields by order); and the choices of its enums, which are the schema's own."""

from __future__ import annotations

from typing import get_args

import pytest
import yaml
from typer.testing import CliRunner

from optimizer.cli import app
from optimizer.cli.shared import JOB_FLAG_OPTIONS
from optimizer.cli_options import BasisOpt, MethodOpt, Objective, OffloadOpt
from optimizer.inputs.question import JOB_FLAGS
from optimizer.inputs.schema import Assumptions, JobSpec, Problem

runner = CliRunner()

# per job field: its option's declaration, and the words that give it a value other than the default
FLAGS = {
    "model": ("--model", ["--model", "llama-3.1-8b"]),
    "method": ("--method", ["--method", "lora"]),
    "tokens": ("--tokens", ["--tokens", "2B"]),
    "dataset_tokens": ("--dataset-tokens", ["--dataset-tokens", "500M"]),
    "epochs": ("--epochs", ["--epochs", "3"]),
    "seq_len": ("--seq-len", ["--seq-len", "8k"]),
    "global_batch": ("--global-batch", ["--global-batch", "64"]),
    "precision": ("--precision", ["--precision", "fp8"]),
    "optimizer": ("--optimizer", ["--optimizer", "sgd"]),
    "lora_rank": ("--lora-rank", ["--lora-rank", "32"]),
    "lora_targets": ("--lora-targets", ["--lora-targets", "attention"]),
    "lora_dropout": ("--lora-dropout", ["--lora-dropout", "0.05"]),
    "lora_adapter_dtype": ("--lora-adapter-dtype", ["--lora-adapter-dtype", "fp32"]),
    "master_weights": ("--master-weights/--no-master-weights", ["--no-master-weights"]),
    "gradient_dtype": ("--gradient-dtype", ["--gradient-dtype", "fp32"]),
    "loss": ("--loss", ["--loss", "chunked"]),
    "attention": ("--attention", ["--attention", "cudnn"]),
    "context_parallel": ("--context-parallel", ["--context-parallel", "all_to_all"]),
    "optimizer_implementation": ("--optimizer-implementation", ["--optimizer-implementation", "foreach"]),
    "variable_lengths": ("--variable-lengths/--no-variable-lengths", ["--variable-lengths"]),
    "activation_offload": ("--activation-offload/--no-activation-offload", ["--activation-offload"]),
    "offload": ("--offload", ["--offload", "optimizer"]),
}
# the flags one question cannot give beside the others: the tokens as a data set's (in place of --tokens), and the
# job's offload, which check pins as a layout flag of its own (solve writes it)
APART = ("dataset_tokens", "epochs", "offload")


def test_the_job_flags_are_declared_once_for_the_question_fields():
    assert tuple(JOB_FLAG_OPTIONS) == JOB_FLAGS
    assert set(FLAGS) == set(JOB_FLAGS)
    assert [option.param_decls[0] for _, option in JOB_FLAG_OPTIONS.values()] == [FLAGS[f][0] for f in JOB_FLAGS]


@pytest.mark.parametrize("command", ["check", "solve", "options"])
def test_every_planning_command_takes_every_job_flag(command):
    r = runner.invoke(app, [command, "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert all(words[0] in r.output for _, words in FLAGS.values()), r.output


def test_each_job_flag_reaches_its_own_field(tmp_path):
    saved = tmp_path / "question.yaml"
    given = [word for field, (_, words) in FLAGS.items() if field not in APART for word in words]
    r = runner.invoke(app, ["check", *given, "--sku", "H100", "--gpus", "8", "--save", str(saved), "-q"])
    assert r.exit_code == 0, r.output
    job = yaml.safe_load(saved.read_text())["job"]
    assert job["model"] == "llama-3.1-8b" and job["method"] == "lora" and job["tokens"] == "2B"
    assert job["seq_len"] == 8192 and job["global_batch"] == 64 and job["precision"] == "fp8"
    assert job["optimizer"] == "sgd" and job["lora_rank"] == 32 and job["gradient_dtype"] == "fp32"
    assert job["lora_targets"] == "attention" and job["master_weights"] is False
    assert job["loss"] == "chunked" and job["attention"] == "cudnn" and job["context_parallel"] == "all_to_all"
    assert job["optimizer_implementation"] == "foreach"
    assert job["variable_lengths"] is True and job["activation_offload"] is True
    apart = ["--model", "llama-3.1-8b", *(word for field in APART for word in FLAGS[field][1])]
    r = runner.invoke(app, ["solve", *apart, "--save", str(saved), "--time-limit", "5", "-q"])
    assert r.exit_code == 0, r.output
    job = yaml.safe_load(saved.read_text())["job"]
    assert job["dataset_tokens"] == "500M" and job["epochs"] == 3 and job["offload"] == "optimizer"
    assert "tokens" not in job


@pytest.mark.parametrize(
    ("choices", "field"),
    [
        (MethodOpt, JobSpec.model_fields["method"]),
        (OffloadOpt, JobSpec.model_fields["offload"]),
        (Objective, Problem.model_fields["objective"]),
        (BasisOpt, Assumptions.model_fields["memory_basis"]),
    ],
)
def test_the_cli_choices_are_the_schema_choices(choices, field):
    assert [c.value for c in choices] == list(get_args(field.annotation))
