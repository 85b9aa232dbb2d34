"""Published throughput and peak memory of an eleventh set of source families gpuplan never fitted on
(validation/unseen_families_11.yaml; issue 48: "We also measure on published families you have not seen"), where users
stand: Colossal-AI's own Llama benchmark (benchmark.py's global samples/s, TFLOPS by Megatron's count and
max_memory_allocated on rank 0) on H200 and B200 under ZeRO-2 and ZeRO-1 + TP + PP, and its 2023 Gemini run on 32 A800
(colossalai-llama-benchmark); Alibaba's Megatron-LLaMA, LLaMA-13B on 32 to 512 A100-80GB with Megatron's
DistributedOptimizer against its overlapped one (megatron-llama); DeepSpeed's ZenFlow core-binding blog, Qwen2.5-3B under
ZeRO-2 with CPU optimizer offload on 2 A100-40GB (deepspeed-zenflow-blog); and Megatron-DeepSpeed's rebase notes, GPT-3
125M and 2.7B on 8 A100 with TP 2 x PP 2 with and without FlashAttention (megatron-deepspeed-rebase); Megatron-LM's
README, GPT-3 175B on 1024 A100 (megatron-lm-readme); and Lightning Thunder's benchmarking docs, LitGPT's Llama 2 7B
trained in pure bf16 on one H100 (thunder-benchmark-docs); and ColossalChat's SFT benchmark, Llama 2 7B's allocated peak on 2
and 4 H800 under ZeRO-2 with and without CPU offload, full and LoRA (colossalchat-benchmarks, memory only).

Each row is predicted as gpuplan ships (bench/unseen.py: bench/throughput.py's ``checked`` and bench/memory.py's
``predict``, nothing refitted), so the figures pinned below are first-seen errors, first predicted at 7d4a959 (the
Colossal-AI rows), held as a record: each threshold sits a little above today's figure, so a change that worsens them
fails here and has to say why; an improvement passes. Every row is either scored or listed apart with the reason.
The Megatron-LLaMA, ZenFlow and Megatron-DeepSpeed rows were first predicted at 5898a7b, the Megatron-LM, Thunder and
ColossalChat rows at 7982618 (its host floor under eager steps moved none of this file's figures: checked against
ecc9f66), each on the committed tree exported clean.
"""

from __future__ import annotations

import re
import statistics
import sys

from first_seen import assert_families_new, factor, scored, scored_memory
from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import unseen  # noqa: E402

from optimizer import load_catalog  # noqa: E402

DATA = unseen.load(ROOT / "validation" / "unseen_families_11.yaml")
RUNS, MEMORY = DATA["runs"], DATA["memory_rows"]
SPEEDS = unseen.speeds(DATA)
MEMORIES = unseen.memories(DATA)

COLOSSAL = "colossalai-llama-benchmark"
MLLAMA = "megatron-llama"
ZENFLOW = "deepspeed-zenflow-blog"
MDSR = "megatron-deepspeed-rebase"
MLM = "megatron-lm-readme"
THUNDER = "thunder-benchmark-docs"
CCHAT = "colossalchat-benchmarks"
MIB = 2**20
GIB = 2**30
# performance_evaluator.py's Megatron count a token: 24 x (3 + checkpointing) x L h^2 (1 + s / 6h + V / 16 L h)
CHECKPOINTED, NOT_CHECKPOINTED = 4, 3
# README.md's Parallelism column: 'zero2(dp8)', 'zero2', 'zero1(dp2)+tp2+pp4'
PARALLELISM = re.compile(r"zero(\d)(?:\(dp(\d+)\))?(?:\+tp(\d+)\+pp(\d+))?")
# examples/language/llama2/README.md's result line (Gemini, 32 A800)
GEMINI = re.compile(r"max memory usage:\s+([\d.]+) MB, throughput:\s+([\d.]+) samples/s, TFLOPS/GPU:\s+([\d.]+)")
GEMINI_GPUS = 32  # the README: '4 computing nodes with 32 A800 GPUs in total'


