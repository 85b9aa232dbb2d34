"""Throughput on published layouts: fit gpuplan's matmul-efficiency model and prove it on held-out rows.

    python bench/throughput.py                     # per-row predicted vs published tokens/s per GPU
    python bench/throughput.py --fit               # also print the parameters a fit on all rows gives
    python bench/throughput.py --max-median 0.10   # exit 1 if gpuplan's median |error| exceeds 10 % (CI)

Rows come from validation/throughput_runs.yaml (pre-training and large fine-tunes),
validation/finetune_runs.yaml (small fine-tunes on one GPU or one node: kind finetune) and
validation/llmfoundry_runs.yaml (MosaicML llm-foundry's MPT tables: a held-out family), each predicted with
``check`` on its published layout (SKU, GPUs, nodes, TP, PP, micro-batch, global batch, ZeRO/FSDP,
recompute, precision, sequence; torch.compile and the attention kernels where the recipe names them: the rows'
``compile`` and ``attention``). The rows gpuplan models today are transformers on SKUs in
validation/hardware.yaml; the others are listed as not modelled, with the reason. The fit states the matmul
efficiency only (``assumptions.matmul_efficiency``): attention keeps its kernels' published figures
(physics/attention.py), and a compiled row's e* is divided by the published compile speed-up of the other
source families (physics/efficiency.py compile_speedup), as a fused-kernel row's is by the fitted fused ratio.

Every row names its source family (``family:``, validation/families.yaml: one framework's benchmark
tables, one paper). Predictions per row (docs/design.md section 5.10):

- gpuplan as shipped, the recipe pinned: its defaults were not chosen on these rows; its one term fitted on
  them is the MoE host time, per layer and per local expert (physics/constants.py: MOE_HOST_S_PER_LAYER and
  MOE_HOST_S_PER_LOCAL_EXPERT, fitted together on the MoE rows).
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
import itertools
import math
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lofo_groups import print_groups  # noqa: E402

from optimizer import CheckRequest, GpuplanError, check, load_catalog
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.constants import DEFAULT_COMPUTE_EFFICIENCY, FALLBACK_COMPUTE_EFFICIENCY, FITTED_OVERLAP
from optimizer.physics.efficiency import (
    FITTED_BASE,
    FITTED_FUSED_RATIO,
    FITTED_HALF_PER_RIDGE,
    FUSED_RATIO_GRID,
    HALF_PER_RIDGE_GRID,
    MIN_SOURCE_FAMILIES,
    OVERLAP_GRID,
    compile_speedup,
    family_of,
    fit_bases,
    fit_cost,
    ridge,
    size_factor,
    supported,
)
from optimizer.planning.frameworks import FRAMEWORKS

# The MoE host time as fitted: (ms per MoE layer and micro-batch, ms per local expert)
HostMs = tuple[float, float]

DATA = ROOT / "validation" / "throughput_runs.yaml"
FINETUNE_DATA = ROOT / "validation" / "finetune_runs.yaml"
LLMFOUNDRY_DATA = ROOT / "validation" / "llmfoundry_runs.yaml"
FAMILIES_DATA = ROOT / "validation" / "families.yaml"
DATA_FILES = (DATA, FINETUNE_DATA, LLMFOUNDRY_DATA)
# First-seen Megatron-Core MoE families whose expressible MoE rows joined the MoE host-time fit (session 38, after
# their first-seen figures were recorded: BENCHMARKS.md, tests/validation/test_new_families.py and
# test_unseen_families_3.py): with Megatron-Bridge's the host time had one Megatron-Core MoE family to identify it
# and held out by family it fell to 0 (Megatron-Bridge's MoE rows +35-58 %). Their rows stay in their files.
MOE_FOLDED = (
    (ROOT / "validation" / "unseen_runs.yaml", "megatron-moe-modelzoo"),
    (ROOT / "validation" / "unseen_families_3.yaml", "xtuner-megatron-moe"),
)
MOE_FOLDED_FAMILIES = frozenset(family for _, family in MOE_FOLDED)
# a fine-tune row's job keys beyond the layout (validation/finetune_runs.yaml), passed as they are
FINETUNE_KEYS = (
    "lora_rank",
    "lora_targets",
    "optimizer",
    "optimizer_in_backward",
    "activation_offload",
    "optimizer_implementation",
    "bytes_per_param",
    "lora_dropout",
    "lora_adapter_dtype",
)
TOKENS = "100B"  # throughput does not depend on the run length
# The data-parallel overlap the rows are predicted at (assumptions.overlap); None: gpuplan's, FITTED_OVERLAP. The
# fit sets each value of OVERLAP_GRID in turn (at_overlap).
OVERLAP: float | None = None
# What a row's ``not_in_table`` may name: row keys (job fields, the MoE recipe, the FSDP schedule, the
# micro-batch) and layout keys. In the "table columns only" prediction each is left to gpuplan's default.
NOT_IN_TABLE_ROW_KEYS = frozenset(
    {"loss", "kernels", "attention", "master_weights", "moe", "zero3_gathers", "micro_batch"}
)
NOT_IN_TABLE_LAYOUT_KEYS = frozenset(
    {"tp", "pp", "cp", "vp", "ep", "etp", "pp_schedule", "fsdp", "fsdp_degree", "zero", "recompute"}
)
NOT_IN_TABLE_KEYS = NOT_IN_TABLE_ROW_KEYS | NOT_IN_TABLE_LAYOUT_KEYS | frozenset(FINETUNE_KEYS)
# Row keys no published table prints, read from the recipe wherever a row states them (their ``*_source``): the
# "table columns only" prediction leaves them to gpuplan's default on every row.
RECIPE_ONLY_ROW_KEYS = frozenset({"gradient_dtype", "overlap"})


def modelled(run: dict, skus: set[str]) -> str | None:
    """Why gpuplan cannot predict this row today (None: it can)."""
    if run.get("tokens_per_s_per_gpu") is None:
        return "publishes TFLOPS only"
    if run["sku"] not in skus:
        return f"SKU {run['sku']} not in the hardware catalog"
    if run["framework"] == "other":
        return "layout not fully published"
    return None


# The frameworks whose rows are costed under their own rules; the others' rows under auto (the FSDP-family rows'
# rules are what auto costs them by).
PINNED_FRAMEWORKS = frozenset({"megatron", "deepspeed"})


def problem_for(run: dict, efficiency: float | None, host_ms: HostMs | None = None, pinned: bool = False) -> Problem:
    """The row as a job; ``pinned``: under the row's own framework (else Megatron's rows under it, the rest auto)."""
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
            "compile": run.get("compile", False),
            "attention": run.get("attention", "flash"),
            # pure bf16 recipes keep no fp32 master copy (the row's master_weights_source)
            "master_weights": run.get("master_weights", True),
            # the dtype gradients reduce in where the recipe states it (Megatron-LM's fp32 default, nanotron's,
            # torchtitan's and OLMo-core's fp32 reduce), else the framework's own (job.gradient_dtype auto)
            "gradient_dtype": run.get("gradient_dtype", "auto"),
            # Megatron-Core's fused kernels keep fewer activations than eager PyTorch (physics/memory.py), and
            # DeepSpeed's ZeRO-3 fetches each module in a hook of its own (physics/zero3_hooks.py)
            "framework": run["framework"] if pinned or run["framework"] in PINNED_FRAMEWORKS else "auto",
            **{key: run[key] for key in FINETUNE_KEYS if key in run},
            # Megatron-Core's --recompute-modules where the recipe names them (physics/recompute_modules.py)
            **({"recompute_modules": run["recompute_modules"]} if run.get("recompute_modules") else {}),
            # where backward leaves the gradients under accumulation (job.gradient_accumulator: KempnerForge's FSDP2
            # without gradient sync until the last micro-batch, physics/fsdp_memory.py)
            **({"gradient_accumulator": run["gradient_accumulator"]} if run.get("gradient_accumulator") else {}),
            # the context-parallel exchange where the row's trainer names one (job.context_parallel: XTuner's Ulysses)
            **({"context_parallel": run["context_parallel"]} if run.get("context_parallel") else {}),
        },
        "assumptions": {
            # the rows' matmul efficiency; attention at its kernels' own (physics/attention.py)
            **({"matmul_efficiency": efficiency} if efficiency is not None else {}),
            **(
                {"moe_host_ms_per_layer": host_ms[0], "moe_host_ms_per_local_expert": host_ms[1]}
                if host_ms is not None
                else {}
            ),
            **moe_assumptions(run),
            # the published recipe's FSDP schedule under gradient accumulation (the row's zero3_gathers_source)
            **({"zero3_gathers": run["zero3_gathers"]} if run.get("zero3_gathers") else {}),
            # the data-parallel overlap the row's recipe states (its overlap_source), else the fit's value
            **({"overlap": OVERLAP} if OVERLAP is not None else {}),
            **({"overlap": run["overlap"]} if "overlap" in run else {}),
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
    if moe.get("routing"):  # the benchmark's gate where it is not a learned router (AutoModel's FakeBalancedGate)
        out["moe_routing"] = moe["routing"]
    if moe.get("experts"):  # transformers' experts implementation where the row trains its modeling code
        out["experts_implementation"] = moe["experts"]
    return out


def predict(run: dict, catalog, efficiency: float | None, host_ms: HostMs | None = None) -> float:
    """tokens/s per GPU of the published layout with the given matmul efficiency and MoE host time
    (None: gpuplan's own)."""
    return checked(run, catalog, efficiency, host_ms).plan.tokens_per_s / run["gpus"]


def ratio(first: str, second: str) -> tuple[float, float]:
    """(published, predicted) speed of fine-tune row ``first`` over row ``second`` (tokens/s per GPU): a
    published pair of one stack on one GPU (validation/finetune_runs.yaml) that one setting tells apart."""
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    rows = {r["name"]: r for r in yaml.safe_load(FINETUNE_DATA.read_text())["runs"]}
    a, b = rows[first], rows[second]
    published = a["tokens_per_s_per_gpu"] / b["tokens_per_s_per_gpu"]
    return published, predict(a, catalog, None) / predict(b, catalog, None)


def checked(run: dict, catalog, efficiency: float | None = None, host_ms: HostMs | None = None, pinned: bool = False):
    """``check`` of the row's published layout (``table_only(run)``: of what its table prints)."""
    return check(
        problem_for(run, efficiency, host_ms, pinned),
        CheckRequest(run["sku"], run["gpus"], **layout_arguments(run), compare=False),
        catalog=catalog,
    )


def table_only(run: dict) -> dict:
    """The row as a user checking its published table would give it: without the keys its ``not_in_table``
    names (read from a recipe or a config, not the table), which gpuplan then chooses or defaults;
    ``layout_arguments`` also leaves the node placement and any ZeRO stage the table does not print free."""
    dropped = set(run.get("not_in_table") or ()) | RECIPE_ONLY_ROW_KEYS
    out = {k: v for k, v in run.items() if k not in dropped}
    out["layout"] = {k: v for k, v in run["layout"].items() if k not in dropped}
    out["_table_only"] = True
    return out


def layout_arguments(run: dict) -> dict:
    """``check``'s pinned-layout arguments for a row's published layout: its ``layout:`` (tp, pp, cp, ep, etp,
    vp or pp_schedule, fsdp and fsdp_degree, recompute, offload, and zero where the source states the stage), its
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
    stated = str(layout.get("recompute") or "")
    # selective recompute of the attention core keeps what FlashAttention keeps; of Megatron-Core's other modules
    # (the row's recompute_modules), less
    selective = "selective" if run.get("recompute_modules") else "none"
    recompute = {"none": "none", "selective": selective, "op": "op", "full": "full"}.get(stated)
    if stated.startswith("layers:"):  # a share of the blocks checkpointed, as check's --recompute layers:N
        recompute = stated
    micro_batch = run.get("micro_batch")
    return {
        # GB200's node is the 72-GPU NVLink domain, so its rows name the domains (their trays are `nodes`)
        "nodes": None if table else run.get("nvlink_domains", run.get("nodes")),
        "tp": (layout.get("tp") or 1) if not table or "tp" in layout else None,
        "pp": (layout.get("pp") or 1) if not table or "pp" in layout else None,
        "zero": zero if dp > 1 else None,
        "shard_degree": shard if shard and 1 < shard < dp else None,
        "micro_batch": micro_batch,
        "recompute": recompute,
        # a stated CP (1 included) is pinned: left free, check may split a long sequence the run did not
        "cp": (layout.get("cp") or 1) if "cp" in layout else None,
        # a stated EP (1 included) is pinned: left free, check put FlagPerf's EP 1 Megatron MoE rows on EP 4
        "ep": layout.get("ep"),
        "expert_tp": layout.get("etp"),
        "virtual_stages": _virtual_stages(layout),
        # what the run offloads to the host where the row states it (ZeRO-Offload's optimizer: DeepSpeed's
        # offload_optimizer device cpu)
        "offload": layout.get("offload"),
    }


def _virtual_stages(layout: dict) -> int | None:
    """The published interleaving: vp, or the pipeline schedule's name (plain 1F1B: 1); None when unstated."""
    if (layout.get("pp") or 1) <= 1:
        return None
    if layout.get("vp"):
        return int(layout["vp"])
    schedule = str(layout.get("pp_schedule") or "")
    return 1 if schedule == "1f1b" else None


@contextmanager
def at_overlap(value: float | None) -> Iterator[None]:
    """Predict every row at data-parallel overlap ``value`` (None: gpuplan's) inside the block."""
    global OVERLAP
    before, OVERLAP = OVERLAP, value
    try:
        yield
    finally:
        OVERLAP = before


def implied_efficiency(run: dict, catalog, start: float | None = None) -> float:
    """The efficiency at which the prediction equals the published tokens/s (secant in log-log), from 0.3 and 0.6
    or from ``start`` and 1.1 x it (an e* found at a nearby setting)."""
    target = math.log(run["tokens_per_s_per_gpu"])
    x0, x1 = (math.log(0.3), math.log(0.6)) if start is None else (math.log(start), math.log(min(1.0, start * 1.1)))
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


def sku_of(run: dict, catalog):
    return next(s for s in catalog.skus if s.name == run["sku"])


def family(run: dict, catalog) -> str:
    """The GPU family of the row's SKU (physics/efficiency.py), not its source family (``run['family']``)."""
    sku = sku_of(run, catalog)
    return family_of(sku.architecture, sku.form_factor)


def hidden_of(run: dict) -> float:
    return float(problem_for(run, None).job.model.hidden or 0)


def ridge_of(run: dict, catalog) -> float:
    """The SKU's 16-bit ridge point: its dense BF16 peak over its HBM bandwidth (FLOP per byte). The efficiency
    is a share of the 16-bit peak at every precision (physics/precision.py)."""
    sku = sku_of(run, catalog)
    tflops = sku.dense_tflops("bf16")
    return ridge(None if tflops is None else tflops * 1e12, sku.hbm_bandwidth_gb_per_s * 1e9)


# Every row without experts is a dense row of the efficiency fit: pre-training, long context, the small
# fine-tunes, llm-foundry's tables and the GB200 rows, of every source family.
def is_dense(run: dict) -> bool:
    return run["kind"] != "moe"


def is_fused(run: dict, catalog) -> bool:
    """Whether gpuplan costs the row at the fused-kernel ratio: its framework runs Transformer Engine's fused
    layers (planning/frameworks.py fused_kernels) or the row states them (kernels: fused without compile), on a
    GPU with an FP8 rate (planning/context.py fused_efficiency_ratio)."""
    stated = run.get("kernels") == "fused" and not run.get("compile")
    framework = FRAMEWORKS[run["framework"]].fused_kernels and run.get("kernels") != "eager"
    return (framework or stated) and bool(sku_of(run, catalog).dense_fp8_tflops)


def is_compiled(run: dict, catalog) -> bool:
    """Whether gpuplan costs the row at the compiled ratio: it ran under torch.compile (the row's ``compile``)
    in a framework without Transformer Engine's fused layers (physics/time.py step_time)."""
    return bool(run.get("compile")) and (
        not FRAMEWORKS[run["framework"]].fused_kernels or run.get("kernels") == "eager"
    )


def kernel_ratio(run: dict, catalog, fused_ratio: float, without: str | None = None) -> float:
    """The row's efficiency multiplier as gpuplan applies it: the fused-kernel ratio on a fused-kernel row, the
    published compile speed-up (less the source family ``without``) on a compiled row, else 1."""
    if is_fused(run, catalog):
        return fused_ratio
    return compile_speedup(without) if is_compiled(run, catalog) else 1.0


def fit_points(
    rows: list[dict], catalog, without: str | None = None, fused_ratio: float = 1.0, overlap: float | None = None
) -> list[tuple[str, float, float, float, str]]:
    """The efficiency model's data: (GPU family, hidden, ridge, e*, source family) of every dense row, less the
    rows of source family ``without``; a fused-kernel or compiled row's e* over its ratio (the eager efficiency
    it stands for; the compile speed-up without the held-out family's pairs). ``overlap``: the e* found at that
    data-parallel overlap (None: gpuplan's)."""
    return [
        (
            family(r, catalog),
            hidden_of(r),
            ridge_of(r, catalog),
            (r["_implied"] if overlap is None else r["_implied_at"][overlap])
            / kernel_ratio(r, catalog, fused_ratio, without),
            r["family"],
        )
        for r in rows
        if is_dense(r) and r["family"] != without
    ]


class Fit(NamedTuple):
    """The efficiency model's fitted parameters (physics/efficiency.py) and the data-parallel overlap."""

    bases: dict
    c: float
    fused: float
    overlap: float


# The fit's cost is flat near its optimum: grid points within this share of the least total absolute log error
# are ties (0.2 %: about 0.06 over the 292 shipped rows, 0.0002 a row), and a tie keeps the shipped parameters
# (``keep``) rather than moving every prediction on one row's noise. Only the fit on every row keeps; each
# family held out is refitted from scratch (no shipped value, fitted with its rows, leaks into its score).
FIT_TIE_SHARE = 0.002


def fit_model(rows: list[dict], catalog, without: str | None, families) -> Fit:
    """For each data-parallel overlap and fused ratio of the grids the bases and c that fit the rows' points best
    (physics/efficiency.py fit_bases), the pair with the least total absolute log error winning. The rows' e* at
    each overlap are in ``_implied_at`` (evaluate_all)."""
    best = None
    for overlap in OVERLAP_GRID:
        for ratio in FUSED_RATIO_GRID:
            points = fit_points(rows, catalog, without, ratio, overlap)
            bases, c = fit_bases(points, families)
            cost = fit_cost(points, bases, c)
            if bases and (best is None or cost < best[0] - 1e-12):
                best = (cost, Fit(bases, c, ratio, overlap))
    return Fit({}, 0.0, 1.0, FITTED_OVERLAP) if best is None else best[1]


def tied_with(least: Fit, keep: Fit, rows: list[dict], catalog, families) -> Fit:
    """``keep``'s grid point (its bases refitted at its c) where it ties ``least``, the fit on every row
    (FIT_TIE_SHARE); else ``least``."""

    def cost(fit: Fit) -> tuple[float, dict]:
        points = fit_points(rows, catalog, None, fit.fused, fit.overlap)
        bases = fit.bases if fit is least else fit_bases(points, families, grid=(fit.c,))[0]
        return fit_cost(points, bases, fit.c), bases

    least_cost, _ = cost(least)
    keep_cost, bases = cost(keep)
    if bases and keep_cost <= least_cost * (1.0 + FIT_TIE_SHARE):
        return Fit(bases, keep.c, keep.fused, keep.overlap)
    return least


# The GPU families whose base gpuplan ships (physics/efficiency.py: FITTED_BASE); "gpuplan" held out refits
# these and the size coefficient, "every base" every GPU family the rows support.
SHIPPED = tuple(sorted(FITTED_BASE))


def fitted_efficiency(
    run: dict, catalog, bases: dict, c: float, fused_ratio: float = 1.0, without: str | None = None
) -> float:
    """The model's efficiency for the row, or the per-form-factor constant where no base was fitted and on MoE
    rows (as gpuplan: planning/context.py keeps the constant for a mixture of experts), times the fused ratio on
    a fused-kernel row or the compile speed-up (less source family ``without``) on a compiled one (as gpuplan:
    planning/context.py fused_efficiency_ratio, compiled_efficiency_ratio)."""
    ratio = kernel_ratio(run, catalog, fused_ratio, without)
    base = bases.get(family(run, catalog))
    if base is None or not is_dense(run):
        return constant_efficiency(run, catalog) * ratio
    return base * size_factor(hidden_of(run), c * ridge_of(run, catalog)) * ratio


def constant_efficiency(run: dict, catalog) -> float:
    """gpuplan's efficiency without the fitted model: the catalog row's, or the per-form-factor default."""
    sku = sku_of(run, catalog)
    return sku.default_mfu or DEFAULT_COMPUTE_EFFICIENCY.get(sku.form_factor, FALLBACK_COMPUTE_EFFICIENCY)


# The MoE host time's two parts (physics/constants.py): ms per MoE layer and micro-batch, and ms per local expert
# where the layout's framework loops over them (Transformer Engine's GroupedLinear); fitted together on this grid.
HOST_LAYER_MS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 3.5, 4.0)
HOST_EXPERT_MS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)
HOST_MS_GRID: tuple[HostMs, ...] = tuple(itertools.product(HOST_LAYER_MS, HOST_EXPERT_MS))


