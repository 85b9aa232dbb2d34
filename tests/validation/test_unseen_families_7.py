"""Published peak memory (and the throughput the same page prints) of a seventh set of source families gpuplan never
fitted on (validation/unseen_families_7.yaml; issue 48: "We also measure on published families you have not seen";
"peak memory is about 30 % off, with published runs called 'does not fit'"): the VRAM axolotl's example READMEs
print for their configs (QLoRA with Cut Cross Entropy on one GPU, gpt-oss-20b LoRA and FSDP2 full fine-tuning with
activation offloading, Llama 4 Scout QLoRA on one and four H100 with its tokens/s, Llama 2 7B QLoRA on an RTX 4090:
axolotl-examples) and THUDM's GLM-4-9B finetune_demo (LoRA on one A100, full fine-tuning under DeepSpeed ZeRO-3 on
eight; nvidia-smi MiB: glm4-finetune-demo).

Each row is predicted as gpuplan ships (bench/unseen.py: bench/throughput.py's ``checked`` and bench/memory.py's
``predict``, nothing refitted), so the figures pinned below are first-seen errors, first predicted at 5664ce9 (the
Llama 4 Scout rows re-entered at db032bb as their code ran, every expert on every token; gpuplan unchanged between)
and held as a record: each threshold sits a little above today's figure, so a change that worsens them fails here
and has to say why.
"""

from __future__ import annotations

import re
import statistics
import sys

from first_seen import assert_families_new, factor, scored, scored_memory
from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import unseen  # noqa: E402

PATH = ROOT / "validation" / "unseen_families_7.yaml"
DATA = unseen.load(PATH)
RUNS, MEMORY = DATA["runs"], DATA["memory_rows"]
SPEEDS = unseen.speeds(DATA)
MEMORIES = unseen.memories(DATA)
BY_NAME = {row["name"]: s for row, s, _ in MEMORIES}
MIB = 2**20  # nvidia-smi prints MiB (GLM-4's table: "21531MiB")
# the quoted figure of an axolotl README: "about 8.76 GiB VRAM", "about 21GB VRAM", "and 20 GB", "@ ~44GiB",
# "uses 64.5GB VRAM"
AXOLOTL_FIGURE = re.compile(r"(?:about|and|@ ~|uses(?: only)?) ?([\d.]+) ?Gi?B")


def _decoder_params(layers: int, hidden: int, q_width: int, kv_width: int, ffn: int, vocab: int, extra: int) -> int:
    """A Llama-style decoder's parameters counted from its modules: q, k, v, o, a SwiGLU MLP, two RMSNorms and
    ``extra`` more (biases, q/k norms) a layer, an untied embedding and head, the final norm."""
    layer = hidden * q_width + 2 * hidden * kv_width + q_width * hidden + 3 * hidden * ffn + 2 * hidden + extra
    return layers * layer + 2 * vocab * hidden + hidden


# each shape's config.json widths (validation/unseen_families_7.yaml shapes:): layers, hidden, q and kv widths, the
# MLP's width, the vocabulary and the extra parameters a layer
SHAPE_PARAMS = {
    "llama2_7b": _decoder_params(32, 4096, 4096, 4096, 11008, 32000, 0),
    "mistral_small_24b": _decoder_params(40, 5120, 4096, 1024, 32768, 131072, 0),
    "ministral_8b": _decoder_params(36, 4096, 4096, 1024, 12288, 131072, 0),
    "olmo3_7b": _decoder_params(32, 4096, 4096, 4096, 11008, 100278, 2 * 4096),  # q and k norms
    "seed_oss_36b": _decoder_params(64, 5120, 10240, 1024, 27648, 155136, 10240 + 2 * 1024),  # q, k, v biases
    "glm4_9b": _decoder_params(40, 4096, 4096, 256, 13696, 151552, 4096 + 2 * 256),  # query_key_value's bias
}


def _scout_params() -> tuple[int, int]:
    """Llama 4 Scout's text model, total and routed-active (top 1): 48 layers of 5120 wide attention (40 heads, 8 KV
    heads of 128), 16 routed SwiGLU experts of 8192 and one shared, a 16-way router, untied vocabulary of 202048."""
    attention = 5120 * 5120 * 2 + 5120 * 1024 * 2
    expert = 3 * 5120 * 8192
    fixed = attention + 5120 * 16 + 2 * 5120
    embeddings = 2 * 202048 * 5120 + 5120
    return 48 * (fixed + 17 * expert) + embeddings, 48 * (fixed + 2 * expert) + embeddings