def _family(family: str) -> list[dict]:
    return [r for r in RUNS if r["family"] == family]


def _cells(quote: str) -> list[str]:
    return [c.strip() for c in quote.strip().strip("|").split("|")]


def _megatron_flops_per_token(model: dict, seq: int, factor_: int) -> float:
    layers, hidden, vocab = model["layers"], model["hidden"], model["vocab"]
    return 24 * factor_ * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def test_the_families_are_new_and_listed():
    # the family is registered in validation/families.yaml by no one and names a row of no other file of validation/
    families = (COLOSSAL, MLLAMA, ZENFLOW, MDSR, MLM, THUNDER)
    assert assert_families_new("unseen_families_11.yaml", DATA) == {*families, CCHAT}
    assert [len(_family(f)) for f in families] == [5, 6, 2, 4, 1, 1]
    assert len(RUNS) == 19 and len(MEMORY) == 13
    skus = {"H100-SXM", "H200", "B200", "A800-80GB", "A100-80GB", "A100-80GB-800G", "A100-40GB"}
    assert {r["sku"] for r in RUNS} == skus
    # no row is refused, and every row is scored or listed apart with its reason
    assert all(s.predicted is not None for s in SPEEDS)
    assert all(m is not None for _, m, _ in MEMORIES)
    for row in RUNS + MEMORY:
        assert row.get("expressible", True) or len(row.get("not_expressible", "")) > 40, row["name"]
    # every memory row is a throughput row's run (Colossal-AI's and Thunder's), or ColossalChat's, which prints none
    memory_runs = {r["name"] for r in _family(COLOSSAL) + _family(THUNDER)}
    paired = [m for m in MEMORY if m["family"] != CCHAT]
    assert {m["name"].removesuffix("-memory") for m in paired} == memory_runs


def test_each_colossal_table_row_is_its_line():
    rows = [r for r in _family(COLOSSAL) if "gemini" not in r["name"]]
    assert len(rows) == 4
    memory = {m["name"].removesuffix("-memory"): m for m in MEMORY}
    for row in rows:
        # GPU | GPUs | Model Size | Parallelism | Batch Size per DP | Seqlen | Throughput | TFLOPS/GPU | Peak Mem(MiB)
        gpu, gpus, size, parallelism, batch, seq, samples, tflops, peak_mib = _cells(row["quote"])
        assert row["sku"] == gpu and row["gpus"] == int(gpus) and row["seq_len"] == int(seq)
        assert abs(row["model"]["params"] / 1e9 - float(size.removesuffix("B"))) < 1.1  # 6.74B '7B', 68.98B '70B'
        zero, dp, tp, pp = PARALLELISM.fullmatch(parallelism).groups()
        layout = row["layout"]
        assert layout["zero"] == int(zero) and layout["tp"] == int(tp or 1) and layout["pp"] == int(pp or 1)
        data_parallel = row["gpus"] // (layout["tp"] * layout["pp"])
        # the B200 7B line's 'zero1(dp2)+tp2+pp4' is 16 GPUs on its 8: laid out with one data-parallel rank, apart
        printed = int(dp or data_parallel) * layout["tp"] * layout["pp"]
        assert printed == row["gpus"] or (not row.get("expressible", True) and "16 GPUs" in row["not_expressible"])
        # the job's samples a second over its GPUs; the batch a data-parallel rank, no accumulation outside the pipe
        per_second = float(samples.removesuffix("samp/s").strip())
        assert row["tokens_per_s_per_gpu"] == round(per_second * row["seq_len"] / row["gpus"], 3)
        assert row["global_batch"] == int(batch) * data_parallel
        assert row["global_batch"] == data_parallel * row["micro_batch"] * layout["ga"]
        # the TFLOPS cell is Megatron's count with checkpointing's 4 (within the throughput's rounding), not with 3
        checked = row["tokens_per_s_per_gpu"] * _megatron_flops_per_token(row["model"], row["seq_len"], CHECKPOINTED)
        assert abs(checked / 1e12 / float(tflops) - 1) < 0.002, row["name"]
        plain = row["tokens_per_s_per_gpu"] * _megatron_flops_per_token(row["model"], row["seq_len"], NOT_CHECKPOINTED)
        assert plain / 1e12 / float(tflops) < 0.8
        assert layout["recompute"] == "full"
        # the memory row is the same line's Peak Mem(MiB), max_memory_allocated on rank 0
        mem = memory[row["name"]]
        assert mem["published"]["peak_gib"] == round(float(peak_mib) * MIB / GIB, 2) and mem["counts"] == "allocated"
        assert mem["published"]["gpus"] == row["gpus"] and mem["published"]["gpu"] == row["sku"]
        assert mem["layout"]["micro_batch"] == row["micro_batch"] and mem["layout"]["grad_accum"] == layout["ga"]
        assert mem.get("expressible", True) is row.get("expressible", True)


