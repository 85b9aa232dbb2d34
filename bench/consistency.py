"""Benchmark: self-consistency of solve, check, options and the exports on generated jobs.

For each seed, ``tests/consistency.py`` draws a valid job (presets dense and MoE, full/LoRA/QLoRA, tokens,
sequence lengths, free and fixed batches, deadlines, budgets, spot policies, catalogs, frameworks) and
checks that check pinned to solve's plan, options on its row and every export agree with it, that the
optimum is on its frontier and that no frontier point or runner-up beats it. Prints one line per job that
disagrees and a summary; exit 1 if any does.

    python bench/consistency.py                 # 500 jobs, seeds 0-499
    python bench/consistency.py --count 50 --start 1000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import consistency  # noqa: E402  (the same checks the CI test runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500, help="jobs to generate (default 500)")
    parser.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    args = parser.parse_args()
    started = time.perf_counter()
    answered = infeasible = 0
    bad: list[tuple[int, list[str]]] = []
    for seed in range(args.start, args.start + args.count):
        data = consistency.random_job(random.Random(seed))
        problem = consistency.problem_of(data)
        answer, found = consistency.examine(problem)
        found += consistency.save_round_trip(data, answer)
        answered += answer.best is not None
        infeasible += answer.status == "infeasible"
        if found:
            bad.append((seed, found))
            print(f"seed {seed}: {data}", flush=True)
            for line in found:
                print(f"    {line}", flush=True)
        elapsed = time.perf_counter() - started
        done = seed - args.start + 1
        if done % 25 == 0:
            print(f"... {done} jobs, {len(bad)} inconsistent, {elapsed:.0f} s", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    print(
        f"{args.count} jobs (seeds {args.start}-{args.start + args.count - 1}): {answered} planned, {infeasible} "
        f"infeasible, {len(bad)} inconsistent; {elapsed:.0f} s ({elapsed / args.count:.1f} s a job)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
