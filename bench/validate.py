"""Predict published training runs with gpuplan's defaults and compare with the reported GPU-hours.

    python bench/validate.py                  # the table, median and worst error, then the throughput summary
    python bench/validate.py --max-median 0.10 --max-worst 0.80   # exit 1 above either (CI uses this)

Defaults only: per-class compute efficiency, no per-run fitting. Predicted GPU-hours = p50 hours (with
gpuplan's interruptions, physics/reliability.py) x GPUs of the layout the row's source publishes (its
``layout:``, pinned through check as bench/throughput.py pins its rows), or else of the fastest layout
that fits the stated GPU count. Each row off by more than 10 % says why in its ``note:``. Then the
throughput summary of bench/throughput.py (tokens/s per GPU on published layouts: dense, long-context and
MoE medians, held out), whose per-row table and CI thresholds live in that script.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optimizer import CheckRequest, check, load_catalog  # noqa: E402
from optimizer.inputs.schema import JobSpec, Problem  # noqa: E402
from optimizer.inputs.units import parse_count  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from throughput import evaluate_all, layout_arguments, summaries  # noqa: E402

DATA = ROOT / "validation" / "published_runs.yaml"


def predict(run: dict, catalog):
    """(GPU-hours, the plan of the run's main stage). A run with a published batch-size ramp (``ramp:``) is
    the sum of its stages, each predicted at its own global batch on the same layout."""
    total_tokens = parse_count(run["tokens"], "tokens")
    gpu_hours = 0.0
    for tokens, global_batch, micro_batch in stages(run, total_tokens):
        stage = {**run, "tokens": tokens, "global_batch": global_batch}
        if micro_batch is not None:
            stage["micro_batch"] = micro_batch
        hours, plan = predict_stage(stage, catalog)
        gpu_hours += hours
    return gpu_hours, plan


def stages(run: dict, total_tokens: float) -> list[tuple[float, int, int | None]]:
    """(tokens, global batch, micro-batch or None) per stage: the published ramp, then the rest at the row's
    global batch. A ramp goes as Megatron-LM's --rampup-batch-size <start> <increment> <samples>: from
    ``start`` sequences up by ``increment`` at a time, each batch size for an equal share of the ramp's
    ``tokens``, until the row's global batch; ``micro_batch: {below: B, value: m}`` runs the batches under
    B at micro-batch m (BLOOM ran micro-batch 1 until 784)."""
    ramp = run.get("ramp")
    if not ramp:
        return [(total_tokens, run["global_batch"], None)]
    sizes = list(range(int(ramp["start"]), int(run["global_batch"]), int(ramp["increment"])))
    ramp_tokens = parse_count(ramp["tokens"], "tokens")
    small = ramp.get("micro_batch") or {}
    out: list[tuple[float, int, int | None]] = [
        (ramp_tokens / len(sizes), size, small["value"] if small and size < small["below"] else None) for size in sizes
    ]
    return [*out, (total_tokens - ramp_tokens, run["global_batch"], None)]


def predict_stage(run: dict, catalog):
    job = JobSpec.model_validate(
        {
            "name": run["name"],
            "model": run["model"],
            "tokens": run["tokens"],
            "seq_len": run["seq_len"],
            "global_batch": run["global_batch"],
            # Pre-training at this scale runs fused kernels (Megatron-LM, NeMo, the labs' in-house stacks),
            # which keep fewer activations than eager PyTorch (physics/memory.py); any framework's layout.
            "kernels": "fused",
            **{key: run[key] for key in ("framework", "precision") if run.get(key)},
        }
    )
    # A run's own published method (e.g. DeepSeek-V3's DualPipe overlap) is an assumption of that run.
    problem = Problem.model_validate({"job": job.model_dump(by_alias=True), "assumptions": run.get("assumptions", {})})
    # A row whose source publishes the layout that ran pins it (check's pinned-layout path, as
    # bench/throughput.py does), so the row tests the physics on what ran, not gpuplan's choice.
    pinned = layout_arguments(run) if run.get("layout") else {}
    result = check(problem, CheckRequest(run["sku"], run["gpus"], compare=False, **pinned), catalog=catalog)
    return result.plan.hours.p50 * run["gpus"], result.plan


def table(path: Path = DATA) -> list[dict]:
    catalog = load_catalog("hardware")
    rows = []
    for run in yaml.safe_load(path.read_text())["runs"]:
        predicted, plan = predict(run, catalog)
        rows.append(
            {
                "name": run["name"],
                "sku": run["sku"],
                "gpus": run["gpus"],
                "reported": run["reported_gpu_hours"],
                "predicted": predicted,
                "error": predicted / run["reported_gpu_hours"] - 1,
                "mfu": plan.mfu,
                "strategy": plan.strategy,
                "pinned": bool(run.get("layout")),
                "note": run.get("note", ""),
                "source": run["source"],
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-median", type=float, default=None, help="fail above this median |error|")
    ap.add_argument("--max-worst", type=float, default=None, help="fail when a row's |error| exceeds this")
    args = ap.parse_args()
    rows = table()
    print(
        f"{'run':<16} {'GPU':<10} {'GPUs':>6} {'reported GPU-h':>15} {'predicted':>12} {'error':>7} {'MFU':>5}  layout"
    )
    for r in rows:
        s = r["strategy"]
        layout = f"TP{s.tp} PP{s.pp} DP{s.dp}" + (f" EP{s.ep}" if s.ep > 1 else "") + (f" CP{s.cp}" if s.cp > 1 else "")
        layout += f" ZeRO-{s.zero_stage} {s.recompute} recompute" + (" (published)" if r["pinned"] else "")
        print(
            f"{r['name']:<16} {r['sku']:<10} {r['gpus']:>6} {r['reported']:>15,.0f} {r['predicted']:>12,.0f} "
            f"{r['error']:>+7.1%} {r['mfu']:>5.0%}  {layout}"
        )
    errors = [abs(r["error"]) for r in rows]
    median, worst = statistics.median(errors), max(errors)
    signed = statistics.median(r["error"] for r in rows)
    print(f"\n{len(rows)} runs: median |error| {median:.1%}, worst {worst:.1%}, median signed error {signed:+.1%}")
    print("\nThroughput on published layouts (python bench/throughput.py for the rows):")
    throughput_catalog, throughput_rows, _ = evaluate_all()
    summaries(throughput_rows, throughput_catalog)
    failed = False
    if args.max_median is not None and median > args.max_median:
        print(f"median |error| {median:.1%} exceeds the documented {args.max_median:.0%}")
        failed = True
    if args.max_worst is not None and worst > args.max_worst:
        print(f"worst |error| {worst:.1%} exceeds the documented {args.max_worst:.0%}")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