def test_the_colossal_70b_lines_contradict_their_text():
    lines = {r["name"]: _cells(r["quote"]) for r in _family(COLOSSAL) if "-70b-" in r["name"]}
    assert len(lines) == 2 and all(cells[0] == "H200" for cells in lines.values())
    zero2 = next(c for n, c in lines.items() if "zero2" in n)
    three_d = next(c for n, c in lines.items() if "tp2" in n)
    # the text: 'For the 70B model on 16 cards, the B200 ... over 70% higher throughput' compares these two lines
    assert float(three_d[6].split()[0]) / float(zero2[6].split()[0]) > 1.7
    # the ZeRO-2 line's peak is more than an H200 holds (the catalog's 143,771 MiB as nvidia-smi reports it)
    h200 = next(s for s in load_catalog("default").skus if s.name == "H200")
    assert float(zero2[8]) * MIB > h200.memory_reported_bytes
    # ... and less than its replicated bf16 weights plus fp32 master and moments over 16 ranks
    params = next(r for r in RUNS if r["name"].endswith("70b-h200x16-zero2-b48"))["model"]["params"]
    assert float(zero2[8]) * MIB < 2 * params + 12 * params / 16
    assert all(
        not r.get("expressible", True) for r in RUNS + MEMORY if "-70b-" in r["name"] and r["family"] == COLOSSAL
    )


def test_the_gemini_row_is_its_readme_line():
    (row,) = [r for r in _family(COLOSSAL) if "gemini" in r["name"]]
    peak_mib, samples, tflops = (float(x) for x in GEMINI.search(row["quote"]).groups())
    assert row["gpus"] == GEMINI_GPUS and row["seq_len"] == 4096 and row["micro_batch"] == 16
    assert row["tokens_per_s_per_gpu"] == round(samples * row["seq_len"] / row["gpus"], 3)
    assert row["global_batch"] == row["micro_batch"] * row["gpus"]
    # performance_evaluator.py @ 8d7b02290: 2 x (3 + checkpointing) x N FLOPs a token
    assert abs(row["tokens_per_s_per_gpu"] * 2 * 4 * row["model"]["params"] / 1e12 / tflops - 1) < 0.001
    (mem,) = [m for m in MEMORY if "gemini" in m["name"]]
    assert mem["published"]["peak_gib"] == round(peak_mib * MIB / GIB, 2) and mem["counts"] == "allocated"
    assert not row.get("expressible", True) and not mem.get("expressible", True)


