"""Published framework comparisons, predicted (issue 48): `python bench/framework_pairs.py [--max-misses N]`.

Each pair of validation/framework_pairs.yaml is one job run under two frameworks on one cluster. Both rows are
predicted on their published layouts and frameworks with `check`, and the predicted speed
ratio (first over second, tokens/s per GPU) is set against the published one: reproduced where it points the
same way and lies within 1.5x of it (`--max-misses`: fail when more pairs miss). Nothing is fitted on them.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402

from optimizer import GpuplanError, load_catalog  # noqa: E402

DATA = ROOT / "validation" / "framework_pairs.yaml"
WITHIN = 1.5  # the bound on the predicted over the published ratio


def rows_by_name() -> dict[str, dict]:
    """Every row a pair can name: validation's throughput files and this file's own runs."""
    rows = {r["name"]: r for path in throughput.DATA_FILES for r in yaml.safe_load(path.read_text())["runs"]}
    rows.update({r["name"]: r for r in yaml.safe_load(DATA.read_text())["runs"]})
    return rows


def predict(run: dict, catalog) -> float:
    """tokens/s per GPU of the row's published layout under its own framework (bench/throughput.py leaves all
    but Megatron to framework auto: here the framework is what is compared, so the row's is pinned)."""
    return throughput.checked(run, catalog, pinned=True).plan.tokens_per_s / run["gpus"]


def compare(pair: dict, rows: dict[str, dict], catalog) -> dict:
    """The pair's published and predicted ratios, and whether the prediction reproduces it."""
    first, second = rows[pair["first"]], rows[pair["second"]]
    published = first["tokens_per_s_per_gpu"] / second["tokens_per_s_per_gpu"]
    try:
        predicted = predict(first, catalog) / predict(second, catalog)
    except GpuplanError as exc:
        return {**pair, "published": published, "predicted": None, "reproduced": False, "why": exc.reason[:90]}
    same_way = (published - 1.0) * (predicted - 1.0) > 0 or abs(math.log(published)) < math.log(1.05)
    within = abs(math.log(predicted / published)) <= math.log(WITHIN)
    return {**pair, "published": published, "predicted": predicted, "reproduced": same_way and within, "why": ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-misses", type=int, default=None, help="fail when more pairs than this are not reproduced")
    args = ap.parse_args()
    catalog = load_catalog(str(ROOT / "validation" / "hardware.yaml"))
    rows = rows_by_name()
    results = [compare(pair, rows, catalog) for pair in yaml.safe_load(DATA.read_text())["pairs"]]
    print(f"{'pair':<46} {'published':>10} {'gpuplan':>10}  reproduced")
    for r in results:
        predicted = f"{r['predicted']:>9.2f}x" if r["predicted"] is not None else f"{'-':>10}"
        print(f"{r['name']:<46} {r['published']:>9.2f}x {predicted}  {'yes' if r['reproduced'] else 'no'} {r['why']}")
    misses = sum(not r["reproduced"] for r in results)
    print(
        f"\n{len(results)} pairs: {len(results) - misses} reproduced (same direction, within {WITHIN}x), {misses} not"
    )
    if args.max_misses is not None and misses > args.max_misses:
        print(f"FAIL: {misses} pairs not reproduced, more than {args.max_misses}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
