"""Throughput on published layouts: fit gpuplan's matmul-efficiency model and prove it on held-out rows.

    python bench/throughput.py                     # per-row predicted vs published tokens/s per GPU
    python bench/throughput.py --fit               # also print the parameters a fit on all rows gives
    python bench/throughput.py --max-median 0.10   # exit 1 if gpuplan's median |error| exceeds 10 % (CI)

Rows come from validation/throughput_runs.yaml (pre-training and large fine-tunes),
validation/finetune_runs.yaml (small fine-tunes on one GPU or one node: kind finetune) and
validation/llmfoundry_runs.yaml (MosaicML llm-foundry's MPT tables: a held-out family), each predicted with
``check`` on its published layout (SKU, GPUs, nodes, TP, PP, micro-batch, global batch, ZeRO/FSDP,
recompute, precision, sequence). The rows gpuplan models today are transformers on SKUs in
validation/hardware.yaml; the others are listed as not modelled, with the reason.

Every row names its source family (``family:``, validation/families.yaml: one framework's benchmark
tables, one paper). Predictions per row (docs/design.md section 5.10):

- gpuplan as shipped, the recipe pinned: its defaults were not chosen on these rows; its one term fitted on
  them is the MoE host time per layer (physics/constants.py: MOE_HOST_S_PER_LAYER, fitted on the MoE rows).
- leave one family out (LOFO): every fitted term refitted without the row's whole family, i.e. the MoE host
  time for gpuplan, and the efficiency model of physics/efficiency.py (log e = log base[GPU family,
  precision class] + log size(hidden), fitted on the implied efficiencies e* of the other families' dense
  rows, e* being the efficiency at which gpuplan reproduces a row: secant on log tokens/s) for the fitted
  model. The older leave-one-row-out figures of the fitted model are printed beside them.
- table columns only: gpuplan as shipped with only what the source's table prints pinned (GPUs, TP, PP, VP,
  CP, EP, batch sizes, precision, sequence length; whatever the row's quote shows): the row's
  ``not_in_table`` keys (recompute, dispatcher and overlap, kernels, loss, master weights ... read from a
  recipe), the node placement and any ZeRO stage the table does not print are left to gpuplan's defaults,
  as a user checking a published layout would. Layouts gpuplan refuses that way are counted, with reasons.

Rows of a held-out family (llm-foundry) or GPU (GB200) are reported on their own and fitted on by nothing.
Errors are of the predicted tokens/s per GPU; the thresholds apply to gpuplan as shipped.
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
LLMFOUNDRY_DATA = ROOT / "validation" / "llmfoundry_runs.yaml"
FAMILIES_DATA = ROOT / "validation" / "families.yaml"
DATA_FILES = (DATA, FINETUNE_DATA, LLMFOUNDRY_DATA)
# a fine-tune row's job keys beyond the layout (validation/finetune_runs.yaml), passed as they are
FINETUNE_KEYS = ("lora_rank", "lora_targets", "optimizer", "optimizer_in_backward", "activation_offload")
TOKENS = "100B"  # throughput does not depend on the run length
# What a row's ``not_in_table`` may name: row keys (job fields, the MoE recipe, the FSDP schedule, the
# micro-batch) and layout keys. In the "table columns only" prediction each is left to gpuplan's default.
NOT_IN_TABLE_ROW_KEYS = frozenset({"loss", "kernels", "master_weights", "moe", "zero3_gathers", "micro_batch"})
NOT_IN_TABLE_LAYOUT_KEYS = frozenset(
    {"tp", "pp", "cp", "vp", "ep", "etp", "pp_schedule", "fsdp", "fsdp_degree", "zero", "recompute"}
)
NOT_IN_TABLE_KEYS = NOT_IN_TABLE_ROW_KEYS | NOT_IN_TABLE_LAYOUT_KEYS | frozenset(FINETUNE_KEYS)


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
    return checked(run, catalog, efficiency, host_ms).plan.tokens_per_s / run["gpus"]


def checked(run: dict, catalog, efficiency: float | None = None, host_ms: float | None = None):
    """``check`` of the row's published layout (``table_only(run)``: of what its table prints)."""
    return check(
        problem_for(run, efficiency, host_ms),
        run["sku"],
        run["gpus"],
        **layout_arguments(run),
        compare=False,
        catalog=catalog,
    )


