"""Published sweeps, predicted (issue 48: "predicted MFU moves as published MFU moves over a width sweep, a
micro-batch sweep, A100 vs H100 vs B200"): `python bench/sweeps.py [--axis A] [--max-median F] [--max-ratio R]`.

A pair is two rows of validation's throughput files from one source family, with the same precision, framework,
kernels (compiled or not) and task, that differ along one axis and in nothing else the axis does not change:

- generation: the same model, sequence length, precision, framework and task on GPUs of two generations
  (physics/efficiency.family_of: ampere, hopper, blackwell), each row with, of each newer generation's rows,
  the one on the nearest number of GPUs;
- width: two models of the same GPU, GPU count, sequence length, precision, framework and task, consecutive
  by parameter count;
- sequence: one model on the same GPU and GPU count at two sequence lengths, consecutive;
- micro_batch: one model, sequence length, GPU and GPU count at two micro-batch sizes, consecutive.

Each row is predicted on its own published layout and framework with `check`; a pair compares the predicted
ratio of tokens/s per GPU (the later row over the earlier) with the published one. For one model, or two models
of known FLOPs per token, that is the ratio of their MFU. Nothing is fitted on the pairs, but the efficiency bases
are fitted on the rows (bench/throughput.py --fit): this checks how the rows move against each other.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402

from optimizer import GpuplanError, load_catalog  # noqa: E402

GENERATIONS = ("ampere", "hopper", "blackwell")  # oldest first


def _model(run: dict) -> str:
    return run["model"] if isinstance(run["model"], str) else json.dumps(run["model"], sort_keys=True)


def _params(run: dict) -> float:
    return float(throughput.problem_for(run, None).job.model.params or 0)


def _generation_pairs(runs: list[dict], catalog) -> list[tuple[dict, dict]]:
    """Each row with, of each newer generation's rows, the one on the nearest number of GPUs."""
    newest: dict[tuple[str, str], tuple[dict, dict]] = {}
    for a, b in itertools.permutations(runs, 2):
        ga, gb = (GENERATIONS.index(throughput.family(r, catalog)) for r in (a, b))
        best = newest.get((a["name"], GENERATIONS[gb]))
        if ga < gb and (best is None or abs(b["gpus"] - a["gpus"]) < abs(best[1]["gpus"] - a["gpus"])):
            newest[a["name"], GENERATIONS[gb]] = (a, b)
    return list(newest.values())


def _consecutive(value: Callable[[dict], float]) -> Callable[[list[dict], object], list[tuple[dict, dict]]]:
    """Pairs of rows consecutive in ``value`` (rows of equal value are not a step of the sweep)."""

    def pair(runs: list[dict], _catalog) -> list[tuple[dict, dict]]:
        ordered = sorted(runs, key=value)
        return [(a, b) for a, b in itertools.pairwise(ordered) if value(a) != value(b)]

    return pair


def _job(run: dict) -> tuple:
    """What every pair's rows share on any axis: source family, precision, framework and its kernels, the task."""
    kernels = (run.get("compile", False), run.get("kernels", "auto"), run["kind"])
    return (run["family"], run["precision"], run["framework"], run["task"], *kernels)


# axis: (the key every row of a pair shares, how the rows of one key pair up, how a pair's step is labelled)
AXES: dict[str, tuple[Callable[[dict], tuple], Callable, Callable[[dict, dict, object], str]]] = {
    "generation": (
        lambda r: (*_job(r), _model(r), r["seq_len"]),
        _generation_pairs,
        lambda a, b, catalog: f"{throughput.family(a, catalog)} -> {throughput.family(b, catalog)}",
    ),
    "width": (
        lambda r: (*_job(r), r["sku"], r["gpus"], r["seq_len"]),
        _consecutive(_params),
        lambda a, b, catalog: a["family"],
    ),
    "sequence": (
        lambda r: (*_job(r), r["sku"], r["gpus"], _model(r)),
        _consecutive(lambda r: r["seq_len"]),
        lambda a, b, catalog: a["family"],
    ),
    "micro_batch": (
        lambda r: (*_job(r), r["sku"], r["gpus"], _model(r), r["seq_len"]),
        _consecutive(lambda r: r.get("micro_batch") or 0),
        lambda a, b, catalog: a["family"],
    ),
}


