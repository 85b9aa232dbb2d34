"""Published dense pre-training throughput and peak memory of a ninth set of source families gpuplan never fitted on
(validation/unseen_families_9.yaml; issue 48: "We also measure on published families you have not seen"), where users
stand: the Modalities team's scaling tables (README: GPT-style 2.7B and 6.7B under PyTorch FSDP1 FULL_SHARD and
HYBRID_SHARD on 4 to 512 A100 64GB and H100 64GB in 4-GPU nodes) and its FSDP2 sweep notebook (a 6.1B Llama-style model
on 4 to 128 A100 64GB: tokens/s, torch's peak allocated memory, and the runs that ran out of memory); modalities.
EasyContext's speed table (Llama 2 7B at 64K-700K tokens on 8 A100 under DeepSpeed ZeRO-3 with parameter offload, data
parallel against ring attention; easycontext) is checked against its lines and not scored: gpuplan has no parameter
offload.

Each row is predicted as gpuplan ships (bench/unseen.py: bench/throughput.py's ``checked`` and bench/memory.py's
``predict``, nothing refitted), so the figures pinned below are first-seen errors, first predicted at 14203e8 (the
committed tree exported clean) and held as a record: each threshold sits a little above today's figure, so a change
that worsens them fails here and has to say why; the model is being changed while this file is written, so an
improvement passes.
"""

from __future__ import annotations

import copy
import statistics
import sys

from first_seen import assert_families_new, factor, scored, scored_memory
from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import memory  # noqa: E402
import unseen  # noqa: E402

DATA = unseen.load(ROOT / "validation" / "unseen_families_9.yaml")
RUNS, MEMORY = DATA["runs"], DATA["memory_rows"]
SPEEDS = unseen.speeds(DATA)
MEMORIES = unseen.memories(DATA)

# Modalities src/modalities/utils/mfu.py @ 2029c649: PEAK_PERFORMANCE (bf16, a GPU) and 6 N + 12 L T H FLOPs a token
MODALITIES_PEAK_FLOPS = {"A100": 312e12, "H100": 989e12}
MODALITIES_GPUS_PER_NODE = 4  # Leonardo Booster's and MareNostrum 5's accelerated nodes: 4 GPUs each
# The MFU column's widths and depths (the header's derivation: L H from two sequence lengths, N = 12 L H^2)
MODALITIES_LAYERS_HIDDEN = {"2.7": (32, 2560), "6.7": (32, 4096)}
EASYCONTEXT_GPUS = 8  # the README: "The throughput is measured on 8 A100s"
MIB = 2**20  # Modalities' trainer: torch.cuda.max_memory_allocated(device) / 1024**2, printed "(MB)"
NOTEBOOK = "fsdp2"  # the notebook's rows are named modalities-fsdp2-*


def _cells(quote: str) -> list[str]:
    """A markdown table row's cells."""
    return [c.strip() for c in quote.strip().strip("|").split("|")]


def _speed(name: str):
    return next(s for s in SPEEDS if s.row["name"] == name)


def test_the_families_are_new_and_listed():
    # the family is registered in validation/families.yaml by no one and names a row of no other file of validation/
    assert assert_families_new("unseen_families_9.yaml", DATA) == {"modalities", "easycontext"}
    assert len(RUNS) == 30 and len(MEMORY) == 10 and len(DATA["out_of_memory"]) == 13
    modalities = [r for r in RUNS if r["family"] == "modalities"]
    assert len(modalities) == 25 and all(r["kind"] == "dense" and r["task"] == "pretrain" for r in modalities)
    assert {r["sku"] for r in RUNS} == {"A100-80GB", "H100-SXM"}


def _readme_rows() -> list[dict]:
    return [r for r in RUNS if r["family"] == "modalities" and NOTEBOOK not in r["name"]]


def _notebook_cells(quote: str) -> tuple:
    """A line of the notebook's printed DataFrame: (GPUs, micro-batch, tokens, errors, samples/s, MFU, MiB)."""
    _index, _config, ranks, mbs, seq, _attention, _input, _steps, *rest = quote.split(" ")
    errors, samples_s, mfu, mib = " ".join(rest[:-3]), rest[-3], rest[-2], rest[-1]
    return int(ranks), int(mbs), int(seq), errors, samples_s, mfu, mib


