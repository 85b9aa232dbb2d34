"""The job flags for ``job.dataset_tokens``, ``job.epochs``, ``job.loss``, ``job.attention``,
``job.variable_lengths``, ``job.activation_offload`` and (solve and options: check pins it as a layout flag)
``job.offload``: each plans as the job file's field plans, moves the figure its field moves by the bytes the model's
shapes give, is written by ``--save`` so that the saved file asks the same question, and a bad value is refused in
one paragraph naming the flag, the field and the values it takes (exit 2)."""

from __future__ import annotations

import re

import pytest
import yaml
from cli_answers import json_answer
from typer.testing import CliRunner

from optimizer.cli import app

runner = CliRunner()

# Llama 3.1 8B (meta-llama/Llama-3.1-8B config.json): 32 layers, 32 attention heads, vocab_size 128,256
LAYERS, HEADS, VOCAB = 32, 32, 128_256
SEQ = 4096  # the job's default seq_len
GIB = 2**30
# PyTorch's cross-entropy over upcast logits holds, at its backward, three fp32 tensors a token and vocabulary entry
# (log_softmax's output, nll_loss's gradient, log_softmax's backward's); Liger's fused linear cross-entropy never
# holds the whole logits; the fixed-shape allocator gap is the largest of them, one fp32 copy of the logits (4 bytes)
STANDARD_LOSS_BYTES, FUSED_LOSS_BYTES, FP32_BYTES = 12, 0, 4
# eager attention materialises the softmax of the s x s scores, one bf16 (2-byte) matrix a head and layer, which
# FlashAttention never writes (Dao et al. 2022, section 3.1)
SCORE_BYTES = 2

JOB = ["--model", "llama-3.1-8b", "--tokens", "1B"]
# 8 H100s under PyTorch FSDP, ZeRO-2 (FSDP's SHARD_GRAD_OP), no tensor or pipeline split, every layer's activations kept
FSDP = ["--sku", "H100", "--gpus", "8", "--tp", "1", "--pp", "1", "--zero", "2", "--framework", "fsdp"]
KEPT = [*FSDP, "--recompute", "none", "--micro-batch", "1"]


def job_file(tmp_path, fields: str, name: str = "job") -> str:
    """A job file asking what ``JOB`` asks (named as the command line names it), with ``fields`` (YAML lines of
    the job mapping, tokens among them where given) in place of the tokens where they state them."""
    tokens = "" if "tokens:" in fields else "  tokens: 1B\n"
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"job:\n  name: llama-3.1-8b\n  model: llama-3.1-8b\n{tokens}{fields}")
    return str(path)


# per case: the command, the flags (beyond the model, and the tokens where they give none), the job file's fields
# that say the same, and where the check pins a layout
CASES = {
    "dataset-tokens": ("check", ["--dataset-tokens", "500M", "--epochs", "3"], "  dataset_tokens: 500M\n  epochs: 3\n"),
    "dataset-tokens-alone": ("solve", ["--dataset-tokens", "2B"], "  dataset_tokens: 2B\n"),
    "epochs-fraction": (
        "options",
        ["--dataset-tokens", "2B", "--epochs", "1.5"],
        "  dataset_tokens: 2B\n  epochs: 1.5\n",
    ),
    "loss": ("check", ["--loss", "fused"], "  loss: fused\n"),
    "loss-solve": ("solve", ["--loss", "chunked"], "  loss: chunked\n"),
    "attention": ("check", ["--attention", "eager"], "  attention: eager\n"),
    "attention-solve": ("solve", ["--attention", "cudnn"], "  attention: cudnn\n"),
    "variable-lengths": ("check", ["--variable-lengths"], "  variable_lengths: true\n"),
    "variable-lengths-options": ("options", ["--variable-lengths"], "  variable_lengths: true\n"),
    "activation-offload": ("check", ["--activation-offload"], "  activation_offload: true\n"),
    "activation-offload-solve": ("solve", ["--activation-offload"], "  activation_offload: true\n"),
    "offload": ("solve", ["--offload", "optimizer"], "  offload: optimizer\n"),
    "offload-auto-options": ("options", ["--offload", "auto"], "  offload: auto\n"),
    "optimizer-implementation": (
        "check",
        ["--optimizer-implementation", "foreach"],
        "  optimizer_implementation: foreach\n",
    ),
}