def host_errors(rows: list[dict], catalog, efficiency=None) -> tuple[list[dict], dict[HostMs, list[float]]]:
    """The MoE rows the host time is fitted on, and per grid value their log errors, each row predicted at
    ``efficiency(row)`` (None: gpuplan's own)."""
    moe = [r for r in rows if group(r) == "moe" or (group(r) == "folded_moe" and r["sku"] not in HELD_OUT_SKUS)]
    return moe, {
        c: [
            math.log(predict(r, catalog, None if efficiency is None else efficiency(r), c) / r["tokens_per_s_per_gpu"])
            for r in moe
        ]
        for c in HOST_MS_GRID
    }


def best_host_ms(errors: dict[HostMs, list[float]], keep: list[bool]) -> HostMs | None:
    """The grid value with the least mean |log error| over the kept MoE rows (None: no row kept): least absolute
    deviations, as the efficiency fit; the median of a dozen rows jumps as single rows cross it."""
    if not any(keep):
        return None
    return min(HOST_MS_GRID, key=lambda c: statistics.fmean(abs(e) for e, k in zip(errors[c], keep) if k))


def host_overhead_held_out(rows: list[dict], catalog, kind: str = "moe") -> tuple[HostMs, float, float]:
    """The MoE host time (physics/constants.py: MOE_HOST_S_PER_LAYER, _PER_LOCAL_EXPERT) fitted leave-one-out: for each
    MoE row, the grid value with the least median |log error| on the other MoE rows predicts it. Returns the
    value fitted on all rows and the held-out (median |error|, worst ratio) of the rows of group ``kind``."""
    moe, errors = host_errors(rows, catalog)
    if not moe:
        return (0.0, 0.0), 0.0, 1.0
    n = len(moe)
    held_out = [errors[best_host_ms(errors, [k != i for k in range(n)]) or (0.0, 0.0)][i] for i in range(n)]
    held_out = [e for e, r in zip(held_out, moe) if group(r) == kind] or [0.0]
    median = statistics.median(abs(math.exp(e) - 1) for e in held_out)
    return best_host_ms(errors, [True] * n) or (0.0, 0.0), median, math.exp(max(abs(e) for e in held_out))