def test_colossal_first_seen():
    # throughput, 1 scored row: Llama 2 7B under ZeRO-2 on 8 H200 at 36 x 4096 with checkpointing 0.86 (8,771
    # published, 7,586 predicted), though gpuplan says it does not fit (next test)
    ratios = scored(SPEEDS, COLOSSAL)
    assert len(ratios) == 1
    assert max(factor(r) for r in ratios) <= 1.20
    # listed apart: the B200 7B pipeline at --mbs 1 1.21, the 70B lines 1.06 (ZeRO-2) and 0.57 (3D), Gemini 0.72
    apart = [s for s in SPEEDS if s.row["family"] == COLOSSAL and not s.scored]
    assert len(apart) == 4 and all(s.predicted for s in apart)
    # memory, 1 scored row: 1.21 (116.2 GiB allocated published, 141.0 predicted: 114.3 GiB of activations, the
    # logits' 12 bytes an entry over 36 x 4096 tokens 52.7 GiB of them); apart: Gemini 1.01, the B200 pipeline 0.14
    allocated = scored_memory(MEMORIES, COLOSSAL)
    assert len(allocated) == 1
    assert max(factor(r) for r in allocated) <= 1.25


def test_colossal_zero2_run_that_ran_is_said_to_fit():
    # gpuplan's verdict on a run that ran: the ZeRO-2 7B step at 36 x 4096 on an H200. First predicted at 141 GiB,
    # over the GPU ("does not fit"); since DeepSpeed-style ZeRO-2's gradient partitions exist only inside the step
    # (physics/deepspeed_memory.py, b9aad4b) 136 GiB: check says it fits (within the H200's reported 140 GiB), still
    # above the 116 GiB it allocated and above the 141 GB (131 GiB) the memory row's capacity counts
    (speed,) = [s for s in SPEEDS if s.row["name"] == "colossalai-llama2-7b-h200x8-zero2-b36"]
    assert speed.scored and speed.fits
    (mem,) = [m for _, m, _ in MEMORIES if m is not None and m.row["name"].startswith(speed.row["name"])]
    assert 1.0 < mem.predicted_gib / mem.published_gib < 1.2


# README.md's 32-GPU table: 'Training cost | 49.7 hours ($5482) | 40.3 hours ($4445)', 'Training Model TFLOPS | 146 |180'
MLLAMA_TOKENS = 10e9  # the README: 'when consuming 10 billion tokens'
MLLAMA_HOURS = re.compile(r"([\d.]+) hours \(\$\d+\)")
MLLAMA_TFLOPS = {"hf-deepspeed": 146, "distopt": 180}
MLLAMA_GLOBAL_BATCH = 2048  # 'The global batch size is set to 2048 via gradient accumulation (GA)'
MLLAMA_SCALING = re.compile(r"\| (\d+) \(([\d.]+) days\) \| (\d+) \(([\d.]+) days\) \|")
MLLAMA_TRAINING_TOKENS = 1e12  # LLaMA-13B's 1T tokens, which each cell's days are at its rate


