"""Published throughput and peak memory of three more source families gpuplan never fitted on
(validation/unseen_families_2.yaml; issue 48: "We also measure on published families you have not seen; the same
thresholds hold there").

Each row is predicted as gpuplan ships (bench/unseen.py: bench/throughput.py's ``checked`` and bench/memory.py's
``predict``, nothing refitted), so the figures pinned below are first-seen errors, held as a record: each threshold
sits a little above today's figure, so a change that worsens them fails here and has to say why.
"""

from __future__ import annotations

import re
import statistics
import sys

import pytest
from first_seen import assert_families_new, factor
from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402
import unseen  # noqa: E402

from optimizer import load_catalog  # noqa: E402
from optimizer.physics.efficiency import FITTED_BASE, FITTED_HALF_PER_RIDGE  # noqa: E402

DATA = unseen.load()
# the peak the nanotron rows' MFU is read against (the data file's header: an assumption): the catalog's H100 SXM
H100 = next(s for s in load_catalog("default").skus if s.name == "H100-SXM")
H100_DENSE_BF16_FLOPS = (H100.dense_tflops("bf16") or 0.0) * 1e12
RUNS, MEMORY = DATA["runs"], DATA["memory_rows"]
NANOTRON_VOCAB, NANOTRON_SEQ = 131072, 4096  # scripts/scaling_benchmarks.py: VOCAB_SIZES, SEQUENCE_LENGTHS
NANOTRON_GLOBAL_SEQUENCES = 512 * 2048 // NANOTRON_SEQ  # its GBS "512 * 2048 # 1M" tokens, in sequences
GPUS_PER_NODE = 8
# flash-attention training/configs/experiment/pile/*-flash.yaml @ 4a6eaa9f: datamodule.batch_size as its expression of
# train.gpu_mem gives it on an A100 80GB (nvidia-smi memory.total 81920 MiB / 1000, rounded: 82), and the model width
FLASH_MICRO_BATCH = {"125M": 32, "355M": 32, "760M": 16, "1.3B": 8, "2.7B": 4}
FLASH_HIDDEN = {"125M": 768, "355M": 1024, "760M": 1536, "1.3B": 2048, "2.7B": 2560}
FLASH_NODE_GPUS = 8  # "one node with 8 x A100 80GB SXM4 80GB (400W) with NVLink"
MIB_TOKENS = 2**20  # the table's batch column: 0.5M = 256 x 2048 tokens
A800_NODE_GPUS = 8  # the gist: "a machine with A800 x 8"


def _nanotron_params(layers: int, hidden: int, ffn: int, tied: bool) -> int:
    """nanotron scripts/scaling_benchmarks.py estimate_num_params with kv heads = heads: 2 V h (V h tied) +
    L (3 h H + 4 h^2)."""
    return (1 if tied else 2) * NANOTRON_VOCAB * hidden + layers * (3 * hidden * ffn + 4 * hidden * hidden)


def _nanotron_flops_per_token(layers: int, hidden: int, ffn: int) -> float:
    """nanotron models/llama.py get_flops (kv heads = heads) over seq_len tokens: 3 x (QKV 6 L h^2 + scores and values
    4 L s h + out-projection 2 L h^2 + MLP 6 L h H + LM head 2 h V)."""
    s = NANOTRON_SEQ
    forward = 8 * layers * hidden**2 + 4 * layers * s * hidden + 6 * layers * hidden * ffn + 2 * hidden * NANOTRON_VOCAB
    return 3.0 * forward


def _groups(pattern: str, text: str) -> tuple[str, ...]:
    match = re.fullmatch(pattern, text)
    assert match, (pattern, text)
    return match.groups()


def _nanotron_cell(quote: str) -> dict:
    """The SVG labels of one cell as the row quotes them: '<size>B x <n> nodes: MFU <m> | <g>GB | DP: .. TP: .. PP: ..
    | GAS: .. MBS: .. | ZeRO-<z>'."""
    head, mem, parallel, batch, zero = (c.strip() for c in quote.split("|"))
    size, nodes, mfu = _groups(r"([\d.]+)B x (\d+) nodes: MFU ([\d.]+)", head)
    dp, tp, pp = (int(x) for x in _groups(r"DP: (\d+) TP: (\d+) PP: (\d+)", parallel))
    gas, mbs = (int(x) for x in _groups(r"GAS: (\d+) MBS: (\d+)", batch))
    return {
        "size": size,
        "nodes": int(nodes),
        "mfu": float(mfu),
        "memory_gb": float(mem.removesuffix("GB")),
        "dp": dp,
        "tp": tp,
        "pp": pp,
        "gas": gas,
        "mbs": mbs,
        "zero": int(zero.removeprefix("ZeRO-")),
    }


