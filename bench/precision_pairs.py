"""FP8 against BF16 on one layout: gpuplan's predicted speed-up beside each published pair.

    python bench/precision_pairs.py                      # every pair of validation/ rows
    python bench/precision_pairs.py --max-ratio-error 0.10 --range 1.0 1.6   # CI: exit 1 beyond either

A pair is two rows of validation/ (bench/throughput.py's files) that ran the same model on the same GPUs,
nodes, layout, sequence length and batch, one in a 16-bit precision and one in FP8 (or MXFP8), or two rows of
validation/precision_pairs.yaml sharing a ``pair`` id (gathered for this comparison: NeMo/DGX Cloud,
Megatron-Bridge, torchtitan and torchao documents, MaxText). Both rows
are predicted with ``check`` on their published layout, as bench/throughput.py predicts them; the ratio
of the two predictions is set beside the ratio of the two published tokens/s per GPU. Nothing is fitted on
the ratios. Published FP8 gains on one layout are 1.00-1.39x here (llm-foundry's TransformerEngine tables,
torchtitan's Float8), "typically 1.2-1.5x" in NVIDIA's Megatron-Bridge performance guide.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402
from throughput import DATA_FILES, checked, modelled  # noqa: E402

from optimizer import GpuplanError, load_catalog  # noqa: E402

PAIRS_DATA = Path(__file__).resolve().parent.parent / "validation" / "precision_pairs.yaml"
HARDWARE = Path(__file__).resolve().parent.parent / "validation" / "hardware.yaml"

LOW = frozenset({"fp8", "mxfp8"})
SIXTEEN = frozenset({"bf16", "fp16"})
SAME = ("model", "sku", "gpus", "nodes", "seq_len", "global_batch", "micro_batch", "task", "framework")


def _key(run: dict) -> str:
    """What must match for two rows to be a pair: everything but the precision and the published figures."""
    return json.dumps([run.get(k) for k in SAME] + [run.get("layout"), run.get("moe")], sort_keys=True, default=str)


def pairs(rows: list[dict]) -> list[tuple[dict, dict]]:
    """(16-bit row, low-precision row) for every key with both, in the files' order."""
    sixteen = {_key(r): r for r in rows if r["precision"] in SIXTEEN}
    return [(sixteen[_key(r)], r) for r in rows if r["precision"] in LOW and _key(r) in sixteen]


def listed_pairs() -> list[tuple[dict, dict]]:
    """The pairs of validation/precision_pairs.yaml: rows sharing a ``pair`` id."""
    by_id: dict[str, list[dict]] = {}
    for run in yaml.safe_load(PAIRS_DATA.read_text())["runs"]:
        by_id.setdefault(run["pair"], []).append(run)
    return [
        (next(r for r in runs if r["precision"] in SIXTEEN), next(r for r in runs if r["precision"] in LOW))
        for runs in by_id.values()
    ]


def with_predictions(candidates: list[tuple[dict, dict]], catalog) -> list[tuple[dict, dict]]:
    """The pairs whose two rows ``check`` predicts on their published layouts (``_default``, tokens/s per GPU, as
    bench/throughput.py predicts its rows); the others are named with the reason."""
    skus = {s.name for s in catalog.skus}
    found = []
    for sixteen, low in candidates:
        try:
            for run in (sixteen, low):
                why = modelled(run, skus)
                if why:
                    raise GpuplanError(why)
                run["_default"] = checked(run, catalog).plan.tokens_per_s / run["gpus"]
        except GpuplanError as exc:
            print(f"  {low['name']}: not predicted: {str(exc)[:100]}")
            continue
        found.append((sixteen, low))
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-ratio-error", type=float, default=None, help="fail above this median |ratio error|")
    ap.add_argument("--range", type=float, nargs=2, default=None, help="fail when a predicted ratio is outside")
    args = ap.parse_args()
    catalog = load_catalog(str(HARDWARE))
    rows = [run for path in DATA_FILES for run in yaml.safe_load(path.read_text())["runs"]]
    found = with_predictions(pairs(rows) + listed_pairs(), catalog)
    print(f"{'pair (low-precision row)':<46} {'family':<12} {'published':>9} {'gpuplan':>8} {'error':>7}")
    errors, predicted = [], []
    for sixteen, low in found:
        published = low["tokens_per_s_per_gpu"] / sixteen["tokens_per_s_per_gpu"]
        ratio = low["_default"] / sixteen["_default"]
        errors.append(abs(math.log(ratio / published)))
        predicted.append(ratio)
        print(f"{low['name']:<46} {low['family']:<12} {published:>8.2f}x {ratio:>7.2f}x {ratio / published - 1:>+7.1%}")
    if not found:
        print("no pairs")
        return 1
    median = math.exp(statistics.median(errors)) - 1.0
    print(
        f"\n{len(found)} pairs: median |error| of the speed-up {median:.1%}, worst {math.exp(max(errors)):.2f}x; "
        f"predicted {min(predicted):.2f}-{max(predicted):.2f}x"
    )
    failed = []
    if args.max_ratio_error is not None and median > args.max_ratio_error:
        failed.append(f"median |error| of the FP8 speed-up {median:.1%} exceeds {args.max_ratio_error:.0%}")
    if args.range is not None and not all(args.range[0] <= r <= args.range[1] for r in predicted):
        failed.append(f"a predicted FP8 speed-up lies outside {args.range[0]:g}-{args.range[1]:g}x")
    for line in failed:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