def test_each_megatron_llama_row_is_its_table_cell():
    rows = {r["name"]: r for r in _family(MLLAMA)}
    cost = rows["mllama-13b-a100x32-distopt"]["quote"]
    hf_hours, megatron_hours = (float(x) for x in MLLAMA_HOURS.findall(cost))
    # the hours are the measured rates': their ratio is the TFLOPS cells' inverse ratio
    assert round(hf_hours / megatron_hours, 3) == round(MLLAMA_TFLOPS["distopt"] / MLLAMA_TFLOPS["hf-deepspeed"], 3)
    for name, hours in (
        ("mllama-13b-a100x32-distopt", megatron_hours),
        ("mllama-13b-a100x32-hf-deepspeed-zero2", hf_hours),
    ):
        row = rows[name]
        assert row["tokens_per_s_per_gpu"] == round(MLLAMA_TOKENS / (hours * 3600) / row["gpus"], 3)
    for row in rows.values():
        assert row["global_batch"] == MLLAMA_GLOBAL_BATCH and row["seq_len"] == 2048
        # the README's '8xA100-80GB devices and 4x200Gbps RDMA inter-bandwidth': 12.5 GB/s a GPU
        assert row["sku"] == "A100-80GB-800G" and "4x200Gbps" in row["sku_source"]
        # Megatron-LM's fp32 reduce under --bf16; the plain DistributedOptimizer hides nothing
        assert row.get("gradient_dtype") == "fp32" or "deepspeed" in row["name"]
        assert ("overlap" in row) is (row["name"].endswith("-distopt") and "overlapped" not in row["name"])
        layout = row["layout"]
        data_parallel = row["gpus"] // (layout["tp"] * layout["pp"])
        assert row["global_batch"] == data_parallel * row["micro_batch"] * layout["ga"]
        assert row["nodes"] * 8 == row["gpus"]
        if "-hf-" not in row["name"]:  # LLaMA_13_slurm.sh's layout: TP 2, micro-batch 4, selective recompute, ZeRO-1
            assert layout["tp"] == 2 and row["micro_batch"] == 4 and layout["recompute"] == "selective"
            assert layout["zero"] == 1 and row["framework"] == "megatron" and row.get("expressible", True)
    scaling = [r for r in rows.values() if r["gpus"] >= 256]
    assert len(scaling) == 4
    for row in scaling:
        first, first_days, second, second_days = MLLAMA_SCALING.search(row["quote"]).groups()
        rate, days = (first, first_days) if row["gpus"] == 256 else (second, second_days)
        assert row["tokens_per_s_per_gpu"] == float(rate)
        # each cell's days are LLaMA-13B's 1T tokens at that rate on that many GPUs
        # (to the tenth printed, within a tenth: 12.25 reads 12.2, 27.74 reads 27.8)
        assert abs(MLLAMA_TRAINING_TOKENS / (float(rate) * row["gpus"] * 86400) - float(days)) <= 0.1
        overlapped = "overlapped" in row["name"]
        assert ("Overlapped" in row["quote"]) is overlapped
        assert ("OverlappedDistributedOptimizer" in row["framework_source"]) is overlapped


def test_megatron_llama_first_seen():
    # 5 scored rows: 32 GPUs (DistributedOptimizer, accumulation 32) 1.11 (2,154 published, 2,384 predicted); 256 and
    # 512 GPUs (accumulation 4 and 2) overlapped 1.16 and 1.08, DistributedOptimizer 1.25 and 1.23. First predicted
    # at one figure, 2,438, for all five (the catalog's 25 GB/s a GPU, a bf16 reduce and the fitted overlap hid the
    # reduce-scatter and all-gather at any accumulation); with the README's 4 x 200 Gb/s a node, Megatron-LM's fp32
    # reduce under --bf16 and the DistributedOptimizer's reduce after the last backward (overlap 0) the rate falls
    # with the accumulation as published (2,154 -> 1,430 without the overlap, -> 1,845 with it), less steeply
    ratios = scored(SPEEDS, MLLAMA)
    assert len(ratios) == 5
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.17
    assert max(factor(r) for r in ratios) <= 1.27
    predicted = {s.row["name"]: s.predicted for s in SPEEDS if s.scored and s.row["family"] == MLLAMA}
    at_32 = predicted["mllama-13b-a100x32-distopt"]
    assert predicted["mllama-13b-a100x512-overlapped-distopt"] < 0.9 * at_32  # the exposed reduce at accumulation 2
    assert predicted["mllama-13b-a100x512-distopt"] < predicted["mllama-13b-a100x512-overlapped-distopt"]


# blogs/zenflow-corebinding: '| No bind core| 2707.32ms | 3127.24ms | 2826.04ms | 2887ms |'
ZENFLOW_RUNS = re.compile(r"([\d.]+)ms")
ZENFLOW_TRAIN_BATCH, ZENFLOW_MAX_LENGTH = 8, 512  # zo_config.json train_batch_size; preprocess_alpaca max_length


