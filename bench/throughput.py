"""Throughput on published layouts: fit gpuplan's matmul-efficiency model and prove it on held-out rows.

    python bench/throughput.py                     # per-row predicted vs published tokens/s per GPU, held out
    python bench/throughput.py --fit               # also print the fitted parameters (physics/efficiency.py)
    python bench/throughput.py --max-median 0.15   # exit 1 if the held-out median |error| exceeds 15 % (CI)

Rows come from validation/throughput_runs.yaml, each predicted with ``check`` on its published layout
(SKU, GPUs, nodes, TP, PP, micro-batch, global batch, ZeRO/FSDP, recompute, precision, sequence). The
rows gpuplan models today are dense transformers without context or expert parallelism on SKUs in
catalogs/hardware.yaml; the others are listed as not modelled, with the reason.

Method (docs/design.md section 5.10): for each row, the efficiency e* at which gpuplan's prediction
equals the published figure (secant on log tokens/s); the model log e = log base[family, precision
class] + log size(hidden) is fitted to the log e* of the other rows (leave-one-out), and the held-out
row is predicted with the fitted e. Errors are of the predicted tokens/s per GPU.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optimizer import GpuplanError, check, load_catalog
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.efficiency import (
    HIDDEN_HALF_GRID,
    family_of,
    fit_bases,
    precision_class,
    size_factor,
)

DATA = ROOT / "validation" / "throughput_runs.yaml"
TOKENS = "100B"  # throughput does not depend on the run length


def modelled(run: dict, skus: set[str]) -> str | None:
    """Why gpuplan cannot predict this row today (None: it can)."""
    layout = run["layout"]
    if run.get("tokens_per_s_per_gpu") is None:
        return "publishes TFLOPS only"
    if run["kind"] != "dense":
        return f"{run['kind']}: expert/context parallelism not modelled"
    if (layout.get("cp") or 1) > 1:
        return "context parallelism not modelled"
    if run["sku"] not in skus:
        return f"SKU {run['sku']} not in the hardware catalog"
    if run["precision"] == "nvfp4":
        return "nvfp4 training not modelled"
    if run["framework"] == "other":
        return "layout not fully published"
    return None


def problem_for(run: dict, efficiency: float | None) -> Problem:
    method = {"pretrain": "full", "full_finetune": "full", "lora": "lora", "qlora": "qlora"}[run["task"]]
    precision = "fp8" if run["precision"] in ("fp8", "mxfp8") else run["precision"]
    data = {
        "job": {
            "name": run["name"],
            "model": run["model"],
            "method": method,
            "tokens": TOKENS,
            "seq_len": run["seq_len"],
            "global_batch": run["global_batch"],
            "precision": precision,
        },
        "assumptions": {"mfu": efficiency} if efficiency is not None else {},
    }
    return Problem.model_validate(expand_models(data))


def predict(run: dict, catalog, efficiency: float | None) -> float:
    """tokens/s per GPU of the published layout with the given matmul efficiency (None: gpuplan's own)."""
    layout = run["layout"]
    fsdp = layout.get("fsdp")
    zero = 3 if fsdp else (1 if run["framework"] == "megatron" else None)
    shard = layout.get("fsdp_degree") if fsdp else None
    dp = run["gpus"] // ((layout.get("tp") or 1) * (layout.get("pp") or 1))
    recompute = {"selective": "none", "full": "full"}.get(layout.get("recompute"))
    micro_batch = run.get("micro_batch")
    if run["framework"] == "torchtitan" and (layout.get("pp") or 1) > 1:
        # torchtitan's published batch is the local batch per data-parallel rank; its pipeline splits it
        # into micro-batches of pipeline_parallel_microbatch_size, 1 by default (torchtitan JobConfig).
        micro_batch = 1
    result = check(
        problem_for(run, efficiency),
        run["sku"],
        run["gpus"],
        nodes=run.get("nodes"),
        tp=layout.get("tp") or 1,
        pp=layout.get("pp") or 1,
        zero=zero if dp > 1 else None,
        shard_degree=shard if shard and 1 < shard < dp else None,
        micro_batch=micro_batch,
        recompute=recompute,
        compare=False,
        catalog=catalog,
    )
    return result.plan.tokens_per_s / run["gpus"]


def implied_efficiency(run: dict, catalog) -> float:
    """The efficiency at which the prediction equals the published tokens/s (secant in log-log)."""
    target = math.log(run["tokens_per_s_per_gpu"])
    x0, x1 = math.log(0.3), math.log(0.6)
    f0, f1 = (
        math.log(predict(run, catalog, math.exp(x0))) - target,
        math.log(predict(run, catalog, math.exp(x1))) - target,
    )
    for _ in range(6):
        if abs(f1) < 1e-4 or f1 == f0:
            break
        x0, x1, f0 = x1, min(math.log(1.0), max(math.log(0.02), x1 - f1 * (x1 - x0) / (f1 - f0))), f1
        f1 = math.log(predict(run, catalog, math.exp(x1))) - target
    return math.exp(x1)


def family(run: dict, catalog) -> str:
    sku = next(s for s in catalog.skus if s.name == run["sku"])
    return family_of(sku.architecture, sku.form_factor)


def hidden_of(run: dict) -> float:
    return float(problem_for(run, None).job.model.hidden or 0)


def evaluate(rows: list[dict], catalog) -> list[dict]:
    """Leave-one-out: fit on every other row, predict this one."""
    points = [(family(r, catalog), precision_class(r["precision"]), hidden_of(r), r["_implied"]) for r in rows]
    out = []
    for i, run in enumerate(rows):
        train = points[:i] + points[i + 1 :]
        bases, half = fit_bases(train)
        fam, cls, hidden, _ = points[i]
        base = bases.get((fam, cls))
        if base is None:
            run["_predicted"], run["_fitted"] = predict(run, catalog, None), False  # gpuplan's own prior
        else:
            run["_predicted"], run["_fitted"] = predict(run, catalog, base * size_factor(hidden, half)), True
        run["_error"] = run["_predicted"] / run["tokens_per_s_per_gpu"] - 1
        out.append(run)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true", help="print the parameters fitted on every modelled row")
    ap.add_argument("--max-median", type=float, default=None, help="fail above this held-out median |error|")
    ap.add_argument("--max-worst", type=float, default=None, help="fail when a row is off by more than this factor")
    args = ap.parse_args()
    catalog = load_catalog("hardware")
    skus = {s.name for s in catalog.skus}
    runs = yaml.safe_load(DATA.read_text())["runs"]
    rows, skipped = [], []
    for run in runs:
        why = modelled(run, skus)
        if why:
            skipped.append((run["name"], why))
            continue
        try:
            run["_implied"] = implied_efficiency(run, catalog)
            run["_default"] = predict(run, catalog, None)
        except GpuplanError as exc:
            skipped.append((run["name"], f"check refused the published layout: {exc.reason[:90]}"))
            continue
        rows.append(run)
    rows = evaluate(rows, catalog)
    print(
        f"{'row':<44} {'GPU':<9} {'prec':<5} {'published':>10} {'held-out':>10} {'error':>7} {'in-smpl':>7} {'e*':>5}"
    )
    for r in rows:
        before = r["_default"] / r["tokens_per_s_per_gpu"] - 1
        print(
            f"{r['name']:<44} {r['sku']:<9} {r['precision']:<5} {r['tokens_per_s_per_gpu']:>10,.0f} "
            f"{r['_predicted']:>10,.0f} {r['_error']:>+7.1%} {before:>+7.1%} {r['_implied']:>5.2f}"
        )
    errors = [abs(r["_error"]) for r in rows]
    before = [abs(r["_default"] / r["tokens_per_s_per_gpu"] - 1) for r in rows]
    median, worst = statistics.median(errors), max(errors)
    ratio = max(
        max(r["_predicted"] / r["tokens_per_s_per_gpu"], r["tokens_per_s_per_gpu"] / r["_predicted"]) for r in rows
    )
    print(
        f"\n{len(rows)} dense rows, held out: median |error| {median:.1%}, worst {worst:.1%} (within {ratio:.2f}x); "
        f"in sample (gpuplan as shipped, fitted on all rows): median {statistics.median(before):.1%}, "
        f"worst {max(before):.1%}"
    )
    print(f"{len(skipped)} rows not modelled:")
    for name, why in skipped:
        print(f"  {name}: {why}")
    if args.fit:
        points = [(family(r, catalog), precision_class(r["precision"]), hidden_of(r), r["_implied"]) for r in rows]
        bases, half = fit_bases(points)
        print(
            f"\nfitted on all {len(rows)} rows: hidden_half = {half:g} (grid {HIDDEN_HALF_GRID[0]:g}..{HIDDEN_HALF_GRID[-1]:g})"
        )
        for (fam, cls), base in sorted(bases.items()):
            n = sum(1 for p in points if (p[0], p[1]) == (fam, cls))
            print(f"  {fam:<10} {cls:<4} base {base:.3f}  ({n} rows)")
    failed = False
    if args.max_median is not None and median > args.max_median:
        print(f"held-out median |error| {median:.1%} exceeds {args.max_median:.0%}")
        failed = True
    if args.max_worst is not None and ratio > args.max_worst:
        print(f"a row is off by {ratio:.2f}x, beyond {args.max_worst:.2f}x")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