def _speed(family: str, nodes: tuple[int, int] = (1, 64)) -> list[float]:
    return [
        s.ratio
        for s in unseen.speeds(DATA)
        if s.predicted is not None and s.row["family"] == family and nodes[0] <= s.row["nodes"] <= nodes[1]
    ]


def _memory(family: str) -> list[float]:
    return [s.ratio for s in unseen.scored_memories(unseen.memories(DATA)) if s.row["family"] == family]


def test_the_families_are_new_and_listed():
    # neither family is registered in validation/families.yaml nor names a row of any other file of validation/
    assert assert_families_new("unseen_families_2.yaml", DATA) == {
        "nanotron",
        "flash-attention-training",
        "deepspeed-a800-gist",
    }
    assert len(RUNS) == 31 and len(MEMORY) == 37


def test_nanotron_shapes_are_the_sizes_the_svg_names():
    # estimate_num_params of scripts/scaling_benchmarks.py's four shapes rounds to the SVG's axis labels
    labels = {"nanotron_1b": "1.34", "nanotron_3b": "3.57", "nanotron_8b": "8.86", "nanotron_80b": "80.0"}
    for key, label in labels.items():
        shape = DATA["shapes"][key]
        params = _nanotron_params(shape["layers"], shape["hidden"], shape["ffn_hidden"], shape["tied_embeddings"])
        assert shape["params"] == params
        assert f"{params / 1e9:.{len(label.split('.')[1])}f}" == label
        assert shape["kv_heads"] == shape["heads"] and shape["head_dim"] * shape["heads"] == shape["hidden"]
        # the script ties the embeddings below an intermediate size of 10,000
        assert shape["tied_embeddings"] == (shape["ffn_hidden"] < 10_000) and shape["vocab"] == NANOTRON_VOCAB


def test_each_nanotron_cell_gives_the_row_entered():
    memory_rows = {r["name"].removesuffix("-memory"): r for r in MEMORY if r["family"] == "nanotron"}
    assert len(memory_rows) == 26
    for row in (r for r in RUNS if r["family"] == "nanotron"):
        cell = _nanotron_cell(row["quote"])
        layout = row["layout"]
        assert cell["dp"] * cell["tp"] * cell["pp"] == cell["nodes"] * GPUS_PER_NODE == row["gpus"], row["name"]
        assert (row["nodes"], row["micro_batch"], row["seq_len"]) == (cell["nodes"], cell["mbs"], NANOTRON_SEQ)
        assert (layout["tp"], layout["pp"], layout["zero"], layout["ga"]) == (
            cell["tp"],
            cell["pp"],
            cell["zero"],
            cell["gas"],
        )
        assert row["global_batch"] == cell["dp"] * cell["gas"] * cell["mbs"] == NANOTRON_GLOBAL_SEQUENCES
        assert row["mfu_percent"] == cell["mfu"]
        shape = row["model"]
        decimals = len(cell["size"].split(".")[1])
        assert f"{shape['params'] / 1e9:.{decimals}f}" == cell["size"], row["name"]
        flops = _nanotron_flops_per_token(shape["layers"], shape["hidden"], shape["ffn_hidden"])
        assert row["tokens_per_s_per_gpu"] == round(cell["mfu"] / 100 * H100_DENSE_BF16_FLOPS / flops), row["name"]
        memory_row = memory_rows[row["name"]]
        assert memory_row["quote"] == row["quote"] and memory_row["job"]["model"] == shape
        assert memory_row["published"] == {"gpu": "H100-SXM", "gpus": row["gpus"], "peak_gib": cell["memory_gb"]}
        mem_layout = memory_row["layout"]
        assert (mem_layout["tp"], mem_layout["pp"], mem_layout["zero"]) == (cell["tp"], cell["pp"], cell["zero"])
        assert (mem_layout["micro_batch"], mem_layout["grad_accum"]) == (cell["mbs"], cell["gas"])