def test_each_zenflow_row_is_its_table_line():
    rows = _family(ZENFLOW)
    assert len(rows) == 2
    for row in rows:
        *runs, average = (float(x) for x in ZENFLOW_RUNS.findall(row["quote"]))
        assert len(runs) == 3 and abs(sum(runs) / 3 - average) < 0.5  # the printed average is the runs' mean
        tokens = ZENFLOW_TRAIN_BATCH * ZENFLOW_MAX_LENGTH
        assert row["tokens_per_s_per_gpu"] == round(tokens / (average / 1000) / row["gpus"], 3)
        assert row["global_batch"] == ZENFLOW_TRAIN_BATCH == row["gpus"] * row["micro_batch"] * row["layout"]["ga"]
        assert row["layout"]["offload"] == "optimizer" and row["layout"]["zero"] == 2
        assert row.get("expressible", True) is ("bind-cores" not in row["name"])
    # Qwen2.5-3B's parameters from its config (q/k/v biases, tied embedding)
    m = rows[0]["model"]
    kv = m["kv_heads"] * m["head_dim"]
    layer = 2 * m["hidden"] ** 2 + 2 * m["hidden"] * kv + m["hidden"] + 2 * kv + 3 * m["hidden"] * m["ffn_hidden"]
    assert m["params"] == m["layers"] * (layer + 2 * m["hidden"]) + m["vocab"] * m["hidden"] + m["hidden"]


def test_zenflow_first_seen():
    # 1 scored row: ZeRO-Offload without core binding 0.97 (709 published, 685 predicted); listed apart, the same
    # layout with --bind_cores_to_rank 0.83 (820 published: binding made the host's Adam 14 % faster)
    (ratio,) = scored(SPEEDS, ZENFLOW)
    assert factor(ratio) <= 1.06


# examples_deepspeed/rebase/README.md: 'from 25 to 32', '121 TFLOPs to 132 TFLOPs'
MDSR_125M = re.compile(r"\(TFLOPs per GPU\) from (\d+) to (\d+)")
MDSR_2P7B = re.compile(r"training throughput (\d+) TFLOPs to (\d+) TFLOPs")
MDSR_VOCAB = 50257  # GPT-2's, padded to a multiple of 128 x TP 2


def _mdsr_flops_per_token(model: dict, seq: int) -> float:
    """throughput_calculator's count a token with checkpointing (factor 4)."""
    return _megatron_flops_per_token(model, seq, CHECKPOINTED)