def asked(case: str) -> tuple[str, list[str], list[str]]:
    """A case's command, its flags (the tokens added where the case's give none) and the check's layout."""
    command, flags, _ = CASES[case]
    tokens = [] if any(f.startswith("--dataset-tokens") for f in flags) else ["--tokens", "1B"]
    return command, ["--model", "llama-3.1-8b", *tokens, *flags], (FSDP if command == "check" else [])


@pytest.mark.parametrize("case", list(CASES))
def test_each_flag_plans_as_the_job_files_field(tmp_path, case):
    command, flags, where = asked(case)
    by_flag = json_answer(command, *flags, *where)
    assert by_flag == json_answer(command, job_file(tmp_path, CASES[case][2]), *where)
    assert by_flag != json_answer(command, *JOB, *where), "the flag changed nothing"


@pytest.mark.parametrize("case", list(CASES))
def test_save_writes_it_so_the_saved_file_asks_the_same(tmp_path, case):
    command, flags, where = asked(case)
    saved = tmp_path / "saved" / "question.yaml"
    saved.parent.mkdir()
    direct = json_answer(command, *flags, *where)
    assert json_answer(command, *flags, *where, "--save", str(saved)) == direct
    written = yaml.safe_load(saved.read_text())["job"]
    expected = yaml.safe_load(f"job:\n{CASES[case][2]}")["job"]
    assert {k: written[k] for k in expected} == expected, written
    assert json_answer(command, str(saved), *where) == direct


def test_dataset_tokens_times_epochs_are_the_tokens():
    """job.tokens = dataset_tokens x epochs: 500M twice, 2B one and a half times, and 0.5T once are the answers
    of --tokens 1B, 3B and 500B."""
    for dataset, epochs, total in (("500M", "2", "1B"), ("2B", "1.5", "3B"), ("0.5T", "1", "500B")):
        by_epochs = json_answer(
            "check", "--model", "llama-3.1-8b", "--dataset-tokens", dataset, "--epochs", epochs, *FSDP
        )
        assert by_epochs == json_answer("check", "--model", "llama-3.1-8b", "--tokens", total, *FSDP), dataset
    once = json_answer("check", "--model", "llama-3.1-8b", "--dataset-tokens", "1B", *FSDP)  # epochs default: 1
    assert once == json_answer("check", *JOB, *FSDP)


def test_epochs_over_a_files_dataset_tokens(tmp_path):
    path = job_file(tmp_path, "  dataset_tokens: 500M\n  epochs: 1\n")
    assert json_answer("check", path, "--epochs", "4", *FSDP) == json_answer(
        "check", "--model", "llama-3.1-8b", "--tokens", "2B", *FSDP
    )


def memory(*args: str) -> dict:
    answer = json_answer("check", *JOB, *args)
    return {**answer["memory_gib"], "micro_batch": answer["strategy"]["micro_batch"]}


def test_a_fused_loss_holds_no_logits():
    one = [*FSDP, "--micro-batch", "1"]
    standard, fused = memory(*one), memory(*one, "--loss", "fused")
    # without logits the last layer's backward peaks on its gradients in flight instead: the block output's and the
    # gated MLP's input gradients, 2h + 4f bytes a token (Llama 3.1 8B: h 4,096, f 14,336)
    in_flight = SEQ * (2 * 4096 + 4 * 14336)
    held = (STANDARD_LOSS_BYTES - FUSED_LOSS_BYTES) * SEQ * VOCAB - in_flight
    assert (standard["activations"] - fused["activations"]) * GIB == pytest.approx(held, rel=1e-9)
    assert memory(*one, "--loss", "standard") == standard  # the default is standard


