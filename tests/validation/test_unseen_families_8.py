"""Published dense fine-tuning throughput and peak memory of an eighth set of source families gpuplan never fitted on
(validation/unseen_families_8.yaml; issue 48: "We also measure on published families you have not seen"), where users
stand: Liger-Kernel's Hugging Face Trainer logs (full fine-tuning of five 4-8B models under FSDP1 on 4 A100 80GB,
eager transformers against Liger's kernels on one layout; liger-hf-examples) and Transformer Engine's accelerate
tutorial (Llama 2 7B and Llama 3 8B on one GPU: HF BF16, TE BF16 and TE FP8; te-llama-tutorial).

Each row is predicted as gpuplan ships (bench/unseen.py: bench/throughput.py's ``checked`` and bench/memory.py's
``predict``, nothing refitted), so the figures pinned below are first-seen errors, first predicted at 29d8bda (the
committed tree exported clean; the shared working tree, with the lead's uncommitted model edits, gave the same
figures) and held as a record: each threshold sits a little above today's figure, so a change that worsens them fails
here and has to say why; the model is being changed while this file is written, so an improvement passes.
"""

from __future__ import annotations

import re
import statistics
import sys

from first_seen import assert_families_new, factor, scored, scored_memory
from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import unseen  # noqa: E402

DATA = unseen.load(ROOT / "validation" / "unseen_families_8.yaml")
RUNS, MEMORY = DATA["runs"], DATA["memory_rows"]
SPEEDS = unseen.speeds(DATA)
MEMORIES = unseen.memories(DATA)
LIGER_GPUS = 4  # run_patching_methods.sh: torchrun --nnodes=1 --nproc-per-node=4
MIB = 2**20  # Liger-Kernel's callback.py: M_BIN_UNIT = 2**20 ("For memory, we use binary system")
TE_TOKENS_PER_STEP = 8 * 256  # te_llama utils.py: batch_size 8, max_seq_length 256 (every batch at the cap: assumed)
LIGER_MODELS = ("llama", "mistral", "gemma", "qwen2", "phi3")


def _logged(quote: str, key: str) -> float:
    """A figure of the Liger log line the row quotes."""
    match = re.search(rf"'{key}': ([\d.]+)", quote)
    assert match, (key, quote)
    return float(match.group(1))


def _cells(quote: str) -> list[str]:
    """A markdown table row's cells."""
    return [c.strip() for c in quote.strip().strip("|").split("|")]


def _scored_memories(counts: str) -> list:
    """The scored memory rows of one counter (allocated or reserved)."""
    return [s for s in unseen.scored_memories(MEMORIES) if s.row["counts"] == counts]


def _speed(name: str):
    return next(s for s in SPEEDS if s.row["name"] == name)


def test_the_families_are_new_and_listed():
    # neither family is registered in validation/families.yaml nor names a row of any other file of validation/
    assert assert_families_new("unseen_families_8.yaml", DATA) == {"liger-hf-examples", "te-llama-tutorial"}
    assert len(RUNS) == 16 and len(MEMORY) == 20
    # every row is a dense full fine-tune on A100 or H100
    assert all(r["kind"] == "finetune" and r["task"] == "full_finetune" for r in RUNS)
    assert {r["sku"] for r in RUNS} == {"A100-80GB", "H100-SXM"}


def test_each_liger_row_is_its_log_line():
    memory = {m["name"].removesuffix("-memory"): m for m in MEMORY if m["counts"] == "allocated"}
    reserved = {m["name"].removesuffix("-reserved"): m for m in MEMORY if m["counts"] == "reserved"}
    rows = [r for r in RUNS if r["family"] == "liger-hf-examples"]
    assert {r["name"] for r in rows} == set(memory) == set(reserved) and len(rows) == 2 * len(LIGER_MODELS)
    for row in rows:
        # avg_tokens_per_second counts every rank's tokens (the Trainer gathers num_input_tokens_seen): a job figure
        assert row["tokens_per_s_per_gpu"] == round(_logged(row["quote"], "avg_tokens_per_second") / LIGER_GPUS, 3)
        assert row["gpus"] == LIGER_GPUS and row["global_batch"] == LIGER_GPUS * row["micro_batch"]
        # the eager row runs transformers' modules and loss, the Liger row Liger's kernels and fused linear CE
        liger = row["name"].endswith("-liger")
        assert (row["kernels"], row["loss"]) == (("fused", "fused") if liger else ("eager", "standard"))
        mem = memory[row["name"]]
        assert mem["counts"] == "allocated" and mem["published"]["gpus"] == LIGER_GPUS
        assert mem["published"]["peak_bytes"] == round(_logged(mem["quote"], "total_peak_memory_allocated_MB") * MIB)
        assert (mem["job"]["kernels"], mem["job"]["loss"]) == (row["kernels"], row["loss"])
        assert mem["layout"]["micro_batch"] == row["micro_batch"] and mem["layout"]["zero"] == 3
        # the memory row reads the longest measured step, the throughput row the mean one
        assert mem["job"]["seq_len"] >= row["seq_len"]
        # the reserved row is the same run, job and layout, read from the same line
        held = reserved[row["name"]]
        assert (held["quote"], held["job"], held["layout"]) == (mem["quote"], mem["job"], mem["layout"])
        assert held["published"]["peak_bytes"] == round(_logged(held["quote"], "total_peak_memory_reserved_MB") * MIB)
        assert held["published"]["peak_bytes"] >= mem["published"]["peak_bytes"]