def table_only(run: dict) -> dict:
    """The row as a user checking its published table would give it: without the keys its ``not_in_table``
    names (read from a recipe or a config, not the table), which gpuplan then chooses or defaults;
    ``layout_arguments`` also leaves the node placement and any ZeRO stage the table does not print free."""
    dropped = set(run.get("not_in_table") or ())
    out = {k: v for k, v in run.items() if k not in dropped}
    out["layout"] = {k: v for k, v in run["layout"].items() if k not in dropped}
    out["_table_only"] = True
    return out


def layout_arguments(run: dict) -> dict:
    """``check``'s pinned-layout arguments for a row's published layout: its ``layout:`` (tp, pp, cp, ep, etp,
    vp or pp_schedule, fsdp and fsdp_degree, recompute, and zero where the source states the stage), its
    ``framework``, ``micro_batch`` and ``nodes`` (``nvlink_domains`` where given). bench/validate.py pins its
    rows' layouts with it too. A ``table_only`` row pins no nodes and no ZeRO stage beyond FSDP's or a
    stated one (Megatron's distributed optimizer, ZeRO-1, is a recipe setting), and its micro-batch as given."""
    layout = run["layout"]
    table = run.get("_table_only", False)
    fsdp = layout.get("fsdp")
    zero = 3 if fsdp else (1 if run.get("framework") == "megatron" and not table else None)
    zero = layout.get("zero", zero)
    shard = layout.get("fsdp_degree") if fsdp else None
    dp = run["gpus"] // ((layout.get("tp") or 1) * (layout.get("pp") or 1) * (layout.get("cp") or 1))
    recompute = {"none": "none", "selective": "none", "full": "full"}.get(layout.get("recompute"))
    micro_batch = run.get("micro_batch")
    if run.get("framework") == "torchtitan" and (layout.get("pp") or 1) > 1 and not table:
        # torchtitan's published batch is the local batch per data-parallel rank; its pipeline splits it
        # into micro-batches of pipeline_parallel_microbatch_size, 1 by default (torchtitan JobConfig).
        micro_batch = 1
    return {
        # GB200's node is the 72-GPU NVLink domain, so its rows name the domains (their trays are `nodes`)
        "nodes": None if table else run.get("nvlink_domains", run.get("nodes")),
        "tp": (layout.get("tp") or 1) if not table or "tp" in layout else None,
        "pp": (layout.get("pp") or 1) if not table or "pp" in layout else None,
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
    """The GPU family of the row's SKU (physics/efficiency.py), not its source family (``run['family']``)."""
    sku = next(s for s in catalog.skus if s.name == run["sku"])
    return family_of(sku.architecture, sku.form_factor)


def hidden_of(run: dict) -> float:
    return float(problem_for(run, None).job.model.hidden or 0)


def fit_points(rows: list[dict], catalog, without: str | None = None) -> list[tuple[str, str, float, float]]:
    """The efficiency model's data: (GPU family, precision class, hidden, e*) of the dense rows, less the rows of
    source family ``without``."""
    return [
        (family(r, catalog), precision_class(r["precision"]), hidden_of(r), r["_implied"])
        for r in rows
        if group(r) == "dense" and r["family"] != without
    ]


def fitted_efficiency(run: dict, catalog, bases: dict, half: float) -> float | None:
    base = bases.get((family(run, catalog), precision_class(run["precision"])))
    return None if base is None else base * size_factor(hidden_of(run), half)


def evaluate(rows: list[dict], catalog) -> list[dict]:
    """Dense rows: leave-one-out (fit on every other dense row, predict this one). Other rows are never fitted
    on: each is predicted with the model fitted on all dense rows."""
    dense = [r for r in rows if group(r) == "dense"]
    points = fit_points(rows, catalog)
    for run in rows:
        i = next((k for k, r in enumerate(dense) if r is run), None)
        bases, half = fit_bases(points if i is None else points[:i] + points[i + 1 :])
        run["_predicted"] = predict(run, catalog, fitted_efficiency(run, catalog, bases, half))
        run["_error"] = run["_predicted"] / run["tokens_per_s_per_gpu"] - 1
    return rows


HOST_MS_GRID = (0.0, 1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)


def host_errors(rows: list[dict], catalog) -> tuple[list[dict], dict[float, list[float]]]:
    """The MoE rows the host time is fitted on, and per grid value their log errors (gpuplan otherwise)."""
    moe = [r for r in rows if group(r) == "moe"]
    return moe, {
        c: [math.log(predict(r, catalog, None, c) / r["tokens_per_s_per_gpu"]) for r in moe] for c in HOST_MS_GRID
    }


def best_host_ms(errors: dict[float, list[float]], keep: list[bool]) -> float | None:
    """The grid value with the least median |log error| over the kept MoE rows (None: no row kept)."""
    if not any(keep):
        return None
    return min(HOST_MS_GRID, key=lambda c: statistics.median(abs(e) for e, k in zip(errors[c], keep) if k))


def host_overhead_held_out(rows: list[dict], catalog) -> tuple[float, float, float]:
    """The MoE host time per layer (physics/constants.py: MOE_HOST_S_PER_LAYER) fitted leave-one-out: for each
    MoE row, the grid value with the least median |log error| on the other MoE rows predicts it. Returns the
    value fitted on all rows and the held-out (median |error|, worst ratio)."""
    moe, errors = host_errors(rows, catalog)
    if not moe:
        return 0.0, 0.0, 1.0
    n = len(moe)
    held_out = [errors[best_host_ms(errors, [k != i for k in range(n)]) or 0.0][i] for i in range(n)]
    median = statistics.median(abs(math.exp(e) - 1) for e in held_out)
    return best_host_ms(errors, [True] * n) or 0.0, median, math.exp(max(abs(e) for e in held_out))


def leave_one_family_out(rows: list[dict], catalog) -> None:
    """Each row predicted with every fitted term refitted without its source family: ``_lofo`` gpuplan with the
    MoE host time fitted on the other families' MoE rows (a dense row: gpuplan as shipped, nothing in it is
    fitted on these rows), ``_lofo_fitted`` the efficiency model fitted on the other families' dense rows (with
    that host time on MoE rows)."""
    moe, errors = host_errors(rows, catalog)
    for fam in sorted({r["family"] for r in rows}):
        bases, half = fit_bases(fit_points(rows, catalog, without=fam))
        host_ms = best_host_ms(errors, [r["family"] != fam for r in moe])
        for run in (r for r in rows if r["family"] == fam):
            host = host_ms if run["kind"] == "moe" else None
            run["_lofo_host_ms"] = host
            run["_lofo"] = run["_default"] if host is None else predict(run, catalog, None, host)
            run["_lofo_fitted"] = predict(run, catalog, fitted_efficiency(run, catalog, bases, half), host)


def verdict(result) -> str | None:
    """Why ``check`` would not run a layout (None: it runs): no framework runs it, or it does not fit."""
    if not result.runnable:
        return "not runnable: " + "; ".join(result.not_runnable_because)
    if not result.fits:
        memory = result.plan.memory_gib
        return f"does not fit: {memory.total:.1f} of {memory.capacity:.1f} GiB per GPU"
    return None


def table_columns_only(rows: list[dict], catalog) -> None:
    """Each row predicted by gpuplan as shipped from what its table prints (``table_only``): ``_table`` the
    tokens/s per GPU, or ``_table_refused`` why gpuplan refuses it (an error, a layout no framework runs, or
    one that does not fit): what a user checking the table would be told. The recipe-pinned prediction is made
    whatever check's verdict (``_pinned_verdict`` records it), as it always was; ``_table_any`` is the table's
    prediction made the same way (None only where check raises)."""
    for run in rows:
        try:
            result = checked(table_only(run), catalog)
        except GpuplanError as exc:
            run["_table_refused"] = f"refused: {exc.reason}"
            continue
        run["_table_any"] = result.plan.tokens_per_s / run["gpus"]
        why = verdict(result)
        if why:
            run["_table_refused"] = why
        else:
            run["_table"] = run["_table_any"]


def stats(rows: list[dict], key: str) -> tuple[float, float, float]:
    """(median |error|, worst |error|, worst ratio) of the prediction ``key`` over rows that have it."""
    errors = [r[key] / r["tokens_per_s_per_gpu"] - 1 for r in rows if r.get(key) is not None]
    if not errors:
        return 0.0, 0.0, 1.0
    ratio = max(max(1 + e, 1 / (1 + e)) for e in errors)
    return statistics.median(abs(e) for e in errors), max(abs(e) for e in errors), ratio


def summary(rows: list[dict], label: str) -> tuple[float, float]:
    """Prints and returns gpuplan's (median |error|, worst ratio) over a group of rows."""
    if not rows:
        return 0.0, 1.0
    median, worst, ratio = stats(rows, "_default")
    fit_median, fit_worst, fit_ratio = stats(rows, "_predicted")
    lofo_median, _, lofo_ratio = stats(rows, "_lofo")
    lofo_fit_median, _, lofo_fit_ratio = stats(rows, "_lofo_fitted")
    print(
        f"{len(rows)} {label} rows: gpuplan median |error| {median:.1%}, worst {worst:.1%} (within {ratio:.2f}x); "
        f"fitted model held out: median {fit_median:.1%}, worst {fit_worst:.1%} (within {fit_ratio:.2f}x)"
    )
    print(
        f"    leave one family out: gpuplan median {lofo_median:.1%} (within {lofo_ratio:.2f}x), "
        f"fitted model median {lofo_fit_median:.1%} (within {lofo_fit_ratio:.2f}x)"
    )
    table_rows = [r for r in rows if r.get("_table") is not None]
    refused = [r for r in rows if r.get("_table_refused")]
    table_median, _, table_ratio = stats(table_rows, "_table")
    pinned_median, _, pinned_ratio = stats(table_rows, "_default")
    also = sum(1 for r in refused if r["_pinned_verdict"])
    any_median, _, any_ratio = stats(rows, "_table_any")
    print(
        f"    table columns only: median {table_median:.1%} (within {table_ratio:.2f}x) over {len(table_rows)} rows, "
        f"recipe pinned {pinned_median:.1%} (within {pinned_ratio:.2f}x) on the same rows; {len(refused)} refused "
        f"({also} also on the recipe-pinned layout); predicted whatever the verdict, as the recipe-pinned figure "
        f"is: {any_median:.1%} (within {any_ratio:.2f}x) over {sum(1 for r in rows if r.get('_table_any'))} rows"
    )
    return median, ratio


def evaluate_all() -> tuple:
    """(catalog, rows, skipped): every modelled row predicted (gpuplan's own, the fitted model held out row by
    row and family by family, gpuplan from the table's columns only), and the rows not modelled with the
    reason."""
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    skus = {s.name for s in catalog.skus}
    rows, skipped = [], []
    for run in [run for path in DATA_FILES for run in yaml.safe_load(path.read_text())["runs"]]:
        why = modelled(run, skus)
        if why:
            skipped.append((run["name"], why))
            continue
        try:
            pinned = checked(run, catalog)
            run["_default"] = pinned.plan.tokens_per_s / run["gpus"]
            run["_pinned_verdict"] = verdict(pinned)
            # e* is what the efficiency model is fitted on; a held-out family's rows are fitted on by nothing
            run["_implied"] = None if run["family"] in HELD_OUT_FAMILIES else implied_efficiency(run, catalog)
        except GpuplanError as exc:
            skipped.append((run["name"], f"check refused the published layout: {exc.reason[:90]}"))
            continue
        rows.append(run)
    evaluate(rows, catalog)
    leave_one_family_out(rows, catalog)
    table_columns_only(rows, catalog)
    return catalog, rows, skipped


# GPUs whose rows joined after gpuplan's fitted terms were set (the dense efficiency and the MoE host time):
# their rows are reported on their own and fitted on by nothing, so they test the model as a new GPU would.
HELD_OUT_SKUS = frozenset({"GB200"})
# Source families added after the fitted terms were set (validation/families.yaml), reported on their own
# and fitted on by nothing: they test the model as a new framework's published tables would.
HELD_OUT_FAMILIES = frozenset({"llm-foundry"})
KINDS = (
    ("dense", "dense"),
    ("long_context", "long-context"),
    ("moe", "MoE"),
    ("finetune", "small fine-tune"),
    ("held_out_hardware", "/".join(sorted(HELD_OUT_SKUS))),
    ("held_out_family", "/".join(sorted(HELD_OUT_FAMILIES))),
)


def group(run: dict) -> str:
    """The summary a row counts in: its kind, held_out_family for a source family no fitted term has seen, or
    held_out_hardware for such a GPU."""
    if run["family"] in HELD_OUT_FAMILIES:
        return "held_out_family"
    return "held_out_hardware" if run["sku"] in HELD_OUT_SKUS else run["kind"]


def family_table(rows: list[dict]) -> dict[str, dict[str, tuple[float, float, float, float, int]]]:
    """Prints the leave-one-family-out figures per source family and overall, dense and MoE apart; returns
    {family or 'all': {'dense' | 'moe': (gpuplan median, worst ratio, fitted median, worst ratio, rows)}}."""
    print(
        "\nLeave one family out: every fitted term refitted without the row's source family (gpuplan: the MoE host\n"
        "time; the fitted model: its efficiency bases and size factor too). median |error| (worst ratio), rows:"
    )
    print(f"{'family':<20} {'dense: gpuplan':>22} {'fitted':>16} | {'MoE: gpuplan':>20} {'fitted':>16}")
    families = sorted({r["family"] for r in rows})
    out: dict[str, dict[str, tuple[float, float, float, float, int]]] = {}
    before = [r for r in rows if r["family"] not in HELD_OUT_FAMILIES]
    scopes = [(f, [r for r in rows if r["family"] == f]) for f in families]
    scopes += [("all", rows), ("all but " + "/".join(sorted(HELD_OUT_FAMILIES)), before)]
    for name, members in scopes:
        cells, figures = [], {}
        for kind, picked in (
            ("dense", [r for r in members if r["kind"] != "moe"]),
            ("moe", [r for r in members if r["kind"] == "moe"]),
        ):
            if not picked:
                cells.append(f"{'':>22} {'':>16}" if kind == "dense" else f"{'':>20} {'':>16}")
                continue
            median, _, ratio = stats(picked, "_lofo")
            fit_median, _, fit_ratio = stats(picked, "_lofo_fitted")
            figures[kind] = (median, ratio, fit_median, fit_ratio, len(picked))
            width = 22 if kind == "dense" else 20
            cells.append(
                f"{f'{median:.1%} ({ratio:.2f}x) {len(picked):>3}':>{width}} {f'{fit_median:.1%} ({fit_ratio:.2f}x)':>16}"
            )
        out[name] = figures
        print(f"{name:<20} {cells[0]} | {cells[1]}")
    return out


def summaries(rows: list[dict], catalog) -> dict[str, tuple[float, float]]:
    """Prints the per-group summaries, the MoE host time held out and the leave-one-family-out table;
    returns (median, worst ratio) per group, "moe_held_out" for the host time's leave-one-out figures."""
    out = {kind: summary([r for r in rows if group(r) == kind], label) for kind, label in KINDS}
    host_ms, host_median, host_ratio = host_overhead_held_out(rows, catalog)
    print(
        f"MoE host time per layer fitted on the MoE rows: {host_ms:g} ms (grid {HOST_MS_GRID[0]:g}..{HOST_MS_GRID[-1]:g}); "
        f"held out (leave-one-out): median {host_median:.1%}, worst within {host_ratio:.2f}x"
    )
    lofo_host = sorted({(r["family"], r["_lofo_host_ms"]) for r in rows if r["_lofo_host_ms"] is not None})
    print("  refitted without each family's MoE rows: " + ", ".join(f"{fam} {ms:g} ms" for fam, ms in lofo_host))
    out["moe_held_out"] = (host_median, host_ratio)
    family_table(rows)
    return out


def _cell(run: dict, key: str) -> str:
    value = run.get(key)
    return f"{value / run['tokens_per_s_per_gpu'] - 1:>+7.1%}" if value is not None else f"{'-':>7}"


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
    ap.add_argument(
        "--max-llm-foundry-median", type=float, default=None, help="fail above this llm-foundry median |error|"
    )
    ap.add_argument(
        "--max-llm-foundry-worst",
        type=float,
        default=None,
        help="fail when an llm-foundry row is off by more than this",
    )
    args = ap.parse_args()
    catalog, rows, skipped = evaluate_all()
    print(
        f"{'row':<44} {'family':<16} {'GPU':<9} {'prec':<5} {'published':>10} {'gpuplan':>10} {'error':>7} "
        f"{'LOFO':>7} {'table':>7} {'fit LOO':>7} {'fit LOFO':>8} {'e*':>5}"
    )
    for r in rows:
        implied = f"{r['_implied']:>5.2f}" if r["_implied"] is not None else f"{'-':>5}"
        print(
            f"{r['name']:<44} {r['family']:<16} {r['sku']:<9} {r['precision']:<5} {r['tokens_per_s_per_gpu']:>10,.0f} "
            f"{r['_default']:>10,.0f} {_cell(r, '_default')} {_cell(r, '_lofo')} {_cell(r, '_table')} "
            f"{_cell(r, '_predicted')} {_cell(r, '_lofo_fitted'):>8} {implied}"
        )
    print()
    figures = summaries(rows, catalog)
    (median, ratio), (moe_median, moe_ratio) = figures["dense"], figures["moe"]
    host_median, host_ratio = figures["moe_held_out"]
    unrun = [r for r in rows if r["_pinned_verdict"]]
    print(f"\nRecipe pinned: {len(unrun)} rows that check would not run, predicted anyway (gpuplan's rules or memory):")
    for r in unrun:
        print(f"  {r['name']}: {r['_pinned_verdict'][:150]}")
    refused = [r for r in rows if r.get("_table_refused")]
    print(
        f"Table columns only: {len(refused)} rows refused, not predicted ({sum(1 for r in refused if r['_pinned_verdict'])} also above):"
    )
    for r in refused:
        print(f"  {r['name']}: {r['_table_refused'][:150]}")
    print(f"\n{len(skipped)} rows not modelled:")
    for name, why in skipped:
        print(f"  {name}: {why}")
    if args.fit:
        points = fit_points(rows, catalog)
        bases, half = fit_bases(points)
        print(
            f"\nfitted on all {len(points)} dense rows: hidden_half = {half:g} (grid {HIDDEN_HALF_GRID[0]:g}..{HIDDEN_HALF_GRID[-1]:g})"
        )
        for (fam, cls), base in sorted(bases.items()):
            n = sum(1 for p in points if (p[0], p[1]) == (fam, cls))
            print(f"  {fam:<10} {cls:<4} base {base:.3f}  ({n} rows)")
    finetune_median, finetune_ratio = figures["finetune"]
    gb200_median, gb200_ratio = figures["held_out_hardware"]
    foundry_median, foundry_ratio = figures["held_out_family"]
    limits = [
        # the MoE host time is fitted on these rows, so their held-out figure counts too
        (args.max_moe_median, max(moe_median, host_median), "MoE median |error| {v:.1%} (held out) exceeds {x:.0%}"),
        (args.max_moe_worst, max(moe_ratio, host_ratio), "an MoE row is off by {v:.2f}x (held out), beyond {x:.2f}x"),
        (args.max_finetune_median, finetune_median, "fine-tune median |error| {v:.1%} exceeds {x:.0%}"),
        (args.max_finetune_worst, finetune_ratio, "a fine-tune row is off by {v:.2f}x, beyond {x:.2f}x"),
        (args.max_gb200_median, gb200_median, "GB200 median |error| {v:.1%} exceeds {x:.0%}"),
        (args.max_gb200_worst, gb200_ratio, "a GB200 row is off by {v:.2f}x, beyond {x:.2f}x"),
        (args.max_llm_foundry_median, foundry_median, "llm-foundry median |error| {v:.1%} exceeds {x:.0%}"),
        (args.max_llm_foundry_worst, foundry_ratio, "an llm-foundry row is off by {v:.2f}x, beyond {x:.2f}x"),
        (args.max_median, median, "held-out median |error| {v:.1%} exceeds {x:.0%}"),
        (args.max_worst, ratio, "a row is off by {v:.2f}x, beyond {x:.2f}x"),
    ]
    failed = [text.format(v=value, x=limit) for limit, value, text in limits if limit is not None and value > limit]
    for line in failed:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