def test_each_flash_attention_line_gives_the_row_entered():
    # | Model | Batch size (tokens) | Through put (tokens/sec) | Hours / 1B tokens |: the node's throughput
    rows = [r for r in RUNS if r["family"] == "flash-attention-training"]
    assert len(rows) == 5
    for row in rows:
        model, batch, speed, hours = (c.strip() for c in row["quote"].strip().strip("|").split("|"))
        size = model.removeprefix("GPT3-")
        node_tokens_per_s = float(speed.removesuffix("k")) * 1e3
        assert row["tokens_per_s_per_gpu"] == round(node_tokens_per_s / FLASH_NODE_GPUS), row["name"]
        # the table's own hours per billion tokens agree with its throughput
        assert abs(1e9 / node_tokens_per_s / 3600 - float(hours)) < 0.006, row["name"]
        assert row["global_batch"] * row["seq_len"] == float(batch.removesuffix("M")) * MIB_TOKENS, row["name"]
        assert row["micro_batch"] == FLASH_MICRO_BATCH[size] and row["model"]["hidden"] == FLASH_HIDDEN[size]
        assert row["layout"]["ga"] * row["micro_batch"] * FLASH_NODE_GPUS == row["global_batch"], row["name"]
        # GPT-2 shapes: 4h MLP, tied embeddings, learned positions over 2048; the count within 3 % of the name
        m = row["model"]
        scale = 1e9 if size.endswith("B") else 1e6
        assert abs(m["params"] / (float(size[:-1]) * scale) - 1) < 0.03, (row["name"], m["params"])
        assert m["ffn_hidden"] == 4 * m["hidden"] and not m["gated_mlp"] and m["tied_embeddings"]


def test_each_gist_line_gives_the_row_entered():
    # | Zero Stage | Ckpt. | Optim. Off. | Param. Off. | Zero++ | BS (per device / global) | CPU Mem. | GPU Mem. | Th.put |
    rows = [r for r in MEMORY if r["family"] == "deepspeed-a800-gist"]
    assert len(rows) == 11
    for row in rows:
        stage, ckpt, optim_off, param_off, zeropp, bs, _, gpu_mem, _ = (
            c.strip() for c in row["quote"].strip().strip("|").split("|")
        )
        per_device, global_batch = (int(x) for x in bs.split("/"))
        layout = row["layout"]
        assert layout["zero"] == int(stage) and layout["micro_batch"] == per_device, row["name"]
        assert layout["grad_accum"] * per_device * A800_NODE_GPUS == global_batch, row["name"]
        assert layout["recompute"] == ("full" if ckpt == "√" else "none"), row["name"]
        assert layout.get("offload", "none") == ("optimizer" if optim_off == "√" else "none"), row["name"]
        # torch.cuda.memory_allocated() / torch.cuda.max_memory_allocated(): the peak is the second figure
        assert row["published"]["peak_gib"] == float(gpu_mem.split("/")[1]), row["name"]
        # the parameter offload (and ZeRO++ beside it) is what gpuplan cannot say: those rows alone are not scored
        assert row.get("expressible", True) == (param_off == "×" and zeropp == "×"), row["name"]


def test_nanotron_throughput_first_seen():
    # All 26 cells predicted, as nanotron runs them: Megatron's layout rules (TP with sequence parallelism, PP,
    # ZeRO-1) on eager PyTorch layers (job.kernels eager: no fused-kernel ratio); the 80B cell at 64 nodes runs TP 16
    # over two whole nodes, its TP collectives over the network (check takes a TP of whole nodes; it was refused
    # until 2026-12-07: 540 predicted against 348 published, 1.55x). Median |error| 10.1 %, worst 3.48x. On 1-4
    # nodes (10 cells) 8.7 %, worst 2.85x (80B over TP 8 x PP 4 on 4 nodes, published MFU 14.8 % where the other
    # 80B cells reach 30-34 %); on 8-64 nodes (16 cells) 22.3 %, worst 3.48x (1.34B on 512 GPUs at 2 sequences
    # each, published MFU 5.3 %): the published MFU falls with the node count at a fixed global batch of 256
    # sequences and gpuplan's barely moves. Since session 40 the loss's kernels cost time (physics/loss_time.py:
    # nanotron's sharded cross-entropy upcasts 128,256 logits a token to fp32, 48 bytes a logit, spread over the
    # stages as the head's FLOPs): the small models' cells on 1-8 nodes, already slow, slower (the 1.34B at PP 2 on
    # one node 0.83 -> 0.76), the 64-node ones less fast: median 10.1 % -> 12.8 %, worst 3.48x -> 3.21x.
    assert all(s.predicted is not None for s in unseen.speeds(DATA))
    ratios = _speed("nanotron")
    assert len(ratios) == 26
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.135
    assert max(factor(r) for r in ratios) <= 3.7
    small = _speed("nanotron", (1, 4))
    assert len(small) == 10
    assert statistics.median(abs(r - 1) for r in small) <= 0.13  # 8.7 % -> 12.2 % with the loss's kernels
    assert max(factor(r) for r in small) <= 3.0
    large = _speed("nanotron", (8, 64))
    assert len(large) == 16
    assert statistics.median(abs(r - 1) for r in large) <= 0.25


