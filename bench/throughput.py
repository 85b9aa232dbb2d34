"""Throughput on published layouts: fit gpuplan's matmul-efficiency model and prove it on held-out rows.

    python bench/throughput.py                     # per-row predicted vs published tokens/s per GPU
    python bench/throughput.py --fit               # also print the parameters a fit on all rows gives
    python bench/throughput.py --max-median 0.10   # exit 1 if gpuplan's median |error| exceeds 10 % (CI)

Rows come from validation/throughput_runs.yaml (pre-training and large fine-tunes) and
validation/finetune_runs.yaml (small fine-tunes on one GPU or one node: kind finetune), each predicted with ``check`` on its published layout
(SKU, GPUs, nodes, TP, PP, micro-batch, global batch, ZeRO/FSDP, recompute, precision, sequence). The
rows gpuplan models today are dense transformers without context or expert parallelism on SKUs in
catalogs/hardware.yaml; the others are listed as not modelled, with the reason.

Two predictions per row (docs/design.md section 5.10): gpuplan as shipped (its defaults were not chosen
on these rows, so the rows are held out from it), and the efficiency model of physics/efficiency.py
fitted on the other rows (leave-one-out): for each row the efficiency e* at which gpuplan reproduces the
published figure (secant on log tokens/s), then log e = log base[family, precision class] + log
size(hidden) fitted to the other rows' e*. Errors are of the predicted tokens/s per GPU; the thresholds
apply to gpuplan as shipped.
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
FINETUNE_DATA = ROOT / "validation" / "finetune_runs.yaml"
# a fine-tune row's job keys beyond the layout (validation/finetune_runs.yaml), passed as they are
FINETUNE_KEYS = ("lora_rank", "lora_targets", "optimizer", "optimizer_in_backward", "activation_offload")
TOKENS = "100B"  # throughput does not depend on the run length


def modelled(run: dict, skus: set[str]) -> str | None:
    """Why gpuplan cannot predict this row today (None: it can)."""
    if run.get("tokens_per_s_per_gpu") is None:
        return "publishes TFLOPS only"
    if run["sku"] not in skus:
        return f"SKU {run['sku']} not in the hardware catalog"
    if run["framework"] == "other":
        return "layout not fully published"
    return None


def problem_for(run: dict, efficiency: float | None, host_ms: float | None = None) -> Problem:
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
            "loss": run.get("loss", "standard"),
            "kernels": run.get("kernels", "auto"),
            # pure bf16 recipes keep no fp32 master copy (the row's master_weights_source)
            "master_weights": run.get("master_weights", True),
            # Megatron-Core's fused kernels keep fewer activations than eager PyTorch (physics/memory.py)
            "framework": "megatron" if run["framework"] == "megatron" else "auto",
            **{key: run[key] for key in FINETUNE_KEYS if key in run},
        },
        "assumptions": {
            **({"mfu": efficiency} if efficiency is not None else {}),
            **({"moe_host_ms_per_layer": host_ms} if host_ms is not None else {}),
            **moe_assumptions(run),
            # the published recipe's FSDP schedule under gradient accumulation (the row's zero3_gathers_source)
            **({"zero3_gathers": run["zero3_gathers"]} if run.get("zero3_gathers") else {}),
        },
    }
    return Problem.model_validate(expand_models(data))


def moe_assumptions(run: dict) -> dict:
    """The published recipe's expert dispatcher and all-to-all overlap (the row's ``moe:``): an overlapped
    all-to-all (Megatron-Core's overlap_moe_expert_parallel_comm) hides behind another micro-batch's compute."""
    moe = run.get("moe") or {}
    out: dict = {}
    if moe.get("dispatcher"):
        out["moe_dispatcher"] = moe["dispatcher"]
    if moe.get("a2a_overlap"):
        out["moe_overlap"] = 1.0
    return out


def predict(run: dict, catalog, efficiency: float | None, host_ms: float | None = None) -> float:
    """tokens/s per GPU of the published layout with the given matmul efficiency and MoE host time per layer
    (None: gpuplan's own)."""
    result = check(
        problem_for(run, efficiency, host_ms),
        run["sku"],
        run["gpus"],
        **layout_arguments(run),
        compare=False,
        catalog=catalog,
    )
    return result.plan.tokens_per_s / run["gpus"]


def layout_arguments(run: dict) -> dict:
    """``check``'s pinned-layout arguments for a row's published layout: its ``layout:`` (tp, pp, cp, ep, etp,
    vp or pp_schedule, fsdp and fsdp_degree, recompute, and zero where the source states the stage), its
    ``framework``, ``micro_batch`` and ``nodes`` (``nvlink_domains`` where given). bench/validate.py pins its rows' layouts with it too."""
    layout = run["layout"]
    fsdp = layout.get("fsdp")
    zero = 3 if fsdp else (1 if run.get("framework") == "megatron" else None)
    zero = layout.get("zero", zero)
    shard = layout.get("fsdp_degree") if fsdp else None
    dp = run["gpus"] // ((layout.get("tp") or 1) * (layout.get("pp") or 1) * (layout.get("cp") or 1))
    recompute = {"none": "none", "selective": "none", "full": "full"}.get(layout.get("recompute"))
    micro_batch = run.get("micro_batch")
    if run.get("framework") == "torchtitan" and (layout.get("pp") or 1) > 1:
        # torchtitan's published batch is the local batch per data-parallel rank; its pipeline splits it
        # into micro-batches of pipeline_parallel_microbatch_size, 1 by default (torchtitan JobConfig).
        micro_batch = 1
    return {
        # GB200's node is the 72-GPU NVLink domain, so its rows name the domains (their trays are `nodes`)
        "nodes": run.get("nvlink_domains", run.get("nodes")),
        "tp": layout.get("tp") or 1,
        "pp": layout.get("pp") or 1,
        "zero": zero if dp > 1 else None,
        "shard_degree": shard if shard and 1 < shard < dp else None,
        "micro_batch": micro_batch,
        "recompute": recompute,
        "cp": layout.get("cp") if (layout.get("cp") or 1) > 1 else None,
        "ep": layout.get("ep") if (layout.get("ep") or 1) > 1 else None,
        "expert_tp": layout.get("etp"),
        "virtual_stages": _virtual_stages(layout),
    }


def _virtual_stages(layout: dict) -> int | None:
    """The published interleaving: vp, or the pipeline schedule's name (plain 1F1B: 1); None when unstated."""
    if (layout.get("pp") or 1) <= 1:
        return None
    if layout.get("vp"):
        return int(layout["vp"])
    schedule = str(layout.get("pp_schedule") or "")
    return 1 if schedule == "1f1b" else None


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
    """Dense rows: leave-one-out (fit on every other dense row, predict this one). Long-context rows are
    never fitted on: each is predicted with the model fitted on all dense rows."""
    dense = [r for r in rows if group(r) == "dense"]
    points = [(family(r, catalog), precision_class(r["precision"]), hidden_of(r), r["_implied"]) for r in dense]
    for run in rows:
        i = next((k for k, r in enumerate(dense) if r is run), None)
        bases, half = fit_bases(points if i is None else points[:i] + points[i + 1 :])
        base = bases.get((family(run, catalog), precision_class(run["precision"])))
        efficiency = None if base is None else base * size_factor(hidden_of(run), half)
        run["_predicted"] = predict(run, catalog, efficiency)  # None: gpuplan's own prior
        run["_error"] = run["_predicted"] / run["tokens_per_s_per_gpu"] - 1
    return rows


HOST_MS_GRID = (0.0, 1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)


def host_overhead_held_out(rows: list[dict], catalog) -> tuple[float, float, float]:
    """The MoE host time per layer (physics/constants.py: MOE_HOST_S_PER_LAYER) fitted leave-one-out: for each
    MoE row, the grid value with the least median |log error| on the other MoE rows predicts it. Returns the
    value fitted on all rows and the held-out (median |error|, worst ratio)."""
    moe = [r for r in rows if group(r) == "moe"]
    if not moe:
        return 0.0, 0.0, 1.0
    errors = {
        c: [math.log(predict(r, catalog, None, c) / r["tokens_per_s_per_gpu"]) for r in moe] for c in HOST_MS_GRID
    }

    def best(skip: int | None) -> float:
        return min(
            HOST_MS_GRID,
            key=lambda c: statistics.median(abs(e) for i, e in enumerate(errors[c]) if i != skip),
        )

    held_out = [errors[best(i)][i] for i in range(len(moe))]
    median = statistics.median(abs(math.exp(e) - 1) for e in held_out)
    return best(None), median, math.exp(max(abs(e) for e in held_out))


def summary(rows: list[dict], label: str) -> tuple[float, float]:
    """Prints and returns gpuplan's (median |error|, worst ratio) over a group of rows."""
    if not rows:
        return 0.0, 1.0

    def stats(key: str) -> tuple[float, float, float]:
        errors = [r[key] / r["tokens_per_s_per_gpu"] - 1 for r in rows]
        ratio = max(max(1 + e, 1 / (1 + e)) for e in errors)
        return statistics.median(abs(e) for e in errors), max(abs(e) for e in errors), ratio

    median, worst, ratio = stats("_default")
    fit_median, fit_worst, fit_ratio = stats("_predicted")
    print(
        f"{len(rows)} {label} rows: gpuplan median |error| {median:.1%}, worst {worst:.1%} (within {ratio:.2f}x); "
        f"fitted model held out: median {fit_median:.1%}, worst {fit_worst:.1%} (within {fit_ratio:.2f}x)"
    )
    return median, ratio


def evaluate_all() -> tuple:
    """(catalog, rows, skipped): every modelled row predicted (gpuplan's own and the fitted model held out),
    and the rows not modelled with the reason."""
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    skus = {s.name for s in catalog.skus}
    rows, skipped = [], []
    for run in [run for path in (DATA, FINETUNE_DATA) for run in yaml.safe_load(path.read_text())["runs"]]:
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
    return catalog, evaluate(rows, catalog), skipped


# GPUs whose rows joined after gpuplan's fitted terms were set (the dense efficiency and the MoE host time):
# their rows are reported on their own and fitted on by nothing, so they test the model as a new GPU would.
HELD_OUT_SKUS = frozenset({"GB200"})
KINDS = (
    ("dense", "dense"),
    ("long_context", "long-context"),
    ("moe", "MoE"),
    ("finetune", "small fine-tune"),
    ("held_out_hardware", "/".join(sorted(HELD_OUT_SKUS))),
)


def group(run: dict) -> str:
    """The summary a row counts in: its kind, or held_out_hardware for a GPU no fitted term has seen."""
    return "held_out_hardware" if run["sku"] in HELD_OUT_SKUS else run["kind"]


def summaries(rows: list[dict], catalog) -> dict[str, tuple[float, float]]:
    """Prints the dense, long-context and MoE summaries and the MoE host time held out; returns (median,
    worst ratio) per kind, "moe_held_out" for the host time's leave-one-out figures."""
    out = {kind: summary([r for r in rows if group(r) == kind], label) for kind, label in KINDS}
    host_ms, host_median, host_ratio = host_overhead_held_out(rows, catalog)
    print(
        f"MoE host time per layer fitted on the MoE rows: {host_ms:g} ms (grid {HOST_MS_GRID[0]:g}..{HOST_MS_GRID[-1]:g}); "
        f"held out (leave-one-out): median {host_median:.1%}, worst within {host_ratio:.2f}x"
    )
    out["moe_held_out"] = (host_median, host_ratio)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true", help="print the parameters fitted on every modelled row")
    ap.add_argument("--max-median", type=float, default=None, help="fail above this held-out median |error|")
    ap.add_argument("--max-worst", type=float, default=None, help="fail when a row is off by more than this factor")
    ap.add_argument("--max-moe-median", type=float, default=None, help="fail above this MoE median |error|")
    ap.add_argument("--max-moe-worst", type=float, default=None, help="fail when an MoE row is off by more than this")
    ap.add_argument("--max-finetune-median", type=float, default=None, help="fail above this fine-tune median |error|")
    ap.add_argument(
        "--max-finetune-worst", type=float, default=None, help="fail when a fine-tune row is off by more than this"
    )
    ap.add_argument("--max-gb200-median", type=float, default=None, help="fail above this GB200 median |error|")
    ap.add_argument(
        "--max-gb200-worst", type=float, default=None, help="fail when a GB200 row is off by more than this"
    )
    args = ap.parse_args()
    catalog, rows, skipped = evaluate_all()
    print(f"{'row':<44} {'GPU':<9} {'prec':<5} {'published':>10} {'gpuplan':>10} {'error':>7} {'fit LOO':>7} {'e*':>5}")
    for r in rows:
        shipped = r["_default"] / r["tokens_per_s_per_gpu"] - 1
        print(
            f"{r['name']:<44} {r['sku']:<9} {r['precision']:<5} {r['tokens_per_s_per_gpu']:>10,.0f} "
            f"{r['_default']:>10,.0f} {shipped:>+7.1%} {r['_error']:>+7.1%} {r['_implied']:>5.2f}"
        )
    print()
    figures = summaries(rows, catalog)
    (median, ratio), (moe_median, moe_ratio) = figures["dense"], figures["moe"]
    host_median, host_ratio = figures["moe_held_out"]
    print(f"{len(skipped)} rows not modelled:")
    for name, why in skipped:
        print(f"  {name}: {why}")
    if args.fit:
        dense = [r for r in rows if group(r) == "dense"]
        points = [(family(r, catalog), precision_class(r["precision"]), hidden_of(r), r["_implied"]) for r in dense]
        bases, half = fit_bases(points)
        print(
            f"\nfitted on all {len(dense)} dense rows: hidden_half = {half:g} (grid {HIDDEN_HALF_GRID[0]:g}..{HIDDEN_HALF_GRID[-1]:g})"
        )
        for (fam, cls), base in sorted(bases.items()):
            n = sum(1 for p in points if (p[0], p[1]) == (fam, cls))
            print(f"  {fam:<10} {cls:<4} base {base:.3f}  ({n} rows)")
    finetune_median, finetune_ratio = figures["finetune"]
    gb200_median, gb200_ratio = figures["held_out_hardware"]
    limits = [
        # the MoE host time is fitted on these rows, so their held-out figure counts too
        (args.max_moe_median, max(moe_median, host_median), "MoE median |error| {v:.1%} (held out) exceeds {x:.0%}"),
        (args.max_moe_worst, max(moe_ratio, host_ratio), "an MoE row is off by {v:.2f}x (held out), beyond {x:.2f}x"),
        (args.max_finetune_median, finetune_median, "fine-tune median |error| {v:.1%} exceeds {x:.0%}"),
        (args.max_finetune_worst, finetune_ratio, "a fine-tune row is off by {v:.2f}x, beyond {x:.2f}x"),
        (args.max_gb200_median, gb200_median, "GB200 median |error| {v:.1%} exceeds {x:.0%}"),
        (args.max_gb200_worst, gb200_ratio, "a GB200 row is off by {v:.2f}x, beyond {x:.2f}x"),
        (args.max_median, median, "held-out median |error| {v:.1%} exceeds {x:.0%}"),
        (args.max_worst, ratio, "a row is off by {v:.2f}x, beyond {x:.2f}x"),
    ]
    failed = [text.format(v=value, x=limit) for limit, value, text in limits if limit is not None and value > limit]
    for line in failed:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