def test_eager_attention_holds_the_scores():
    flash, eager = memory(*KEPT), memory(*KEPT, "--attention", "eager")
    scores = SCORE_BYTES * HEADS * SEQ * SEQ * LAYERS  # one sequence a micro-batch
    assert (eager["activations"] - flash["activations"]) * GIB == pytest.approx(scores, rel=1e-9)
    cudnn = json_answer("check", *JOB, *FSDP, "--attention", "cudnn")
    assert cudnn["memory_gib"] == json_answer("check", *JOB, *FSDP)["memory_gib"]  # fused kernels: no scores held
    assert cudnn["step_s"] != json_answer("check", *JOB, *FSDP)["step_s"]  # cuDNN's speed, not FlashAttention-2's


def test_variable_lengths_keep_a_second_working_set():
    """Unpacked samples: the allocator keeps about one more copy of the length-dependent tensors (the saved
    activations) in place of the fixed-shape gap, one fp32 copy of the logits."""
    args = [*FSDP, "--recompute", "full", "--micro-batch", "1"]
    packed, unpacked = memory(*args), memory(*args, "--variable-lengths")
    fixed_gap = FP32_BYTES * SEQ * VOCAB
    assert (unpacked["reserve"] - packed["reserve"]) * GIB == pytest.approx(
        packed["activations"] * GIB - fixed_gap, rel=1e-9
    )
    assert memory(*args, "--no-variable-lengths") == packed


def test_activation_offload_frees_gpu_memory_for_pcie_time():
    args = [*FSDP, "--recompute", "full", "--micro-batch", "1"]
    kept, offloaded = memory(*args), memory(*args, "--activation-offload")
    assert offloaded["activations"] < kept["activations"]
    assert memory(*args, "--no-activation-offload") == kept


def test_offload_on_solve_plans_only_offloaded_layouts_or_both():
    plans = {o: json_answer("solve", *JOB, "--offload", o) for o in ("none", "optimizer", "auto")}
    assert plans["none"] == json_answer("solve", *JOB)  # the default: none
    for setting in ("none", "optimizer"):
        assert {p["strategy"]["offload"] for p in plans[setting]["frontier"]} == {setting}

    def cheapest(answer: dict) -> float:
        return min(p["cost_usd"]["p50"] for p in answer["frontier"])

    # auto plans both and keeps the better: no dearer than either alone
    assert cheapest(plans["auto"]) <= min(cheapest(plans["none"]), cheapest(plans["optimizer"]))


def test_check_keeps_its_own_offload_layout_flag():
    r = runner.invoke(app, ["check", "--help"], terminal_width=200)
    assert r.exit_code == 0 and len(re.findall(r"--offload\b", r.output)) == 1, r.output
    pinned = json_answer("check", *JOB, *FSDP, "--offload", "optimizer")
    assert pinned["strategy"]["offload"] == "optimizer"


# each new flag's help, at 80 columns, states the default as the job file's field or the schema's
DEFAULTS = {
    "--dataset-tokens": "Default: the job file's job.dataset_tokens",
    "--epochs": "Default: the job file's job.epochs, else 1.",
    "--loss": "Default: the job file's job.loss, else standard.",
    "--attention": "Default: the job file's job.attention, else flash.",
    "--variable-lengths": "Default: the job file's job.variable_lengths, else off",
    "--activation-offload": "Default: the job file's job.activation_offload, else off.",
    "--offload": "Default: the job file's job.offload, else none.",
    "--context-parallel": "Default: the job file's job.context_parallel, else ring.",
    "--optimizer-implementation": "Default: the job file's job.optimizer_implementation, else fused.",
}


@pytest.mark.parametrize("command", ["check", "solve", "options"])
def test_the_help_at_80_columns_states_each_default(command):
    r = runner.invoke(app, [command, "--help"], terminal_width=80)
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80
    text = " ".join(r.output.split())
    for flag, default in DEFAULTS.items():
        if command == "check" and flag == "--offload":  # check's own layout flag
            continue
        assert flag in r.output and default in text, (flag, text)


