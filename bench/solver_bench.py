"""Benchmark: candidate-table build, CP-SAT best plan, exact frontier, and the brute-force oracle,
for growing catalogs (3, 6, 12 offers) and node limits (8, 32, 64). Prints a table.

    python bench/solver_bench.py            # full grid
    python bench/solver_bench.py --quick    # 3 offers x 8 nodes only
    python bench/solver_bench.py --import-floor   # the README's solve against `gpuplan --help`, 7 paired runs

Issue 53 asks the single solve of the README's job to take at most 2x its import floor: the command-line tool
started and answering (``gpuplan --help``: Python, the package and its imports), timed in the same pairs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import bruteforce  # noqa: E402  (the test oracle, reused on the same table)

from optimizer import load_catalog, load_job  # noqa: E402
from optimizer.inputs.schema import Catalog, Offer  # noqa: E402
from optimizer.planning.calibration import job_context  # noqa: E402
from optimizer.planning.candidates import build_table  # noqa: E402
from optimizer.solver.model import scaled  # noqa: E402
from optimizer.solver.single import _model, frontier  # noqa: E402

SKUS = [
    "B200",
    "B300",
    "H200",
    "H100-SXM",
    "A100-80GB",
    "MI300X",
    "H800",
    "A100-40GB",
    "RTX-PRO-6000",
    "L40S",
    "H100-PCIe",
    "B200",
]


def catalog(offers: int, max_nodes: int) -> Catalog:
    hardware = load_catalog("hardware")
    rows = [
        Offer(
            name=f"offer{i}-{sku.lower()}",
            sku=sku,
            provider=f"p{i % 3}",
            price=1.0 + 0.37 * i,
            gpus_per_node=8,
            max_nodes=max_nodes,
        )
        for i, sku in enumerate(SKUS[:offers])
    ]
    return Catalog(name=f"bench-{offers}x{max_nodes}", skus=hardware.skus, offers=rows)


def timed(fn, repeat=3):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def import_floor(job: str, pairs: int = 7) -> int:
    """The README's solve against the tool's import floor, ``pairs`` runs of each taken in turn; prints the
    medians and their ratio, fails (1) above 2x."""
    tool = [str(Path(sys.executable).parent / "gpuplan")]  # the installed command, as the README runs it
    floors, solves = [], []
    for _ in range(pairs):
        for cmd, into in ((tool + ["--help"], floors), (tool + ["solve", job], solves)):
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
            into.append(time.perf_counter() - t0)
    floor, solve = statistics.median(floors), statistics.median(solves)
    print(f"import floor (gpuplan --help) {floor:.2f} s, solve {Path(job).name} {solve:.2f} s: {solve / floor:.2f}x")
    return 0 if solve <= 2 * floor else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--import-floor", action="store_true", help="time the solve against gpuplan --help (7 pairs)")
    ap.add_argument("--job", default=str(ROOT / "problems" / "llama-70b-within-5-days.yaml"))
    args = ap.parse_args()
    if args.import_floor:
        return import_floor(args.job)
    problem = load_job(args.job)
    grid = [(3, 8)] if args.quick else [(o, n) for o in (3, 6, 12) for n in (8, 32, 64)]
    print(f"job: {Path(args.job).name}; times are medians of 3 runs, seconds")
    print(
        f"{'offers':>6} {'max nodes':>9} {'rows':>6} {'layouts':>8} {'table':>7} {'cp-sat best':>11} "
        f"{'frontier':>8} {'points':>6} {'brute best':>10} {'brute front':>11} {'agree':>5}"
    )
    for offers, nodes in grid:
        cat = catalog(offers, nodes)
        ctx = job_context(problem, cat)
        t_table, table = timed(lambda: build_table(ctx, keep_rejected=True))

        def best():
            pm, job = _model(table)
            pm.set_objective(problem.objective)
            solver, _ = pm.solve()
            return job.chosen(solver)

        t_best, chosen = timed(best)
        t_front, (points, _complete) = timed(lambda: frontier(table))
        t_bbest, bbest = timed(lambda: bruteforce.best(table, problem.objective))
        t_bfront, bfront = timed(lambda: bruteforce.frontier(table))
        d = scaled(chosen, table)
        agree = (d["cost_cents"], d["time_s"]) == bbest and [
            (scaled(c, table)["time_s"], scaled(c, table)["cost_cents"]) for c in points
        ] == bfront
        print(
            f"{offers:>6} {nodes:>9} {len(table.rows):>6} {len(table.evaluation.row):>8} {t_table:>7.3f} "
            f"{t_best:>11.3f} {t_front:>8.3f} {len(points):>6} {t_bbest:>10.4f} {t_bfront:>11.4f} {'yes' if agree else 'NO':>5}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