def pairs(axis: str, rows: list[dict], catalog) -> list[tuple[dict, dict]]:
    """(earlier, later) rows along ``axis``, every such pair of the modelled rows."""
    key, pair, _ = AXES[axis]
    skus = {s.name for s in catalog.skus}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for run in rows:
        if throughput.modelled(run, skus) is None and throughput.family(run, catalog) in GENERATIONS:
            groups[key(run)].append(run)
    return [p for runs in groups.values() for p in pair(runs, catalog)]


def _speeds(found: list[tuple[dict, dict]], catalog) -> dict[str, float]:
    speed: dict[str, float] = {}
    for run in {r["name"]: r for pair in found for r in pair}.values():
        try:
            speed[run["name"]] = throughput.checked(run, catalog, pinned=True).plan.tokens_per_s / run["gpus"]
        except GpuplanError as exc:
            print(f"{run['name']}: not predicted ({exc.reason[:80]})")
    return speed


def report(axis: str, rows: list[dict], catalog, verbose: bool) -> tuple[float, float]:
    """Print the axis's pairs and per-step summary; (median |error|, worst ratio)."""
    found = pairs(axis, rows, catalog)
    speed = _speeds(found, catalog)
    results = [
        (a, b, b["tokens_per_s_per_gpu"] / a["tokens_per_s_per_gpu"], speed[b["name"]] / speed[a["name"]])
        for a, b in found
        if a["name"] in speed and b["name"] in speed
    ]
    if verbose:
        print(f"{'earlier row':<44} {'later row':<44} {'published':>10} {'gpuplan':>9} {'error':>7}")
        for a, b, published, predicted in sorted(results, key=lambda r: (r[0]["family"], r[0]["name"])):
            print(
                f"{a['name'][:44]:<44} {b['name'][:44]:<44} {published:>9.2f}x {predicted:>8.2f}x "
                f"{predicted / published - 1:>+6.1%}"
            )
    steps: dict[str, list[float]] = defaultdict(list)
    for a, b, published, predicted in results:
        steps[AXES[axis][2](a, b, catalog)].append(abs(math.log(predicted / published)))
    for step, e in sorted(steps.items()):
        print(
            f"{axis} {step}: {len(e)} pairs: median |error| {math.expm1(statistics.median(e)):.1%}, "
            f"worst {math.exp(max(e)):.2f}x"
        )
    errors = [e for es in steps.values() for e in es]
    median, worst = math.expm1(statistics.median(errors)), math.exp(max(errors))
    print(f"{axis}: {len(errors)} pairs, median |error| {median:.1%}, worst {worst:.2f}x\n")
    return median, worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--axis", choices=sorted(AXES), action="append", help="the sweeps to report (default: all)")
    ap.add_argument("--max-median", type=float, default=None, help="fail above this median |error| (0.07 = 7 %%)")
    ap.add_argument("--max-ratio", type=float, default=None, help="fail when a pair is off by more (1.5)")
    ap.add_argument("--quiet", action="store_true", help="the summaries only, not every pair")
    args = ap.parse_args()
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    rows = [r for path in throughput.DATA_FILES for r in yaml.safe_load(path.read_text())["runs"]]
    failed = False
    for axis in args.axis or sorted(AXES):
        median, worst = report(axis, rows, catalog, not args.quiet)
        if (args.max_median is not None and median > args.max_median) or (
            args.max_ratio is not None and worst > args.max_ratio
        ):
            print(f"FAIL: {axis} median {median:.1%} (at most {args.max_median}), worst {worst:.2f}x")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
