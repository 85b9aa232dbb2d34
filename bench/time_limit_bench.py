"""Benchmark: does --time-limit hold for the whole command (issue 40)? Builds the audit's instances as files
and runs the CLI on each in its own process, reporting wall time, peak memory and the answer's status.

    python bench/time_limit_bench.py                       # all cases
    python bench/time_limit_bench.py --cases offers,nodes  # some of them
    python bench/time_limit_bench.py --repo /path/to/other/checkout   # the same cases on other code

Cases:
  offers     1,000 one-node offers of 8 H100s at 1,000 prices, a 70B QLoRA job, solve --time-limit 5
  nodes      one B200 offer with max_nodes 1024, a 70B full fine-tune at a global batch of 256, solve
             --time-limit 10
  identical  10,000 identical optional jobs (Qwen3 8B), portfolio --time-limit 10
  jobs5000   bench/portfolio_bench.py's constructed 5,000-job instance (seed 0, evenly sized pools, 20 %
             optional), portfolio --time-limit 20, table and YAML output
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HARDWARE = ROOT / "catalogs" / "hardware.yaml"


def _offers_case(folder: Path) -> list[tuple[str, list[str]]]:
    lines = ["name: many-offers", f"hardware: {HARDWARE}", "offers:"]
    for i in range(1000):
        lines += [
            f"  - {{name: h100-{i}, sku: H100, provider: P{i % 7}, price: ${2.0 + 0.001 * i:.3f}/h, gpus_per_node: 8, "
            "max_nodes: 1, checked: 2026-11-04, source: synthetic}"
        ]
    (folder / "offers.yaml").write_text("\n".join(lines) + "\n")
    job = f"""catalog: {folder / "offers.yaml"}
job:
  name: llama-3.1-70b-qlora
  model: {{preset: llama-3.1-70b}}
  method: qlora
  lora_rank: 64
  tokens: 200M
  seq_len: 2048
  global_batch: 32
"""
    (folder / "offers-job.yaml").write_text(job)
    return [("solve --time-limit 5", ["solve", str(folder / "offers-job.yaml"), "--time-limit", "5", "-f", "json"])]


def _nodes_case(folder: Path) -> list[tuple[str, list[str]]]:
    catalog = f"""name: big-offer
hardware: {HARDWARE}
offers:
  - {{name: big-b200, sku: B200, provider: Nodus, price: $5.50/h, gpus_per_node: 8, max_nodes: 1024,
     memory_delivered: 180GB, checked: 2026-11-04, source: synthetic}}
"""
    (folder / "nodes.yaml").write_text(catalog)
    job = f"""catalog: {folder / "nodes.yaml"}
job:
  name: llama-3.1-70b-sft
  model: {{preset: llama-3.1-70b}}
  method: full
  tokens: 20B
  seq_len: 4096
  global_batch: 256
constraints:
  deadline: 5d
"""
    (folder / "nodes-job.yaml").write_text(job)
    return [("solve --time-limit 10", ["solve", str(folder / "nodes-job.yaml"), "--time-limit", "10", "-f", "json"])]


def _identical_case(folder: Path) -> list[tuple[str, list[str]]]:
    spec = (
        "{model: {name: qwen3-8b, params: 8.19B, layers: 36, hidden: 4096, heads: 32, kv_heads: 8, "
        "ffn_hidden: 12288, vocab: 151936}, tokens: 500M, seq_len: 4096, global_batch: 128}"
    )
    lines = ["catalog: default", "start: 2027-01-04", "horizon: 60d", "time_step: 1h", "jobs:"]
    for i in range(10_000):
        lines += [f"  - name: j{i}", "    required: false", f"    job: {spec}"]
    (folder / "identical.yaml").write_text("\n".join(lines) + "\n")
    path = str(folder / "identical.yaml")
    return [("portfolio --time-limit 10", ["portfolio", path, "--time-limit", "10", "-f", "json"])]


def _jobs5000_case(folder: Path) -> list[tuple[str, list[str]]]:
    import yaml

    sys.path.insert(0, str(ROOT / "bench"))
    import portfolio_bench

    pf, catalog, _ = portfolio_bench.constructed(5000, seed=0, load=0.82, optional=0.2, slack_h=24)
    offers = [
        {
            "name": o.name,
            "sku": o.sku,
            "price": f"${o.price_usd_per_gpu_hour}/h",
            "gpus_per_node": o.gpus_per_node,
            "max_nodes": o.max_nodes,
            "checked": "2026-11-04",
            "source": "bench",
        }
        for o in catalog.offers
    ]
    (folder / "jobs5000-catalog.yaml").write_text(
        yaml.safe_dump({"name": "bench", "hardware": str(HARDWARE), "offers": offers}, sort_keys=False)
    )
    jobs = []
    for e in pf.jobs:
        entry = {"name": e.name, "job": e.job.model_dump(mode="json", by_alias=True, exclude_unset=True)}
        if e.release_s:
            entry["release"] = f"{e.release_s / 3600:g}h"
        if e.deadline_s is not None:
            entry["deadline"] = f"{e.deadline_s / 3600:g}h"
        if not e.required:
            entry["required"] = False
        if e.weight != 1:
            entry["priority"] = e.weight
        jobs.append(entry)
    doc = {
        "catalog": str(folder / "jobs5000-catalog.yaml"),
        "horizon": "30d",
        "time_step": "1h",
        "pools": [{"offer": p.offer, "gpus": p.gpus} for p in pf.pools],
        "jobs": jobs,
    }
    (folder / "jobs5000.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=1000))
    path = str(folder / "jobs5000.yaml")
    return [
        ("portfolio --time-limit 20 (table)", ["portfolio", path, "--time-limit", "20"]),
        ("portfolio --time-limit 20 -f yaml", ["portfolio", path, "--time-limit", "20", "-f", "yaml"]),
    ]


CASES = {"offers": _offers_case, "nodes": _nodes_case, "identical": _identical_case, "jobs5000": _jobs5000_case}


def run(repo: Path, args: list[str]) -> dict:
    """One CLI run in its own process: wall seconds, peak RSS (MB) and what it answered."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "optimizer", *args],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    text = out.decode(errors="replace")
    answer = "-"
    if "-f" in args and "json" in args:
        try:
            data = json.loads(text)
            answer = (
                f"{data['status']}, {'a plan' if data.get('best') else 'no plan'}"
                if "best" in data
                else (f"{data['status']}, {len(data['schedule']):,} scheduled")
            )
        except (ValueError, KeyError):
            answer = "unreadable output"
    else:
        first = next((line for line in text.splitlines() if line.strip()), "")
        answer = re.sub(r"\s+", " ", first)[:70]
    return {
        "wall_s": wall,
        "peak_mb": usage.ru_maxrss / 1024,
        "exit": os.waitstatus_to_exitcode(status),
        "answer": answer,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--repo", type=Path, default=ROOT, help="The checkout whose code runs (default: this one).")
    a = ap.parse_args()
    print(f"code: {a.repo}; load average at start {os.getloadavg()[0]:.1f}")
    print("| case | command | wall s | peak MB | exit | answer |\n|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in a.cases.split(","):
            for label, args in CASES[name](folder):
                r = run(a.repo, args)
                print(f"| {name} | {label} | {r['wall_s']:.1f} | {r['peak_mb']:,.0f} | {r['exit']} | {r['answer']} |")


if __name__ == "__main__":
    main()