def test_the_families_are_new_and_listed():
    # neither family is registered in validation/families.yaml nor names a row of any other file of validation/
    assert PATH in unseen.DATA_FILES
    assert assert_families_new(PATH.name, DATA) == {"axolotl-examples", "glm4-finetune-demo"}
    assert len(RUNS) == 2 and len(MEMORY) == 17
    assert sum(r.get("expressible", True) for r in MEMORY) == 13  # the GLM-4 SFT row is listed apart


def test_the_shapes_add_up_from_their_modules():
    shapes = DATA["shapes"]
    for name, params in SHAPE_PARAMS.items():
        assert shapes[name]["params"] == params, name
    total, routed_active = _scout_params()
    assert round(routed_active / 1e9) == 17  # Meta's "17B" active (Llama-4-Scout-17B-16E)
    # as run, transformers' Llama4TextMoe runs all 16 experts on every token: every parameter computes
    scout = shapes["llama4_scout"]
    assert scout["params"] == scout["active_params"] == total and scout["experts_per_token"] == scout["experts"]


def test_each_published_figure_is_the_quoted_one():
    for row in MEMORY:
        published = row["published"]
        if row["family"] == "glm4-finetune-demo":
            mib = int(re.search(r"(\d+)MiB", row["quote"]).group(1))
            assert published["peak_bytes"] == mib * MIB, row["name"]
            continue
        figures = [float(x) for x in AXOLOTL_FIGURE.findall(row["quote"])]
        # the Llama 2 page quotes both its QLoRA (17) and LoRA (20) figures, gpt-oss' FFT line both of its GPU counts
        assert published["peak_gib"] in figures, (row["name"], figures)
    for run in RUNS:
        rate = re.search(r"@ (\d+) ?(?:tokens/second|tps/gpu)", run["quote"]).group(1)
        assert run["tokens_per_s_per_gpu"] == int(rate), run["name"]
        memory_row = next(r for r in MEMORY if r["name"] == run["name"] + "-memory")
        assert memory_row["quote"] == run["quote"] and memory_row["published"]["gpus"] == run["gpus"]


def test_each_row_carries_its_config():
    for row in MEMORY:
        run, job, layout = row["run"], row["job"], row["layout"]
        plugins = str(run.get("plugins", ""))
        if row["family"] == "axolotl-examples":
            assert layout["micro_batch"] == run["micro_batch_size"], row["name"]
            assert layout["grad_accum"] == run["gradient_accumulation_steps"], row["name"]
            assert job["seq_len"] == run["sequence_len"], row["name"]
            # Cut Cross Entropy computes the loss without the logits tensor: gpuplan's fused loss
            assert (job["loss"] == "fused") == ("CutCrossEntropy" in plugins), row["name"]
        # a 4-bit base is gpuplan's qlora; an LLM.int8 base (1 byte a weight) has no gpuplan setting
        assert (job["method"] == "qlora") == bool(run.get("load_in_4bit")), row["name"]
        if run.get("load_in_8bit") or run.get("offload_params"):
            assert row["expressible"] is False and row["not_expressible"], row["name"]
        if "lora_r" in run:
            assert job["lora_rank"] == run["lora_r"], row["name"]
    # GLM-4's process_batch caps a sample at max_input_length + max_output_length + 1 tokens
    for row in (r for r in MEMORY if r["family"] == "glm4-finetune-demo"):
        assert row["job"]["seq_len"] == row["run"]["max_input_length"] + row["run"]["max_output_length"] + 1


def test_no_row_is_refused_and_which_are_said_not_to_fit():
    assert all(s.predicted is not None for s in SPEEDS)
    assert all(s is not None for _, s, _ in MEMORIES)
    # every published run fits on its GPU as gpuplan predicts it, but one: gpt-oss-20b fully fine-tuned on two 24 GB
    # cards with FSDP2's offload_params (parameters, gradients and optimizer state in CPU memory) ran at 21 GiB a GPU;
    # gpuplan, which offloads the optimizer state only, puts it at 43.1 GiB (the row is expressible: false)
    assert all(s.fits for s in SPEEDS)
    unfit = {row["name"] for row, s, _ in MEMORIES if not s.fits}
    assert unfit == {"axolotl-gpt-oss-20b-fft-fsdp2-offload-24gbx2"}