def test_each_readme_row_is_its_table_line():
    rows = _readme_rows()
    assert len(rows) == 15
    for row in rows:
        # # Params (B) | #GPUs | Samples/s | GradAccm | MBS | GBS | Sequence Length | Precision | Sharding | AC | GPU | MFU
        size, gpus, samples_s, accum, mbs, gbs, seq, precision, sharding, ac, gpu, mfu = _cells(row["quote"])
        assert row["gpus"] == int(gpus) and row["seq_len"] == int(seq)
        assert row["micro_batch"] == int(mbs) and row["global_batch"] == int(gbs) and row["layout"]["ga"] == int(accum)
        # Samples/s is the whole job's: GBS = MBS x GradAccm x GPUs on every line
        assert int(gbs) == int(mbs) * int(accum) * int(gpus)
        assert row["tokens_per_s_per_gpu"] == round(float(samples_s) * int(seq) / int(gpus), 3)
        assert precision == "BF_16" and row["precision"] == "bf16"
        assert row["sku"] == {"A100": "A100-80GB", "H100": "H100-SXM"}[gpu]
        assert row["nodes"] * MODALITIES_GPUS_PER_NODE == row["gpus"]
        # FULL_SHARD over every GPU; HYBRID_SHARD within a node of 4, replicated across nodes
        assert row["layout"]["fsdp"] is True
        assert row["layout"].get("fsdp_degree") == {"FULL_SHARD": None, "HYBRID_SHARD": 4}[sharding]
        assert row["layout"]["recompute"] == {"False": "none", "True": "full"}[ac]
        # the shape the MFU column pins: the published MFU is the row's tokens/s x (6 x 12 L H^2 + 12 L T H) / peak
        layers, hidden = MODALITIES_LAYERS_HIDDEN[size]
        assert (row["model"]["layers"], row["model"]["hidden"]) == (layers, hidden)
        flops_per_token = 6 * 12 * layers * hidden**2 + 12 * layers * int(seq) * hidden
        mfu_computed = row["tokens_per_s_per_gpu"] * flops_per_token / MODALITIES_PEAK_FLOPS[gpu]
        assert abs(mfu_computed / float(mfu) - 1) < 0.002, (row["name"], mfu_computed, mfu)


def test_each_notebook_row_is_its_printed_line():
    rows = [r for r in RUNS if NOTEBOOK in r["name"]]
    memory_rows = {m["name"].removesuffix("-memory"): m for m in MEMORY}
    assert {r["name"] for r in rows} == set(memory_rows) and len(rows) == 10
    for row in rows:
        gpus, mbs, seq, errors, samples_s, mfu, mib = _notebook_cells(row["quote"])
        assert errors == "[]" and row["gpus"] == gpus and row["seq_len"] == seq
        assert row["micro_batch"] == mbs and row["global_batch"] == gpus * mbs and row["layout"]["ga"] == 1
        assert row["nodes"] * MODALITIES_GPUS_PER_NODE == gpus
        # train samples/s is the whole job's
        assert row["tokens_per_s_per_gpu"] == round(float(samples_s) * seq / gpus, 3)
        # the shape the MFU pins: GPT2MFUCalculator's 6 N + 12 L T H a token, N every trainable parameter
        model = row["model"]
        layers, hidden = model["layers"], model["hidden"]
        flops_per_token = 6 * model["params"] + 12 * layers * seq * hidden
        mfu_computed = float(samples_s) * seq * flops_per_token / (MODALITIES_PEAK_FLOPS["A100"] * gpus)
        assert abs(mfu_computed / float(mfu) - 1) < 1e-5, (row["name"], mfu_computed, mfu)
        # the memory row is the same run and line: rank 0's peak allocated MiB
        mem = memory_rows[row["name"]]
        assert mem["quote"] == row["quote"] and mem["counts"] == "allocated"
        assert mem["published"]["gpus"] == gpus and mem["published"]["peak_bytes"] == round(float(mib) * MIB)
        assert mem["layout"]["micro_batch"] == mbs and mem["job"]["model"] == model and mem["job"]["seq_len"] == seq


def test_no_row_is_refused_and_every_run_fits():
    assert all(s.predicted is not None for s in SPEEDS)
    assert all(s is not None for _, s, _ in MEMORIES)
    assert all(s.fits for s in SPEEDS)
    assert all(s is not None and s.fits for _, s, _ in MEMORIES)


def test_the_runs_that_ran_out_of_memory_do_not_fit():
    # the notebook's 13 OutOfMemoryError runs (micro-batch 3 and 4 at every size, micro-batch 2 on 4 GPUs): gpuplan,
    # predicting each as its `like` row's run at that micro-batch and GPU count, says none fits a 64 GiB A100, while
    # the 10 runs that ran all fit (the test above). Today: 65.3 GiB allocated for micro-batch 2 on 4 GPUs (the
    # nearest), 68.5-110.1 for the others
    catalog = memory.catalog_with(DATA["extra_skus"])
    rows = {m["name"]: m for m in MEMORY}
    for oom in DATA["out_of_memory"]:
        gpus, mbs, _seq, errors, *_ = _notebook_cells(oom["quote"])
        assert "OutOfMemoryError" in errors and (gpus, mbs) == (oom["gpus"], oom["micro_batch"])
        row = copy.deepcopy(rows[oom["like"]])
        row["published"]["gpus"], row["layout"]["micro_batch"] = gpus, mbs
        assert not memory.predict(row, catalog).fits, oom["name"]