def leave_one_family_out(rows: list[dict], catalog) -> None:
    """Each row predicted with every fitted term refitted without its source family (LOFO):

    - ``_lofo``: gpuplan, its shipped efficiency bases (physics/efficiency.py: FITTED_BASE's GPU families)
      and size coefficient fitted on the other families' dense rows, and on an MoE row the host time fitted
      on the other families' MoE rows at that efficiency;
    - ``_lofo_constant``: the per-form-factor constant efficiency (nothing fitted on dense rows), with the
      host time fitted on the other families' MoE rows;
    - ``_lofo_every`` (dense rows): every GPU family's base that the other families' rows support fitted.
    ``_lofo_fit`` records the fold's shipped-form parameters (Fit: bases, c, fused ratio, overlap). Each fold's
    rows are predicted at the overlap fitted without them."""
    moe, constant_errors = host_errors(rows, catalog, lambda r: constant_efficiency(r, catalog))
    for fam in sorted({r["family"] for r in rows}):
        fit, every = fit_model(rows, catalog, fam, SHIPPED), fit_model(rows, catalog, fam, None)
        members = [r for r in rows if r["family"] == fam]
        keep = [r["family"] != fam for r in moe]
        host_ms = host_constant = None
        with at_overlap(fit.overlap):
            if any(r["kind"] == "moe" for r in members):
                _, errors = host_errors(rows, catalog, lambda r: fitted_efficiency(r, catalog, *fit[:3], fam))
                host_ms, host_constant = best_host_ms(errors, keep), best_host_ms(constant_errors, keep)
            for run in members:
                host = host_ms if run["kind"] == "moe" else None
                run["_lofo_host_ms"] = host
                run["_lofo_fit"] = fit
                run["_lofo"] = predict(run, catalog, fitted_efficiency(run, catalog, *fit[:3], fam), host)
        for run in members:
            constant = constant_efficiency(run, catalog) * (compile_speedup(fam) if is_compiled(run, catalog) else 1.0)
            run["_lofo_constant"] = predict(run, catalog, constant, host_constant if run["kind"] == "moe" else None)
            if is_dense(run):
                with at_overlap(every.overlap):
                    run["_lofo_every"] = predict(run, catalog, fitted_efficiency(run, catalog, *every[:3], fam))


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
        return (0.0, 0.0), 0.0, 1.0
    ratio = max(max(1 + e, 1 / (1 + e)) for e in errors)
    return statistics.median(abs(e) for e in errors), max(abs(e) for e in errors), ratio