def test_axolotl_memory_first_seen():
    # 12 scored rows: first seen median |error| 15.1 %, worst 0.52 (gpt-oss-20b FSDP2 full fine-tuning on 8 x 48 GB,
    # 36 GiB reserved published, 18.8 predicted; 0.73 on 4 x 80 GB, 46 against 33.4). The Cut Cross Entropy QLoRA
    # rows over-predicted 1.12-1.33 (Ministral 8B 8.76 GiB published, 11.7 predicted; Devstral 1.14, Magistral 2507
    # 1.16, Seed-OSS 36B 1.12), Magistral 2506 without it 1.26, OLMo 3 7B 0.93, Llama 2 7B QLoRA on the RTX 4090 0.80,
    # gpt-oss-20b LoRA on 48 GB 0.91, Llama 4 Scout QLoRA (every expert on every token, as run) 1.01 on one H100 and
    # 0.87 on four.
    # Session 41: a re-run layer's backward holds its gradients in flight (the block output's and the MLP's input
    # gradients, 2h + 4f bytes a token, physics/memory_terms.py) on top of its recompute working set: every
    # checkpointed row holds more, the under-predicted first-seen families come up (DeepSpeed 18.2 -> 8.8 %, H200 12.7
    # -> 9.4 %, every set 7.8 -> 7.3 %) and the Cut Cross Entropy rows, over-predicted already and published as README
    # "about X GiB" figures, go further over: median 17.8 %. The bound moves to 0.18 for that reason only.
    memory = scored_memory(MEMORIES, "axolotl-examples")
    assert len(memory) == 12
    assert statistics.median(abs(r - 1) for r in memory) <= 0.18
    assert max(factor(r) for r in memory) <= 2.0
    # the two 8-bit-base LoRA rows and the offload_params row, listed apart: 1.11, 2.21, 2.05
    # (their nearest layouts hold more on the GPU: a 16-bit base, the parameters and gradients not offloaded)
    apart = [
        s.ratio for row, s, _ in MEMORIES if not row.get("expressible", True) and row["family"] == "axolotl-examples"
    ]
    assert len(apart) == 3 and min(apart) > 1.0


def test_cut_cross_entropy_saves_what_gpuplan_says():
    # Magistral Small 2506 without Cut Cross Entropy (24 GiB) and 2507 with it (19.1 GiB): the same 24B model, layout
    # and optimizer, so the published difference, 4.9 GiB, is the loss's logits (2 x 2048 x 131072 a step). First
    # seen, gpuplan's saving is 8.0 GiB, 1.63x the published one: 6.0 in the standard loss's tensors (12 bytes a
    # logit; 10, the bf16 logits, their fp32 copy and its fp32 gradient, would give 5.0) and 2.0 in the allocator
    # reserve, which grows with the largest tensor (the fp32 logits) though a device reading of this run shows none.
    plain = BY_NAME["axolotl-magistral-small-2506-qlora"]
    fused = BY_NAME["axolotl-magistral-small-2507-think-qlora-cce"]
    published_saving = plain.published_gib - fused.published_gib
    predicted_saving = plain.predicted_gib - fused.predicted_gib
    assert abs(published_saving - 4.9) < 1e-6
    assert 1.0 <= predicted_saving / published_saving <= 1.7


def test_axolotl_throughput_first_seen():
    # Llama 4 Scout QLoRA, every expert computing every token (transformers' dense Llama4TextMoe), per-expert nf4
    # linears one after another: 519 tokens/s published on one H100, 629 predicted (1.21); 280 a GPU on four under
    # FSDP2, 722 predicted (2.58, beyond issue 48's 1.5x: bench/unseen.py lists it). Mapped with the router's top 1
    # (17.2B active) they were first seen at 3.51 and 9.30.
    ratios = scored(SPEEDS, "axolotl-examples")
    assert len(ratios) == 2
    assert max(factor(r) for r in ratios) <= 2.7
    assert min(ratios) > 1.0


def test_glm4_memory_first_seen():
    # LoRA on one A100: 21.0 GiB published (nvidia-smi), 23.5 predicted (1.12). Full fine-tuning under ZeRO-3 on 8
    # A100: 79.0 GiB published, 98.8 % of the card (the caching allocator grew to fill it), 26.9 predicted (0.34), first
    # scored; now listed apart (expressible: false): DeepSpeed's zero.Init made the model fp32 (bf16 auto filled from the
    # training arguments' unset bf16), and a card-full reading bounds the peak from above only.
    memory = scored_memory(MEMORIES, "glm4-finetune-demo")
    assert len(memory) == 1
    lora, sft = BY_NAME["glm4-9b-lora-a100"], BY_NAME["glm4-9b-sft-zero3-a100x8"]
    assert factor(lora.ratio) <= 1.15
    assert not sft.row.get("expressible", True)
    assert sft.predicted_gib < sft.published_gib  # a bound from above: gpuplan's peak below the card-full reading
    assert sft.published_gib / sft.capacity_gib > 0.98  # the reading is the card's capacity, not a peak below it