def test_stated_eager_kernels_take_no_fused_ratio():
    # job.kernels eager on a Megatron layout is costed at eager PyTorch's efficiency: each nanotron cell on Hopper,
    # predicted again at the fitted model's efficiency with the fused ratio 1 passed as the matmul efficiency,
    # gives the same figure.
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    for s in unseen.speeds(DATA)[:6]:
        if s.predicted is None:
            continue
        assert not throughput.is_fused(s.row, catalog)
        eager = throughput.fitted_efficiency(s.row, catalog, FITTED_BASE, FITTED_HALF_PER_RIDGE, fused_ratio=1.0)
        assert throughput.predict(s.row, catalog, eager) == pytest.approx(s.predicted, rel=1e-9), s.row["name"]


def test_flash_attention_throughput_first_seen():
    # GPT-3 125M-2.7B on 8 A100 80GB (5 rows): median |error| 5.9 %, worst 0.87 (125M at 32 x 2048 tokens a GPU,
    # predicted 14 % slow). Every published micro-batch fits gpuplan's memory with the recipe's in-place bf16
    # cross-entropy (loss: flash); with the default loss (fp32 log-softmax and gradient, 12 bytes a logit) the 355M
    # row's 32 x 2048 tokens would not (91.6 of 80 GiB): the recipe's loss is what fits it.
    ratios = _speed("flash-attention-training")
    assert len(ratios) == 5
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.07
    assert max(factor(r) for r in ratios) <= 1.2
    assert all(s.fits for s in unseen.speeds(DATA) if s.row["family"] == "flash-attention-training")
    standard = {**next(r for r in RUNS if r["name"] == "flashattn-gpt3-355m-a100x8"), "loss": "standard"}
    assert not unseen.throughput.checked(standard, load_catalog(str(unseen.HARDWARE))).plan.fits


def test_nanotron_memory_first_seen():
    # 26 cells, read as torch's allocated peak, as nanotron runs them: fp32 gradient
    # accumulation (accumulate_grad_in_fp32 in its scaling benchmarks: job gradient_dtype fp32, 4 bytes a gradient,
    # unsharded under ZeRO-1), the 16-bit gradients added to it after each backward and reduced through torch DDP's
    # bucket copy without ZeRO (gradient_accumulator after_backward: FP32GradientAccumulator, make_ddp), and the
    # pipeline stages divided by compute (pipeline_split compute: build_model gives the first stage 11 of the 1.34B's 16
    # layers at PP 2, where an even split gives 8). Median |error| 10.1 %, worst 0.74 (8.86B at TP 8, micro-batch 8,
    # PP 1); 23 of 25 cells below the published figure (with the TP 16 cell over two nodes, accepted since
    # 2026-12-07 at 0.87: 26 cells, 10.8 %, 24 below). With the accumulator in place: 10.6 %, worst 0.71; with the
    # even split as well: 19.1 %, worst 0.65 (1.34B on 16 GPUs over PP 2), 24 of 25 below; with 2-byte gradients too
    # 25.5 %, worst 0.54. What is left is the 9 PP 1 cells under TP (0.74-0.97, median 17 %), short by more as the
    # micro-batch grows.
    ratios = _memory("nanotron")
    assert len(ratios) == 26
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.11
    assert max(factor(r) for r in ratios) <= 1.36
    assert sum(r < 1 for r in ratios) >= 24
    pipelined = [
        s.ratio
        for s in unseen.scored_memories(unseen.memories(DATA))
        if s.row["family"] == "nanotron" and s.row["layout"]["pp"] > 1
    ]
    # the 16 PP cells: median |error| 7.7 %, every one within 0.82-1.12
    assert len(pipelined) == 16
    assert statistics.median(abs(r - 1) for r in pipelined) <= 0.08
    assert all(0.8 <= r <= 1.15 for r in pipelined)


def test_deepspeed_gist_memory_first_seen():
    # 9 expressible rows of LLaMA-7B at 4096 tokens on 8 A800 under ZeRO-2/3: median |error| 9.1 %, worst 0.63
    # (ZeRO-3 with checkpointing at 8 per device and 2 accumulation steps: 63.9 GiB published against 39.1 GiB for
    # the same run without accumulation; gpuplan gives both 40.1 GiB). The two parameter-offload rows are not scored
    # (predicted 1.89x on the nearest layout: gpuplan keeps the 16-bit weight shards on the GPU).
    ratios = _memory("deepspeed-a800-gist")
    assert len(ratios) == 9
    assert statistics.median(abs(r - 1) for r in ratios) <= 0.11
    assert max(factor(r) for r in ratios) <= 1.7
