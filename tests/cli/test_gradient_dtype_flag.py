"""``--gradient-dtype`` (bf16 | fp32): the job flag for ``job.gradient_dtype``, taken by every command that asks a
job question (check, solve, options), planning as the job file's field plans, saved by ``--save`` so that the saved
file asks the same question, and refused in one paragraph naming the flag where its value is neither."""

from __future__ import annotations

import pytest
import yaml
from cli_answers import json_answer
from typer.testing import CliRunner

from optimizer.cli import app

runner = CliRunner()

# Llama 3.1 8B's parameters: 8,030,261,248 (the safetensors total of meta-llama/Llama-3.1-8B on the Hugging Face Hub)
LLAMA_31_8B_PARAMS = 8_030_261_248
# bytes a gradient: bf16 (2 bytes, a 16-bit float) and fp32 (IEEE 754 binary32, 4 bytes)
GRADIENT_BYTES = {"bf16": 2, "fp32": 4}
GIB = 2**30

JOB = ["--model", "llama-3.1-8b", "--tokens", "1B"]
ON_8_H100 = ["--sku", "H100", "--gpus", "8"]
# plain data parallelism: every rank holds every gradient (no tensor or pipeline split, no ZeRO sharding)
REPLICATED = [*ON_8_H100, "--tp", "1", "--pp", "1", "--zero", "0"]


def job_file(tmp_path, gradient_dtype: str | None) -> str:
    """The job ``JOB`` states, as a file (named as the command line names it), with ``gradient_dtype`` set or
    left out (None)."""
    field = "" if gradient_dtype is None else f"  gradient_dtype: {gradient_dtype}\n"
    path = tmp_path / f"job-{gradient_dtype}.yaml"
    path.write_text(f"job:\n  name: llama-3.1-8b\n  model: llama-3.1-8b\n  tokens: 1B\n{field}")
    return str(path)


@pytest.mark.parametrize(("command", "where"), [("check", ON_8_H100), ("solve", []), ("options", [])])
def test_the_flag_plans_as_the_job_files_field(tmp_path, command, where):
    by_flag = json_answer(command, *JOB, *where, "--gradient-dtype", "fp32")
    assert by_flag == json_answer(command, job_file(tmp_path, "fp32"), *where)


def test_fp32_gradients_hold_four_bytes_a_parameter():
    memory = {d: json_answer("check", *JOB, *REPLICATED, "--gradient-dtype", d)["memory_gib"] for d in GRADIENT_BYTES}
    for dtype, size in GRADIENT_BYTES.items():
        assert memory[dtype]["gradients"] * GIB == pytest.approx(size * LLAMA_31_8B_PARAMS, rel=1e-9), dtype
    added_gib = (GRADIENT_BYTES["fp32"] - GRADIENT_BYTES["bf16"]) * LLAMA_31_8B_PARAMS / GIB
    assert memory["fp32"]["total"] - memory["bf16"]["total"] == pytest.approx(added_gib, rel=1e-9)
    others = ("weights", "optimizer", "activations", "reserve", "capacity")
    assert all(memory["fp32"][k] == memory["bf16"][k] for k in others), memory


def test_fp32_gradients_reduce_twice_the_bytes():
    """64 H100s in plain data parallelism (ZeRO-1, 8 nodes): the bf16 reduce hides behind the backward pass, the
    fp32 one, twice the bytes, outlasts it; the compute is the same."""
    args = [*JOB, "--sku", "H100", "--gpus", "64", "--tp", "1", "--pp", "1", "--zero", "1"]
    answers = {d: json_answer("check", *args, "--gradient-dtype", d) for d in GRADIENT_BYTES}
    bf16, fp32 = (answers[d]["time_breakdown_s"] for d in GRADIENT_BYTES)
    assert fp32["compute"] == bf16["compute"] and fp32["network"] > bf16["network"], answers
    assert answers["fp32"]["step_s"] > answers["bf16"]["step_s"]


def test_no_flag_keeps_the_default_and_the_files_own(tmp_path):
    bf16 = json_answer("check", *JOB, *REPLICATED)
    assert bf16 == json_answer("check", *JOB, *REPLICATED, "--gradient-dtype", "bf16")
    assert bf16 == json_answer("check", job_file(tmp_path, None), *REPLICATED)
    fp32_file = job_file(tmp_path, "fp32")
    fp32 = json_answer("check", fp32_file, *REPLICATED)
    assert fp32["memory_gib"]["gradients"] == 2 * bf16["memory_gib"]["gradients"]  # the file's fp32, kept
    assert json_answer("check", fp32_file, *REPLICATED, "--gradient-dtype", "bf16") == bf16  # the flag over it


@pytest.mark.parametrize("over_file", [False, True])
def test_save_writes_it_so_the_saved_file_asks_the_same(tmp_path, over_file):
    asked = [job_file(tmp_path, "bf16")] if over_file else JOB
    saved = tmp_path / "saved" / "question.yaml"
    saved.parent.mkdir()
    direct = json_answer("check", *asked, *REPLICATED, "--gradient-dtype", "fp32")
    assert json_answer("check", *asked, *REPLICATED, "--gradient-dtype", "fp32", "--save", str(saved)) == direct
    assert yaml.safe_load(saved.read_text())["job"]["gradient_dtype"] == "fp32"
    assert json_answer("check", str(saved), *REPLICATED) == direct


@pytest.mark.parametrize("command", ["check", "solve", "options"])
@pytest.mark.parametrize("value", ["fp16", "fp8", "float32", ""])
def test_a_value_neither_bf16_nor_fp32_is_refused_naming_the_flag(command, value):
    where = ON_8_H100 if command == "check" else []
    r = runner.invoke(app, [command, *JOB, *where, "--gradient-dtype", value])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.stdout == ""
    paragraph = r.stderr.strip()
    assert "\n\n" not in paragraph, paragraph
    assert all(word in paragraph for word in ("--gradient-dtype", "'bf16'", "'fp32'", repr(value))), paragraph
