"""gpuplan's predictions beside a real FSDP run's measurements (from ``bench/fsdp_measure.py``).

    python bench/fsdp_compare.py fsdp_measured.json [--sku H200]

Memory is compared without gpuplan's framework reserve (PyTorch's max_memory_allocated does not see
the CUDA context or allocator fragmentation; the reserved figure is shown beside it); throughput with
gpuplan's default compute efficiency for the SKU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optimizer import CheckRequest, check, load_catalog  # noqa: E402
from optimizer.inputs.schema import JobSpec, Problem  # noqa: E402

GIB = 2**30


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("measured")
    ap.add_argument("--sku", default="H200")
    args = ap.parse_args()
    data = json.loads(Path(args.measured).read_text())
    cfg = data["model"]
    catalog = load_catalog("hardware")
    print(f"model: {cfg}, torch {data.get('torch')}")
    print(
        f"{'mb':>3} {'recompute':>9} {'measured GiB':>12} {'reserved':>9} {'predicted':>9} {'err':>7} "
        f"{'measured tok/s':>14} {'predicted':>10} {'err':>7}"
    )
    for r in data["results"]:
        if r.get("oom"):
            print(f"{r['micro_batch']:>3} {r['recompute']:>9}  out of memory")
            continue
        job = JobSpec.model_validate(
            {
                "model": {
                    "params": r["params"],
                    "layers": cfg["layers"],
                    "hidden": cfg["hidden"],
                    "heads": cfg["heads"],
                    "kv_heads": cfg["kv_heads"],
                    "ffn_hidden": cfg["ffn"],
                    "vocab": cfg["vocab"],
                },
                "tokens": 1e9,
                "seq_len": cfg["seq"],
                "global_batch": r["micro_batch"],
            }
        )
        plan = check(
            Problem(job=job),
            CheckRequest(args.sku, 1, zero=0, micro_batch=r["micro_batch"], recompute=r["recompute"], compare=False),
            catalog=catalog,
        ).plan
        m = plan.memory_gib
        predicted_gib = m.total - m.reserve
        measured_gib = r.get("peak_allocated_bytes", float("nan")) / GIB
        reserved_gib = r.get("peak_reserved_bytes", float("nan")) / GIB
        print(
            f"{r['micro_batch']:>3} {r['recompute']:>9} {measured_gib:>12.1f} {reserved_gib:>9.1f} {predicted_gib:>9.1f} "
            f"{predicted_gib / measured_gib - 1:>+7.1%} {r['tokens_per_s']:>14,.0f} {plan.tokens_per_s:>10,.0f} "
            f"{plan.tokens_per_s / r['tokens_per_s'] - 1:>+7.1%}"
        )


if __name__ == "__main__":
    main()