BAD = [
    ("check", "--loss", "liger", "job.loss", ["'standard'", "'chunked'", "'flash'", "'fused'"]),
    ("solve", "--attention", "sdpa", "job.attention", ["'flash'", "'cudnn'", "'eager'"]),
    ("solve", "--offload", "cpu", "job.offload", ["'none'", "'optimizer'", "'auto'"]),
    ("solve", "--context-parallel", "ulysses", "job.context_parallel", ["'ring'", "'all_to_all'"]),
    ("check", "--optimizer-implementation", "apex", "job.optimizer_implementation", ["'fused'", "'foreach'"]),
    ("options", "--offload", "", "job.offload", ["'none'", "'optimizer'", "'auto'"]),
    ("check", "--epochs", "0", "job.epochs", ["greater than 0"]),
    ("check", "--epochs", "two", "job.epochs", ["number"]),
    ("solve", "--epochs", "nan", "job.epochs", ["epochs"]),
    ("check", "--epochs", "1,5", "job.epochs", ["1.5", "no grouping"]),  # a decimal comma, not 15 epochs
    ("check", "--epochs", "1_5", "job.epochs", ["1.5", "no grouping"]),
    ("options", "--epochs", "-1", "job.epochs", ["greater than 0"]),
    ("check", "--dataset-tokens", "2X", "job.dataset_tokens", ["k, M, B or T"]),
    ("solve", "--dataset-tokens", "-5B", "job.dataset_tokens", ["greater than 0"]),
]


@pytest.mark.parametrize(("command", "flag", "value", "field", "fix"), BAD, ids=[f"{b[1]}={b[2]}" for b in BAD])
def test_a_bad_value_is_refused_naming_the_flag_and_the_field(command, flag, value, field, fix):
    tokens = (
        ["--dataset-tokens", "1B"] if flag == "--epochs" else ([] if flag == "--dataset-tokens" else ["--tokens", "1B"])
    )
    where = FSDP if command == "check" else []
    r = runner.invoke(app, [command, "--model", "llama-3.1-8b", *tokens, *where, flag, value])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.stdout == ""
    paragraph = r.stderr.strip()
    assert "\n" not in paragraph, paragraph
    assert all(word in paragraph for word in (f"'{flag}'", field, *fix)), paragraph


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--tokens", "1B", "--epochs", "2"], "--epochs"),  # epochs go with dataset tokens
        (["--tokens", "1B", "--dataset-tokens", "1B"], "--tokens"),  # one of the two, not both
        (["--variable-lengths=yes", "--tokens", "1B"], "--variable-lengths"),  # a switch takes no value
    ],
)
def test_a_flag_at_odds_with_the_tokens_or_its_kind_names_the_flag(args, flag):
    r = runner.invoke(app, ["check", "--model", "llama-3.1-8b", *args, *FSDP])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert flag in r.output, r.output


def test_a_question_without_a_file_takes_dataset_tokens_for_tokens():
    r = runner.invoke(app, ["check", "--model", "llama-3.1-8b", *FSDP])
    assert r.exit_code == 2 and "--tokens" in r.output and "--dataset-tokens" in r.output, r.output


def test_the_context_parallel_exchange_plans_as_the_job_files_field(tmp_path):
    # Llama 3.1 8B at 128k tokens over CP 16 on 16 H100: Ulysses' all-to-alls (physics/context_parallel.py) in place of
    # the ring's overlapped K/V passes, from the flag as from job.context_parallel
    where = ["--seq-len", "131072", "--gpus", "16", "--sku", "H100", "--tp", "1", "--cp", "16"]
    where += ["--framework", "megatron", "--micro-batch", "1", "--recompute", "full"]
    flags = ["--model", "llama-3.1-8b", "--tokens", "1B", "--context-parallel", "all_to_all"]
    by_flag = json_answer("check", *flags, *where)
    assert by_flag == json_answer("check", job_file(tmp_path, "  context_parallel: all_to_all\n"), *where)
    assert by_flag != json_answer("check", "--model", "llama-3.1-8b", "--tokens", "1B", *where)
