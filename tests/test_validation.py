"""The validation suite runs in CI: 15 published training runs predicted with the defaults, each on the
layout its source publishes where it publishes one; the median |error| must stay within the figure the
README documents (5.8 %, held at 10 %), no row beyond 80 % (the 405B row's 77.5 %), and every row off by
more than 10 % says why in validation/published_runs.yaml. The throughput rows: each published layout,
predicted as published, within the documented figures."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import validate  # noqa: E402

from optimizer import load_catalog  # noqa: E402


def test_validation_median_error_stays_within_the_documented_figure():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "validate.py"), "--max-median", "0.10", "--max-worst", "0.80"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "15 runs" in out.stdout


def test_a_published_layout_is_the_layout_predicted_and_every_large_error_is_explained():
    rows = validate.table()
    pinned = {r["name"]: r["strategy"] for r in rows if r["pinned"]}
    assert set(pinned) == {"llama-3.1-405b", "deepseek-v3", "mpt-7b", "bloom-176b"}
    bloom = pinned["bloom-176b"]
    assert (bloom.tp, bloom.pp, bloom.dp, bloom.micro_batch, bloom.recompute) == (4, 12, 8, 2, "full")
    llama = pinned["llama-3.1-405b"]
    assert (llama.tp, llama.pp, llama.dp, llama.zero_stage, llama.recompute) == (8, 16, 128, 2, "none")
    deepseek = pinned["deepseek-v3"]
    assert (deepseek.tp, deepseek.pp, deepseek.ep, deepseek.zero_stage) == (1, 16, 64, 1)
    assert pinned["mpt-7b"].zero_stage == 3 and pinned["mpt-7b"].recompute == "full"
    for r in rows:
        assert abs(r["error"]) <= 0.10 or len(r["note"]) > 100, r["name"]


def test_bloom_and_mpt_match_their_gpu_hours_because_their_recipes_recompute_activations():
    # BLOOM (--checkpoint-activations) and MPT-7B (LLM Foundry's activation_checkpointing: true) spend a third
    # more compute on the recompute; gpuplan predicts both within 5 % on the published recipe, and more than
    # 10 % fewer GPU-hours without the recompute (BLOOM -24 %, MPT-7B -9 %: the 4 sequences per GPU fit 40 GB).
    catalog = load_catalog("hardware")
    runs = {r["name"]: r for r in yaml.safe_load(validate.DATA.read_text())["runs"]}
    for name in ("bloom-176b", "mpt-7b"):
        run = runs[name]
        predicted, plan = validate.predict(run, catalog)
        assert abs(predicted / run["reported_gpu_hours"] - 1) < 0.05, name
        without = copy.deepcopy(run)
        without["layout"]["recompute"] = "none"
        fast, _ = validate.predict(without, catalog)
        assert fast < 0.9 * predicted and fast < run["reported_gpu_hours"], name


def test_interruptions_in_the_predicted_gpu_hours_grow_with_the_cluster_as_the_llama_3_paper_reports():
    # p50 hours include interruptions at 1.97e-5 per GPU-hour (Llama 3 paper section 3.3.4): the 405B row's
    # 16,384 GPUs keep about 93 % effective training time (the paper: "higher than 90 %"), 2,048 GPUs about 99 %.
    catalog = load_catalog("hardware")
    runs = {r["name"]: r for r in yaml.safe_load(validate.DATA.read_text())["runs"]}
    effective = {}
    for name in ("llama-3.1-405b", "llama-2-70b"):
        run = runs[name]
        _, plan = validate.predict(run, catalog)
        tokens = float(validate.JobSpec.model_validate({k: run[k] for k in ("name", "model", "tokens")}).total_tokens)
        effective[name] = tokens / plan.tokens_per_s / 3600 / plan.hours.p50
    assert 0.90 < effective["llama-3.1-405b"] < 0.96
    assert 0.98 < effective["llama-2-70b"] < 1.0


def test_a_published_batch_ramp_adds_its_slower_early_steps_to_the_gpu_hours():
    # BLOOM ramped from 192 to 2,048 sequences over 20B tokens (micro-batch 1 below 784), DeepSeek-V3 from
    # 3,072 to 15,360 over 469B: the small batches fill the 12- and 16-stage pipelines less, so each run's
    # GPU-hours grow by 0.5-3 % over its steady step; BLOOM's steady step runs near the chronicles' 149-150
    # TFLOPs per GPU (counted with the recompute, 8ND).
    catalog = load_catalog("hardware")
    runs = {r["name"]: r for r in yaml.safe_load(validate.DATA.read_text())["runs"]}
    for name in ("bloom-176b", "deepseek-v3"):
        run = runs[name]
        assert run["ramp"]
        ramped, _ = validate.predict(run, catalog)
        steady, plan = validate.predict({k: v for k, v in run.items() if k != "ramp"}, catalog)
        assert 1.005 < ramped / steady < 1.03, name
    bloom = runs["bloom-176b"]
    _, plan = validate.predict_stage(bloom, catalog)
    hardware_tflops = plan.mfu * 312 * 8 / 6  # A100 dense BF16 peak; full recompute adds a forward pass
    assert 149.5 * 0.85 < hardware_tflops < 149.5 * 1.15


def test_throughput_on_published_layouts_stays_within_the_documented_figures():
    # 27 dense published layouts (NeMo / Megatron-Bridge, torchtitan, AutoModel; H100, H200, B200; BF16 and
    # FP8), none used to choose gpuplan's defaults: README and BENCHMARKS document a median of 8.9 % with
    # every row within 1.45x; CI holds issue 12's 10 % median and 1.5x worst row. The 13 MoE rows (10.6 %
    # median, 1.44x worst, held out for the host time fitted on them; issue 11 asks for 15 % and 1.5x) are
    # held at 12 % and 1.5x.
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "throughput.py"),
            *("--max-median", "0.10", "--max-worst", "1.50", "--max-moe-median", "0.12", "--max-moe-worst", "1.50"),
            *("--max-finetune-median", "0.27", "--max-finetune-worst", "1.55"),
            *("--max-gb200-median", "0.15", "--max-gb200-worst", "1.50"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "27 dense rows" in out.stdout
    # 21 small fine-tunes on one GPU or one node (torchtune's README, Qwen's profiling table; A100): 24.4 %
    # median, within 1.49x, mostly predicted slower than published (BENCHMARKS); held at 27 % and 1.55x.
    assert "21 small fine-tune rows" in out.stdout
    # 9 GB200 NVL72 rows (Megatron-Bridge, NeMo; 8-256 GPUs, dense, MoE and one NVFP4) that no fitted term has
    # seen: its node is the 72-GPU NVLink domain. 13.6 % median, within 1.41x (BENCHMARKS); held at 15 % and
    # 1.5x.
    assert "9 GB200 rows" in out.stdout


def test_qlora_costs_its_dequantisation_per_pass_not_a_share_of_the_compute():
    # torchtune's README (Llama 3.2 3B, one A100, 2 x 4096 packed tokens, checkpointing, compile, activation
    # offload): QLoRA 8,035 tokens/s against LoRA's 8,210, 0.979 of it. The NF4 -> bf16 dequantisation reads
    # and writes each frozen weight once per pass, whatever the tokens; at 8k tokens per micro-batch that is
    # 2 % of the step. (A flat 1.3x on the compute had predicted 0.77.)
    import throughput

    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    rows = {r["name"]: r for r in yaml.safe_load(throughput.FINETUNE_DATA.read_text())["runs"]}
    lora, qlora = rows["tt-llama32-3b-lora"], rows["tt-llama32-3b-qlora"]
    published = qlora["tokens_per_s_per_gpu"] / lora["tokens_per_s_per_gpu"]
    predicted = throughput.predict(qlora, catalog, None) / throughput.predict(lora, catalog, None)
    assert published == pytest.approx(0.979, abs=0.001)
    assert predicted == pytest.approx(published, abs=0.02)


def test_every_published_moe_layout_fits_where_it_ran():
    # Issue 11: a published MoE run's layout (GPUs, TP, PP, EP, expert TP, micro-batch, and recompute where
    # the recipe states it) fits gpuplan's memory model, as it fitted the GPUs it ran on. NeMo AutoModel's
    # MoE recipes train in pure bf16 (the rows' master_weights_source): with 16 bytes of state per
    # parameter instead of their 8, its Qwen3-30B-A3B EP 8 recipe would not fit an H100.
    import throughput

    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    skus = {s.name for s in catalog.skus}
    rows = [r for r in yaml.safe_load(throughput.DATA.read_text())["runs"] if r["kind"] == "moe"]
    checked = 0
    for run in rows:
        if throughput.modelled(run, skus):
            continue
        result = throughput.check(
            throughput.problem_for(run, None),
            run["sku"],
            run["gpus"],
            **throughput.layout_arguments(run),
            compare=False,
            catalog=catalog,
        )
        assert result.plan.fits, (run["name"], result.plan.memory_gib)
        checked += 1
    assert checked == 16  # 13 on H100, H200, B200 and B300; 3 on GB200
