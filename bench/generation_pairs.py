"""One model on two GPU generations, predicted (issue 48: "predicted MFU moves as published MFU moves ... A100 vs
H100 vs B200"): `python bench/generation_pairs.py [--max-median F] [--max-ratio R]`.

A pair is two rows of validation's throughput files from one source family, with the same model, sequence length,
precision, framework and task, on GPUs of two generations (physics/efficiency.family_of: ampere, hopper,
blackwell): each row with, of the newer generation's rows, the one on the nearest number of GPUs. Each row is predicted on its own published layout and framework with `check`; the pair compares the
predicted speed-up of the newer GPU (tokens/s per GPU, newer over older) with the published one. Nothing is
fitted on the pairs, but the efficiency bases are fitted on the rows themselves (bench/throughput.py --fit),
so this checks the generations' relative speed, not each row's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402

from optimizer import GpuplanError, load_catalog  # noqa: E402

GENERATIONS = ("ampere", "hopper", "blackwell")  # oldest first


def _job_key(run: dict) -> tuple:
    model = run["model"] if isinstance(run["model"], str) else json.dumps(run["model"], sort_keys=True)
    return (run["family"], model, run["seq_len"], run["precision"], run["framework"], run["task"])


def pairs(rows: list[dict], catalog) -> list[tuple[dict, dict]]:
    """(older, newer) rows of one job on two generations, every such pair of the modelled rows."""
    skus = {s.name for s in catalog.skus}
    by_job: dict[tuple, list[dict]] = defaultdict(list)
    for run in rows:
        if throughput.modelled(run, skus) is None and throughput.family(run, catalog) in GENERATIONS:
            by_job[_job_key(run)].append(run)
    out = []
    for runs in by_job.values():
        newest: dict[tuple[str, str], dict] = {}  # (older row, newer generation): its nearest newer row
        for a, b in itertools.permutations(runs, 2):
            ga, gb = (GENERATIONS.index(throughput.family(r, catalog)) for r in (a, b))
            best = newest.get((a["name"], GENERATIONS[gb]))
            if ga < gb and (best is None or abs(b["gpus"] - a["gpus"]) < abs(best["gpus"] - a["gpus"])):
                newest[a["name"], GENERATIONS[gb]] = b
        by_name = {r["name"]: r for r in runs}
        out += [(by_name[older], newer) for (older, _), newer in newest.items()]
    return out


def compare(older: dict, newer: dict, speed: dict[str, float]) -> dict:
    published = newer["tokens_per_s_per_gpu"] / older["tokens_per_s_per_gpu"]
    predicted = speed[newer["name"]] / speed[older["name"]]
    return {"older": older, "newer": newer, "published": published, "predicted": predicted}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-median", type=float, default=None, help="fail above this median |ratio error| (0.05 = 5 %%)")
    ap.add_argument("--max-ratio", type=float, default=None, help="fail when a pair's ratio is off by more (1.3)")
    args = ap.parse_args()
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    rows = [r for path in throughput.DATA_FILES for r in yaml.safe_load(path.read_text())["runs"]]
    found = pairs(rows, catalog)
    speed: dict[str, float] = {}
    for run in {r["name"]: r for pair in found for r in pair}.values():
        try:
            speed[run["name"]] = throughput.checked(run, catalog, pinned=True).plan.tokens_per_s / run["gpus"]
        except GpuplanError as exc:
            print(f"{run['name']}: not predicted ({exc.reason[:80]})")
    results = [compare(a, b, speed) for a, b in found if a["name"] in speed and b["name"] in speed]
    by_step: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_step[f"{throughput.family(r['older'], catalog)} -> {throughput.family(r['newer'], catalog)}"].append(r)
    print(f"{'older row':<44} {'newer GPU':<12} {'published':>10} {'gpuplan':>9} {'error':>7}")
    for r in sorted(results, key=lambda r: (r["older"]["family"], r["older"]["name"])):
        error = r["predicted"] / r["published"] - 1
        print(
            f"{r['older']['name'][:44]:<44} {r['newer']['sku'][:12]:<12} {r['published']:>9.2f}x "
            f"{r['predicted']:>8.2f}x {error:>+6.1%}"
        )
    errors = [abs(math.log(r["predicted"] / r["published"])) for r in results]
    print()
    for step, rs in sorted(by_step.items()):
        e = [abs(math.log(r["predicted"] / r["published"])) for r in rs]
        families = sorted({r["older"]["family"] for r in rs})
        print(
            f"{step}: {len(rs)} pairs of {', '.join(families)}: median |error| {math.expm1(statistics.median(e)):.1%}, "
            f"worst {math.exp(max(e)):.2f}x"
        )
    median, worst = math.expm1(statistics.median(errors)), math.exp(max(errors))
    print(f"{len(results)} generation pairs: median |error| {median:.1%}, worst {worst:.2f}x")
    failed = (args.max_median is not None and median > args.max_median) or (
        args.max_ratio is not None and worst > args.max_ratio
    )
    if failed:
        print(f"FAIL: median {median:.1%} (at most {args.max_median}), worst {worst:.2f}x (at most {args.max_ratio})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