def test_modalities_first_seen():
    # the family's 25 rows: median |error| 7.6 %, worst 1.96
    ratios = scored(SPEEDS, "modalities")
    assert len(ratios) == 25
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.09
    assert max(factor(r) for r in ratios) <= 2.0
    # README rows, 15 (FSDP1, no activation checkpointing, 4096 tokens): median |error| 17.4 %, 0.90 (6.7B on 8 A100:
    # 4,751 published, 4,274 predicted) to 1.96 (2.7B FULL_SHARD on 256 A100: 4,851 published, 9,502 predicted). On
    # A100 the rows up to 64 GPUs sit at 0.90-1.01; every H100 row is over (1.29-1.36 up to 512 GPUs HYBRID_SHARD), the
    # published MFU there being 0.28-0.30 against 0.57-0.69 on A100
    readme = [s.ratio for s in SPEEDS if s.row["family"] == "modalities" and NOTEBOOK not in s.row["name"]]
    assert statistics.median(abs(r - 1) for r in readme) <= 0.19
    assert max(factor(r) for r in readme) <= 2.0
    # notebook rows, 10 (FSDP2, 6.1B, 4096 tokens, 4-128 A100): median |error| 6.5 %, 0.92 (8 GPUs at micro-batch 2:
    # 5,023 published, 4,599 predicted) to 1.09 (128 GPUs at micro-batch 1); every micro-batch-2 row under (0.92-0.94:
    # the published gain from micro-batch 1 to 2 is 1.16-1.19, gpuplan's 1.03-1.04), every micro-batch-1 row from 8 GPUs
    # over (1.02-1.09)
    notebook = [s.ratio for s in SPEEDS if NOTEBOOK in s.row["name"]]
    assert statistics.median(abs(r - 1) for r in notebook) <= 0.08
    assert max(factor(r) for r in notebook) <= 1.12
    # memory (torch's max allocated on rank 0), 10 rows: median |error| 5.1 %, 1.04-1.09, all over (4 GPUs at
    # micro-batch 1 the most: 39.4 GiB published, 42.9 predicted)
    allocated = scored_memory(MEMORIES, "modalities")
    assert len(allocated) == 10
    assert statistics.median(abs(r - 1) for r in allocated) <= 0.06
    assert max(factor(r) for r in allocated) <= 1.12


def test_full_shard_collapse_at_scale_is_missed():
    # the published FULL_SHARD runs lose 35-48 % a GPU from 64 to 256 A100 or 512 H100 at MBS 2 while HYBRID_SHARD
    # (sharded within a node) keeps 85-97 %; gpuplan predicts FULL_SHARD at 256 / 512 GPUs no slower than at 64. Held:
    # the HYBRID_SHARD row at the most GPUs stays within 1.40x, the FULL_SHARD one within 2.0x
    for full, hybrid in (
        ("modalities-2p7b-a100x256-mbs2-full", "modalities-2p7b-a100x256-mbs2-hybrid"),
        ("modalities-2p7b-h100x512-mbs2-full", "modalities-2p7b-h100x512-mbs2-hybrid"),
    ):
        published = _speed(hybrid).row["tokens_per_s_per_gpu"] / _speed(full).row["tokens_per_s_per_gpu"]
        assert 1.3 < published < 1.7, (full, published)
        assert factor(_speed(hybrid).ratio) <= 1.40 and factor(_speed(full).ratio) <= 2.0


def test_each_easycontext_row_is_its_table_line_and_not_scored():
    rows = [r for r in RUNS if r["family"] == "easycontext"]
    assert len(rows) == 5
    for row in rows:
        # Setup | Throughput on 8 A100
        setup, throughput = _cells(row["quote"])
        length, mode = (part.strip() for part in setup.split(","))
        value, unit = throughput.split()
        assert unit == "tokens/s" and row["gpus"] == EASYCONTEXT_GPUS
        assert row["tokens_per_s_per_gpu"] == round(float(value) / EASYCONTEXT_GPUS, 3)
        # the K of the table: 65536 for the data-parallel stage's 64K, thousands for the ring stages (the header)
        assert round(row["seq_len"] / 1000) == int(length.removesuffix("K")) or row["seq_len"] == 65536
        ring = mode == "ring attention"
        assert mode in ("data parallel", "ring attention") and row["layout"]["cp"] == (EASYCONTEXT_GPUS if ring else 1)
        assert row["global_batch"] == (EASYCONTEXT_GPUS // row["layout"]["cp"]) * row["layout"]["ga"]
        # ZeRO-3 with the parameters offloaded: no gpuplan setting, so predicted on the nearest layout, not scored
        assert row["expressible"] is False and "offload_param" in row["not_expressible"]
    assert scored(SPEEDS, "easycontext") == []