def summary(rows: list[dict], label: str) -> tuple[float, float]:
    """Prints and returns gpuplan's (median |error|, worst ratio) over a group of rows."""
    if not rows:
        return 0.0, 1.0
    median, worst, ratio = stats(rows, "_default")
    lofo_median, _, lofo_ratio = stats(rows, "_lofo")
    constant_median, _, constant_ratio = stats(rows, "_lofo_constant")
    every = [r for r in rows if r.get("_lofo_every") is not None]
    every_median, _, every_ratio = stats(every, "_lofo_every")
    print(f"{len(rows)} {label} rows: gpuplan median |error| {median:.1%}, worst {worst:.1%} (within {ratio:.2f}x)")
    print(
        f"    leave one family out: gpuplan median {lofo_median:.1%} (within {lofo_ratio:.2f}x), constant "
        f"efficiency {constant_median:.1%} (within {constant_ratio:.2f}x)"
        + (f", every GPU family's base {every_median:.1%} (within {every_ratio:.2f}x)" if every else "")
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


def implied_over_overlaps(rows: list[dict], catalog) -> None:
    """Each dense row's e* at every data-parallel overlap of OVERLAP_GRID (``_implied_at``), the fit's data."""
    for overlap in OVERLAP_GRID:
        with at_overlap(overlap):
            for run in rows:
                if run["_implied"] is not None:
                    at = run.setdefault("_implied_at", {})
                    same = abs(overlap - FITTED_OVERLAP) < 1e-9
                    at[overlap] = run["_implied"] if same else implied_efficiency(run, catalog, run["_implied"])


def folded_moe_rows() -> list[dict]:
    """The MoE rows of the first-seen families folded into the MoE host-time fit (MOE_FOLDED), those gpuplan can
    express (a row marked ``expressible: false`` stays a first-seen figure only)."""
    return [
        run
        for path, fam in MOE_FOLDED
        for run in yaml.safe_load(path.read_text())["runs"]
        if run["family"] == fam and run["kind"] == "moe" and run.get("expressible", True)
    ]


def evaluate_all() -> tuple:
    """(catalog, rows, skipped): every modelled row predicted (gpuplan as shipped, every fitted term refitted
    without the row's source family, gpuplan from the table's columns only), and the rows not modelled with
    the reason."""
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    skus = {s.name for s in catalog.skus}
    rows, skipped = [], []
    for run in [run for path in DATA_FILES for run in yaml.safe_load(path.read_text())["runs"]] + folded_moe_rows():
        why = modelled(run, skus)
        if why:
            skipped.append((run["name"], why))
            continue
        try:
            pinned = checked(run, catalog)
            run["_default"] = pinned.plan.tokens_per_s / run["gpus"]
            run["_pinned_verdict"] = verdict(pinned)
            # e*: what the efficiency model is fitted on, every dense row's
            run["_implied"] = implied_efficiency(run, catalog) if is_dense(run) else None
        except GpuplanError as exc:
            skipped.append((run["name"], f"check refused the published layout: {exc.reason[:90]}"))
            continue
        rows.append(run)
    implied_over_overlaps(rows, catalog)
    leave_one_family_out(rows, catalog)
    table_columns_only(rows, catalog)
    return catalog, rows, skipped


# GPUs whose rows joined after the MoE host time was set: reported on their own, and the host time is not
# fitted on their MoE rows. Their dense rows are in the efficiency fit like every dense row, and scored held
# out by source family like every row.
HELD_OUT_SKUS = frozenset({"GB200"})
# Source families added after the MoE host time was set (validation/families.yaml), reported on their own;
# their dense rows are in the efficiency fit and scored held out by family like every other family's.
HELD_OUT_FAMILIES = frozenset({"llm-foundry"})
KINDS = (
    ("dense", "dense"),
    ("long_context", "long-context"),
    ("moe", "MoE"),
    ("folded_moe", "first-seen Megatron-Core MoE"),
    ("finetune", "small fine-tune"),
    ("held_out_hardware", "/".join(sorted(HELD_OUT_SKUS))),
    ("held_out_family", "/".join(sorted(HELD_OUT_FAMILIES))),
)


def group(run: dict) -> str:
    """The summary a row counts in: its kind, held_out_family for a source family reported on its own, or
    held_out_hardware for such a GPU."""
    if run["family"] in HELD_OUT_FAMILIES:
        return "held_out_family"
    if run["family"] in MOE_FOLDED_FAMILIES:
        return "folded_moe"
    return "held_out_hardware" if run["sku"] in HELD_OUT_SKUS else run["kind"]


MODELS = (("gpuplan", "_lofo"), ("constant", "_lofo_constant"), ("every", "_lofo_every"))
Figures = dict[str, dict[str, dict[str, tuple[float, float]]]]


def family_table(rows: list[dict]) -> Figures:
    """Prints the leave-one-family-out figures per source family and overall, dense and MoE apart; returns
    {family or 'all': {'dense' | 'moe': {'gpuplan' | 'constant' | 'every': (median, worst ratio)}}}."""
    print(
        "\nLeave one family out: every fitted term refitted without the row's source family: gpuplan (its shipped\n"
        "efficiency bases and size coefficient, the MoE host time), the constant efficiency (the MoE host time),\n"
        "every GPU family's base (dense rows). median |error| (worst ratio), rows:"
    )
    print(
        f"{'family':<20} {'dense rows':>10} {'gpuplan':>15} {'constant':>15} {'every base':>15} | "
        f"{'MoE rows':>8} {'gpuplan':>15} {'constant':>15}"
    )
    families = sorted({r["family"] for r in rows})
    out: Figures = {}
    before = [r for r in rows if r["family"] not in HELD_OUT_FAMILIES]
    scopes = [(f, [r for r in rows if r["family"] == f]) for f in families]
    scopes += [("all", rows), ("all but " + "/".join(sorted(HELD_OUT_FAMILIES)), before)]
    for name, members in scopes:
        cells, figures = [], {}
        for kind, picked in (
            ("dense", [r for r in members if is_dense(r)]),
            ("moe", [r for r in members if not is_dense(r)]),
        ):
            models = MODELS if kind == "dense" else MODELS[:2]
            width = 10 if kind == "dense" else 8
            if not picked:
                cells.append(" ".join([f"{'':>{width}}"] + [f"{'':>15}"] * len(models)))
                continue
            figures[kind] = {label: stats(picked, key)[::2] for label, key in models}
            cells.append(
                " ".join(
                    [f"{len(picked):>{width}}"]
                    + [f"{f'{m:.1%} ({x:.2f}x)':>15}" for m, x in (figures[kind][label] for label, _ in models)]
                )
            )
        out[name] = figures
        print(f"{name:<20} {cells[0]} | {cells[1]}")
    return out


RULE_POINTS = 0.03  # a model ships only if no source family's LOFO dense median is worse by more than this


def shipping_rule(table: Figures, model: str) -> tuple[bool, str]:
    """physics/efficiency.py's rule for shipping fitted parameters: held out by source family, the model's
    dense median over every family is below the constant's, and no family's dense median is more than 3
    points worse than the constant's. Returns (met, the figures in words)."""
    median, constant = table["all"]["dense"][model][0], table["all"]["dense"]["constant"][0]
    changes = {
        fam: figures["dense"][model][0] - figures["dense"]["constant"][0]
        for fam, figures in table.items()
        if not fam.startswith("all") and "dense" in figures
    }
    worst = max(changes, key=lambda fam: changes[fam])
    met = median < constant and changes[worst] <= RULE_POINTS + 1e-12
    each = ", ".join(f"{fam} {changes[fam] * 100:+.1f}" for fam in sorted(changes))
    words = (
        f"dense median {median:.1%} against the constant's {constant:.1%}; worst family {worst} "
        f"{changes[worst] * 100:+.1f} points: " + ("met" if met else "not met") + f" (points per family: {each})"
    )
    return met, words


def host_words(host_ms: HostMs) -> str:
    """The MoE host time's two parts as printed (physics/constants.py MOE_HOST_S_PER_LAYER, _PER_LOCAL_EXPERT)."""
    return f"{host_ms[0]:g} ms per layer + {host_ms[1]:g} ms per local expert"


def summaries(rows: list[dict], catalog) -> dict:
    """Prints the per-group summaries, the MoE host time held out and the leave-one-family-out table;
    returns (median, worst ratio) per group, "moe_held_out" for the host time's leave-one-out figures, and
    "lofo" the leave-one-family-out table."""
    out: dict = {kind: summary([r for r in rows if group(r) == kind], label) for kind, label in KINDS}
    host_ms, host_median, host_ratio = host_overhead_held_out(rows, catalog)
    _, folded_median, folded_ratio = host_overhead_held_out(rows, catalog, "folded_moe")
    print(
        f"MoE host time fitted on the MoE rows: {host_words(host_ms)} (grid {HOST_LAYER_MS[0]:g}..{HOST_LAYER_MS[-1]:g} "
        f"x {HOST_EXPERT_MS[0]:g}..{HOST_EXPERT_MS[-1]:g} ms); held out (leave-one-out): median {host_median:.1%}, "
        f"worst within {host_ratio:.2f}x; the first-seen Megatron-Core MoE rows {folded_median:.1%}, within "
        f"{folded_ratio:.2f}x"
    )
    lofo_host = sorted({(r["family"], r["_lofo_host_ms"]) for r in rows if r["_lofo_host_ms"] is not None})
    print("  refitted without each family's MoE rows: " + ", ".join(f"{f} {host_words(ms)}" for f, ms in lofo_host))
    lofo_overlap = sorted({(r["family"], r["_lofo_fit"].overlap) for r in rows})
    print("Data-parallel overlap refitted without each family: " + ", ".join(f"{f} {o:g}" for f, o in lofo_overlap))
    out["moe_held_out"] = (host_median, host_ratio)
    out["lofo"] = family_table(rows)
    return out


def print_fit(rows: list[dict], catalog, table: Figures) -> None:
    """``--fit``: the efficiency model fitted on every dense row, each parameter with the rows and source
    families that support it, whether it ships, and the shipping rule held out by family."""
    shipped = Fit(FITTED_BASE, FITTED_HALF_PER_RIDGE, FITTED_FUSED_RATIO, FITTED_OVERLAP)
    least, fit_every = fit_model(rows, catalog, None, SHIPPED), fit_model(rows, catalog, None, None)
    fit = tied_with(least, shipped, rows, catalog, SHIPPED)
    bases, c, k = fit.bases, fit.c, fit.fused
    every, c_every, k_every = fit_every.bases, fit_every.c, fit_every.fused
    points = fit_points(rows, catalog, fused_ratio=k, overlap=fit.overlap)
    support = supported(points)
    usable = sum(n for n, _ in support.values())
    print(
        f"\nEfficiency fit on every dense row: {len(points)} rows of {len({p[4] for p in points})} source families "
        f"({usable} with e* inside the search bounds)\n"
        "  e = base[GPU family] x size(hidden), size's h_half = c x ridge (the 16-bit peak FLOP/s / HBM bytes/s)"
    )
    shipped_rows = [p for p in points if p[0] in bases]
    print(
        f"  c = {c:g} (grid {HALF_PER_RIDGE_GRID[0]:g}..{HALF_PER_RIDGE_GRID[-1]:g}) on the shipped families' "
        f"{len(shipped_rows)} rows of {len({p[4] for p in shipped_rows})} source families; every family's base "
        f"fitted: c = {c_every:g}"
    )
    if least != fit:
        print(
            f"  (the shipped grid point ties the least cost, within {FIT_TIE_SHARE:.1%}: c = {least.c:g}, fused "
            f"ratio {least.fused:g}, overlap {least.overlap:g}, bases "
            + ", ".join(f"{f} {b:.3f}" for f, b in sorted(least.bases.items()))
            + ")"
        )
    for fam in sorted(support, key=lambda f: -support[f][0]):
        n, sources = support[fam]
        counts = ", ".join(f"{src} {sum(1 for p in points if p[0] == fam and p[4] == src)}" for src in sorted(sources))
        if fam in bases:
            status = f"shipped: FITTED_BASE {FITTED_BASE[fam]:.3f}"
        elif len(sources) < MIN_SOURCE_FAMILIES:
            status = f"not fitted: fewer than {MIN_SOURCE_FAMILIES} source families"
        elif len(sources) == MIN_SOURCE_FAMILIES:
            status = "not shipped: with either source family held out the other alone cannot fit it"
        else:
            status = "not shipped: see the rule for every family's base"
        fitted = f"{bases[fam]:.3f}" if fam in bases else (f"({every[fam]:.3f})" if fam in every else "-")
        print(f"  {fam:<10} base {fitted:<8} {n:>4} rows, {len(sources)} families ({counts}); {status}")
    print("Shipping rule, held out by family (physics/efficiency.py):")
    print(f"  gpuplan as shipped: {shipping_rule(table, 'gpuplan')[1]}")
    print(f"  every GPU family's base: {shipping_rule(table, 'every')[1]}")
    fused = [r for r in rows if is_dense(r) and is_fused(r, catalog) and family(r, catalog) in bases]
    print(
        f"  fused-kernel ratio {k:g} (grid {FUSED_RATIO_GRID[0]:g}..{FUSED_RATIO_GRID[-1]:g}) on {len(fused)} "
        f"fused-kernel rows of {len({r['family'] for r in fused})} source families; every family's base fitted: "
        f"{k_every:g}"
    )
    print(
        f"  data-parallel overlap {fit.overlap:g} (grid {OVERLAP_GRID[0]:g}..{OVERLAP_GRID[-1]:g}), fitted with the "
        f"bases; every family's base fitted: {fit_every.overlap:g}; shipped: FITTED_OVERLAP {FITTED_OVERLAP:g}"
    )
    match = set(bases) == set(FITTED_BASE) and c == FITTED_HALF_PER_RIDGE and k == FITTED_FUSED_RATIO
    match = match and fit.overlap == FITTED_OVERLAP
    match = match and all(abs(bases[f] - FITTED_BASE[f]) < 5e-4 for f in bases)
    print("  shipped parameters match this fit" if match else "  shipped parameters DIFFER from this fit")


def _cell(run: dict, key: str) -> str:
    value = run.get(key)
    return f"{value / run['tokens_per_s_per_gpu'] - 1:>+7.1%}" if value is not None else f"{'-':>7}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true", help="print the efficiency model fitted on every dense row")
    ap.add_argument("--max-median", type=float, default=None, help="fail above this dense median |error|")
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
    ap.add_argument(
        "--max-lofo-median",
        type=float,
        default=None,
        help="fail above this dense median |error| held out by source family (every family's dense rows)",
    )
    ap.add_argument(
        "--max-lofo-worst",
        type=float,
        default=None,
        help="fail when a dense row held out by source family is off by more than this factor",
    )
    ap.add_argument(
        "--max-moe-lofo-median",
        type=float,
        default=None,
        help="fail above this MoE median |error| held out by source family (every family's MoE rows)",
    )
    ap.add_argument(
        "--max-dense-group-median",
        type=float,
        default=None,
        help="fail above this held-out dense median in any GPU generation or framework family",
    )
    ap.add_argument(
        "--max-dense-group-worst",
        type=float,
        default=None,
        help="fail when a held-out dense row of any GPU generation or framework family is off by more",
    )
    args = ap.parse_args()
    catalog, rows, skipped = evaluate_all()
    print(
        f"{'row':<44} {'family':<16} {'GPU':<9} {'prec':<5} {'published':>10} {'gpuplan':>10} {'error':>7} "
        f"{'LOFO':>7} {'table':>7} {'LOFO 0.50':>9} {'every':>7} {'e*':>5}"
    )
    for r in rows:
        implied = f"{r['_implied']:>5.2f}" if r["_implied"] is not None else f"{'-':>5}"
        print(
            f"{r['name']:<44} {r['family']:<16} {r['sku']:<9} {r['precision']:<5} {r['tokens_per_s_per_gpu']:>10,.0f} "
            f"{r['_default']:>10,.0f} {_cell(r, '_default')} {_cell(r, '_lofo')} {_cell(r, '_table')} "
            f"{_cell(r, '_lofo_constant'):>9} {_cell(r, '_lofo_every')} {implied}"
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
        print_fit(rows, catalog, figures["lofo"])
    by_group = print_groups(rows, lambda r: family(r, catalog))
    finetune_median, finetune_ratio = figures["finetune"]
    gb200_median, gb200_ratio = figures["held_out_hardware"]
    foundry_median, foundry_ratio = figures["held_out_family"]
    lofo_median, lofo_ratio = figures["lofo"]["all"]["dense"]["gpuplan"]
    moe_lofo_median = figures["lofo"]["all"]["moe"]["gpuplan"][0]
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
        (args.max_median, median, "dense median |error| {v:.1%} exceeds {x:.0%}"),
        (args.max_worst, ratio, "a row is off by {v:.2f}x, beyond {x:.2f}x"),
        (args.max_lofo_median, lofo_median, "dense median |error| held out by family {v:.1%} exceeds {x:.0%}"),
        (args.max_lofo_worst, lofo_ratio, "a dense row held out by family is off by {v:.2f}x, beyond {x:.2f}x"),
        (args.max_moe_lofo_median, moe_lofo_median, "MoE median |error| held out by family {v:.1%} exceeds {x:.0%}"),
    ]
    for name, (group_median, group_ratio) in by_group.items():
        if name.startswith("dense"):
            limits.append((args.max_dense_group_median, group_median, f"{name}: median {{v:.1%}} exceeds {{x:.0%}}"))
            limits.append(
                (args.max_dense_group_worst, group_ratio, f"{name}: a row off by {{v:.2f}}x, beyond {{x:.2f}}x")
            )
    failed = [text.format(v=value, x=limit) for limit, value, text in limits if limit is not None and value > limit]
    for line in failed:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