def test_each_megatron_deepspeed_row_is_its_sentence():
    rows = {r["name"].rsplit("-", 1)[1] + "-" + r["name"].split("-")[2]: r for r in _family(MDSR)}
    assert set(rows) == {"unfused-125m", "flash1-125m", "flash1-2p7b", "flash2-2p7b"}
    quote = rows["unfused-125m"]["quote"]
    unfused, flash1_small = (int(x) for x in MDSR_125M.search(quote).groups())
    flash1_large, flash2 = (int(x) for x in MDSR_2P7B.search(quote).groups())
    printed = {"unfused-125m": unfused, "flash1-125m": flash1_small, "flash1-2p7b": flash1_large, "flash2-2p7b": flash2}
    for key, row in rows.items():
        assert row["quote"] == quote
        m = row["model"]
        assert m["vocab"] == -(-MDSR_VOCAB // 256) * 256  # _vocab_size_with_padding: 50432
        # GPT-3 layers (biases, two LayerNorms, 4h MLP), tied embedding, learned positions of 2048
        h = m["hidden"]
        layer = 4 * h * h + 4 * h + 8 * h * h + 4 * h + h + 4 * h
        assert m["params"] == m["layers"] * layer + m["vocab"] * h + row["seq_len"] * h + 2 * h
        tokens = printed[key] * 1e12 / _mdsr_flops_per_token(m, row["seq_len"])
        assert row["tokens_per_s_per_gpu"] == round(tokens, 3)
        layout = row["layout"]
        assert (layout["tp"], layout["pp"], layout["zero"], row["micro_batch"]) == (2, 2, 1, 2)
        assert row["global_batch"] == 2 * row["micro_batch"] * layout["ga"] and layout["recompute"] == "full"
        assert row.get("expressible", True) is ("flash1" not in key)
        assert row["attention"] == ("eager" if key.startswith("unfused") else "flash")


def test_megatron_deepspeed_first_seen():
    # 2 scored rows: 125M without FlashAttention 1.94 (20,595 published from 25 TFLOPs, 39,970 predicted: a 125M model
    # split over TP 2 x PP 2 at micro-batch 2 spends its step on small all-reduces, pipeline hand-offs and launches),
    # 2.7B with FlashAttention-2 1.27 (5,595 from 132 TFLOPs, 7,115); apart, FlashAttention 1.x: 125M 3.02, 2.7B 1.39
    ratios = {s.row["name"]: s.ratio for s in SPEEDS if s.scored and s.row["family"] == MDSR}
    assert len(ratios) == 2
    assert factor(ratios["mdsr-gpt3-125m-a100x8-tp2-pp2-unfused"]) <= 2.0
    assert factor(ratios["mdsr-gpt3-2p7b-a100x8-tp2-pp2-flash2"]) <= 1.30
    apart = [s for s in SPEEDS if s.row["family"] == MDSR and not s.scored]
    assert len(apart) == 2 and all(s.predicted for s in apart)


# README.md @ 152aab30: 'With full global batch size of 1536 on 1024 A100 GPUs, each iteration takes around 32 seconds
# resulting in 138 teraFLOPs per GPU which is 44% of the theoretical peak FLOPs.'
MLM_SENTENCE = re.compile(
    r"global batch size of (\d+) on (\d+) A100 GPUs, each iteration takes around (\d+) seconds resulting in (\d+) "
    r"teraFLOPs per GPU which is (\d+)% of the theoretical peak"
)
A100_PEAK_TFLOPS = 312.0  # dense bf16/fp16


def test_the_megatron_readme_row_is_its_sentence():
    (row,) = _family(MLM)
    batch, gpus, seconds, tflops, percent = (int(x) for x in MLM_SENTENCE.search(row["quote"]).groups())
    assert row["global_batch"] == batch and row["gpus"] == gpus
    assert row["tokens_per_s_per_gpu"] == batch * row["seq_len"] / seconds / gpus
    # the sentence's TFLOPs are the Megatron paper's count with checkpointing at that rate, its 44 % of the A100's 312
    counted = row["tokens_per_s_per_gpu"] * _megatron_flops_per_token(row["model"], row["seq_len"], CHECKPOINTED)
    assert round(counted / 1e12) == tflops and round(100 * tflops / A100_PEAK_TFLOPS) == percent
    layout = row["layout"]
    assert gpus // (layout["tp"] * layout["pp"]) * row["micro_batch"] * layout["ga"] == batch
    assert m_params(row["model"]) == row["model"]["params"]


def m_params(m: dict) -> int:
    """A GPT-3 layer stack's parameters (biases, two LayerNorms, a 4h MLP), tied embedding, 2048 learned positions."""
    h = m["hidden"]
    return m["layers"] * (12 * h * h + 13 * h) + m["vocab"] * h + 2048 * h + 2 * h


def test_megatron_readme_first_seen():
    # 1 row: 1.13 (96 tokens/s a GPU published, 109 predicted) on TP 8 x PP 16 x DP 8 with full recompute
    (ratio,) = scored(SPEEDS, MLM)
    assert factor(ratio) <= 1.16


# docs/source/intermediate/benchmarking.rst's printout (one line a field)
THUNDER_FIELD = re.compile(r"([A-Za-z/ ]+): ([\w.-]+)")


def test_the_thunder_row_is_its_printout():
    (row,) = _family(THUNDER)
    fields = dict(THUNDER_FIELD.findall(row["quote"].replace(" | ", "\n")))
    assert fields["Model name"] == "Llama-2-7b-hf" and fields["Compiler"] == "thunder"
    assert int(fields["Seq Length"]) == row["seq_len"] and int(fields["Micro BS"]) == row["micro_batch"]
    assert int(fields["Global BS"]) == row["global_batch"] and int(fields["Number of Layers"]) == row["model"]["layers"]
    assert fields["Number of parameters"] == f"{row['model']['params'] / 1e9:.2f}B"
    assert row["tokens_per_s_per_gpu"] == float(fields["Tokens/s/GPU"]) == float(fields["Tokens/s"])
    # the mean iteration time gives the same rate within 0.1 %
    per_iteration = row["seq_len"] * row["global_batch"] / (float(fields["Average iter time"]) / 1000)
    assert abs(per_iteration / row["tokens_per_s_per_gpu"] - 1) < 0.001
    (mem,) = [m for m in MEMORY if m["family"] == THUNDER]
    assert mem["published"]["peak_gb"] == float(fields["Memory used"]) and mem["counts"] == "allocated"
    assert row["master_weights"] is False and mem["job"]["master_weights"] is False


def test_thunder_first_seen():
    # throughput 0.96 (10,690 published, 10,274 predicted); memory 0.91 (64.22 GB = 59.8 GiB allocated, 54.4 predicted)
    (ratio,) = scored(SPEEDS, THUNDER)
    assert factor(ratio) <= 1.06
    (memory_ratio,) = scored_memory(MEMORIES, THUNDER)
    assert factor(memory_ratio) <= 1.12


# applications/ColossalChat/examples/README.md: '- 4 H800 GPUs' then '  - zero2, micro batch size=8, VRAM Usage=43446.31 MB'
CCHAT_HEADING = re.compile(r"- (\d) H800 GPUs?")
CCHAT_LINE = re.compile(
    r"  - (zero2|zero2-cpu|zero2_cpu), micro batch size=(\d+), (?:lora_rank=(\d+), )?VRAM Usage=([\d.]+) MB"
)


def test_each_colossalchat_row_is_its_readme_line():
    rows = [m for m in MEMORY if m["family"] == CCHAT]
    assert len(rows) == 7
    for row in rows:
        heading, line = row["quote"].split("\n")
        gpus = int(CCHAT_HEADING.fullmatch(heading).group(1))
        plugin, micro_batch, lora_rank, mib = CCHAT_LINE.fullmatch(line).groups()
        assert row["published"] == {"gpu": "H800", "gpus": gpus, "peak_gib": round(float(mib) * MIB / GIB, 2)}
        assert row["counts"] == "allocated"
        layout, job = row["layout"], row["job"]
        assert layout["micro_batch"] == int(micro_batch) and layout["zero"] == 2 and layout["grad_accum"] == 1
        # zero2-cpu / zero2_cpu: LowLevelZeroPlugin(cpu_offload=True), the optimizer on the host
        assert (layout.get("offload") == "optimizer") is plugin.endswith("cpu")
        assert job["method"] == ("lora" if lora_rank else "full") and job.get("lora_rank") == (
            int(lora_rank) if lora_rank else None
        )
        # 'we use H800 GPUs with 80GB VRAM and enable gradient checkpointing and flash attention', 2048 tokens
        assert layout["recompute"] == "full" and job["attention"] == "flash" and job["seq_len"] == 2048


def test_colossalchat_first_seen():
    # 7 memory rows (allocated): median |error| 22.8 %, worst 1.33. 2 GPUs: ZeRO-2 1.07 (70.7 GiB published, 75.4
    # predicted), with CPU offload 0.86 (21.9, 18.9); 4 GPUs: every row over, 1.17-1.33 (micro-batch 8 ZeRO-2 42.4
    # published, 53.5 predicted; with offload 19.0, 25.3; LoRA 20.7-20.8, 25.4-25.7): gpuplan's 12.7 GiB of
    # activations at 8 x 2048 tokens with checkpointing is more than the offloaded run's whole peak beside its weights
    ratios = scored_memory(MEMORIES, CCHAT)
    assert len(ratios) == 7
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.24
    assert max(factor(r) for r in ratios) <= 1.35