def test_each_te_row_is_its_table_cell():
    rows = [r for r in RUNS if r["family"] == "te-llama-tutorial"]
    assert len(rows) == 6
    baseline_ms = {}
    for row in rows:
        # Models | Precision | Step Time (or ms per batch) | Speedup (over baseline)
        label, precision, step_ms, speedup = _cells(row["quote"])
        assert precision.lower() == row["precision"]
        assert row["tokens_per_s_per_gpu"] == round(TE_TOKENS_PER_STEP / (float(step_ms) / 1000), 3)
        assert row["global_batch"] * row["seq_len"] == TE_TOKENS_PER_STEP and row["gpus"] == 1
        named = re.match(r"te-(llama\d-\d+b)-", row["name"])
        assert named, row["name"]
        model = named.group(1)
        if label.startswith("HF"):
            baseline_ms[model] = float(step_ms)
            assert row["kernels"] == "eager"
        else:
            assert row["kernels"] == "fused"
        # the table's speedup is the baseline's step time over the row's
        assert abs(baseline_ms[model] / float(step_ms) - float(speedup)) < 0.006, row["name"]


def test_no_row_is_refused_and_every_run_fits():
    assert all(s.predicted is not None for s in SPEEDS)
    assert all(s is not None for _, s, _ in MEMORIES)
    assert all(s.fits for s in SPEEDS)


def test_liger_first_seen():
    # 10 rows (FSDP1 FULL_SHARD, 4 A100 80GB, full activation checkpointing): median |error| 18.6 %, 1.00 (Llama 3 8B
    # with Liger) to 1.51 (Gemma 7B eager: 1,800 published, 2,713 predicted); Phi-3.5-mini eager 1.49. Every eager row
    # is over (1.14-1.51), every Liger row less so (1.00-1.22): on A100 job.kernels eager costs nothing (the predicted
    # speed of each eager row is its fused one's), while Liger's kernels and fused linear CE gain 1.10-1.28.
    # The left-padded batch's mask sends SDPA to its memory-efficient kernel over every block (attention: efficient,
    # physics/attention.py): median 16.0 %, worst 1.47.
    ratios = scored(SPEEDS, "liger-hf-examples")
    assert len(ratios) == 10
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.17
    assert max(factor(r) for r in ratios) <= 1.5
    # memory (torch's max allocated), 10 rows: median |error| 3.0 %, 1.01-1.15 except Phi-3.5-mini with Liger, 0.71
    # (41.8 GiB published, 29.9 predicted: at 128 x 484 tokens a GPU gpuplan's activations are 17.0 GiB)
    allocated = [s.ratio for s in _scored_memories("allocated")]
    assert len(allocated) == 10 and len(scored_memory(MEMORIES, "liger-hf-examples")) == 20
    assert statistics.median(abs(r - 1) for r in allocated) <= 0.04
    assert max(factor(r) for r in allocated) <= 1.45
    # the same runs' reserved peaks (torch.cuda.max_memory_reserved), 10 rows: median |error| 12.0 %, 0.76 (Phi-3.5-mini
    # with Liger: 68.4 GiB published, 52.2 predicted) to 1.20 (Qwen2 7B eager: 64.7 published, 77.4 predicted); the
    # Liger rows all under (0.76-0.96): gpuplan's reserve over the allocated peak is smaller than the allocator's
    # cache of the padded batches' changing shapes
    held = [s.ratio for s in _scored_memories("reserved")]
    assert len(held) == 10
    assert statistics.median(abs(r - 1) for r in held) <= 0.13
    assert max(factor(r) for r in held) <= 1.35


def test_the_liger_gain_is_published_and_missed():
    # each model ran eager and with Liger on one layout: the logs gain 1.10 (Qwen2) to 1.28 (Gemma) tokens/s per GPU;
    # gpuplan predicts 0.995-1.016 (the pairs' mean padded lengths differ a little), so its pair ratio over the
    # published one is 0.78 (Gemma) to 0.92 (Qwen2). Held: no pair further off than 0.77
    for model in LIGER_MODELS:
        eager, liger = _speed(f"liger-hf-{model}-fsdp-a100x4-eager"), _speed(f"liger-hf-{model}-fsdp-a100x4-liger")
        published = liger.row["tokens_per_s_per_gpu"] / eager.row["tokens_per_s_per_gpu"]
        assert 1.09 < published < 1.30, model
        assert (liger.predicted / eager.predicted) / published >= 0.77, model


def test_te_first_seen():
    # 6 rows (one H100 assumed, batch 8 x 256, pure bf16 AdamW): median |error| 8.7 %, 1.01 (TE BF16, Llama 3 8B) to
    # 1.19 (TE FP8, Llama 2 7B: 12,800 published, 15,182 predicted); the HF baselines 1.13 (Llama 2) and 1.04 (Llama 3)
    ratios = scored(SPEEDS, "te-llama-tutorial")
    assert len(ratios) == 6
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.10
    assert max(factor(r) for r in ratios) <= 1.22


def test_the_fp8_gain_on_one_layout():
    # TE FP8 over TE BF16, one GPU, one layout: the notebook gains 1.16 (Llama 2 7B, 185 -> 160 ms) and 1.17 (Llama 3
    # 8B, 217 -> 185 ms); gpuplan predicts 1.345 and 1.353. Held: the predicted gain above the published one by no
    # more than 1.17x (today 1.163 and 1.153), and FP8 never predicted slower
    for model in ("llama2-7b", "llama3-8b"):
        bf16, fp8 = _speed(f"te-{model}-te-bf16-h100x1"), _speed(f"te-{model}-te-fp8-h100x1")
        published = fp8.row["tokens_per_s_per_gpu"] / bf16.row["tokens_per_s_per_gpu"]
        predicted = fp8.predicted / bf16.predicted
        assert 1.15 < published < 1.18, model
        assert predicted > 1.0 and predicted / published <= 1.17, model
