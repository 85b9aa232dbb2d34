"""Benchmark: a warm POST /v1/solve on gpuplan serve against the cold CLI, for the README's 70B job.

Cold: ``gpuplan solve problems/llama-70b-within-5-days.yaml -f json`` as a new process each time (imports,
catalog, candidate table, solve, JSON), wall time. Service: ``gpuplan serve --port 0`` started once on
127.0.0.1, then the job file's text POSTed to /v1/solve: the first request (the catalog parsed, the candidate
table built), the same question again (warm: its proven answer kept), the same job with another time limit
each time (warm: the table kept, the solver runs), and a new deadline each time (the catalog kept, a new
table, the solver runs). Each figure is the median of its runs, wall time at the client. Every answer is
checked to be the CLI's best plan (the new deadlines' plans are not compared).

    python bench/serve_bench.py                  # 3 cold runs, 10 of each warm kind, 5 new deadlines
    python bench/serve_bench.py --cold 5 --warm 20
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "problems" / "llama-70b-within-5-days.yaml"


def gpuplan() -> list[str]:
    """The gpuplan command beside this Python (its venv's entry point), else ``python -m optimizer``."""
    script = Path(sys.executable).parent / "gpuplan"
    return [str(script)] if script.exists() else [sys.executable, "-m", "optimizer"]


def cold_runs(count: int) -> tuple[list[float], dict]:
    times, answer = [], {}
    for _ in range(count):
        started = time.perf_counter()
        done = subprocess.run(
            [*gpuplan(), "solve", str(JOB), "-f", "json"], capture_output=True, text=True, timeout=300
        )
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"gpuplan solve failed: {done.stderr}")
        answer = json.loads(done.stdout)
    return times, answer


def post(url: str, body: bytes) -> tuple[float, dict]:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/yaml"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        data = json.loads(response.read())
    return time.perf_counter() - started, data


def start_server(log: Path) -> tuple[subprocess.Popen, str]:
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*gpuplan(), "serve", "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.DEVNULL, stderr=err
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        for line in log.read_text().splitlines():
            if line.startswith("gpuplan serve: http://127.0.0.1:"):
                url = line.split()[2].rstrip("/")
                for _ in range(100):
                    try:
                        with urllib.request.urlopen(f"{url}/v1/health", timeout=5):
                            return proc, url
                    except OSError:
                        time.sleep(0.1)
        time.sleep(0.1)
    proc.terminate()
    raise SystemExit(f"gpuplan serve did not start:\n{log.read_text()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=3, help="cold CLI runs (default 3)")
    parser.add_argument("--warm", type=int, default=10, help="warm POSTs of the same job (default 10)")
    parser.add_argument("--new", type=int, default=5, help="POSTs of a new deadline each (default 5)")
    args = parser.parse_args()

    cold, cli_answer = cold_runs(args.cold)
    best = cli_answer["best"]
    body = JOB.read_bytes()
    folder = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    proc, url = start_server(folder / "serve.log")
    try:
        first, answer = post(f"{url}/v1/solve", body)
        assert answer["best"] == best, "the service's first answer is not the CLI's"
        warm, solved = [], []
        for i in range(args.warm):
            took, answer = post(f"{url}/v1/solve", body)
            assert answer["best"] == best, "a warm answer is not the CLI's"
            warm.append(took)
            took, answer = post(f"{url}/v1/solve?time_limit={9 + i / 100:.2f}", body)  # a time limit not asked yet
            assert answer["best"] == best, "a warm answer is not the CLI's"
            solved.append(took)
        new = []
        for i in range(args.new):
            varied = body.replace(b"deadline: 5d", f"deadline: {4 + i / 10:.1f}d".encode())
            took, answer = post(f"{url}/v1/solve", varied)
            assert answer["status"] in ("optimal", "feasible"), answer["status"]
            new.append(took)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)

    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    rows = [
        (f"cold CLI: gpuplan solve -f json ({args.cold} runs)", cold_s),
        ("service, first request (catalog + table built)", first),
        (f"service, warm: the same question again ({args.warm} runs)", warm_s),
        (f"service, warm: the job, another time limit ({args.warm} runs)", statistics.median(solved)),
        (f"service, a new deadline each ({args.new} runs)", statistics.median(new) if new else float("nan")),
    ]
    print(f"README job: {JOB.relative_to(ROOT)}; best plan {best['nodes']} x {best['gpus_per_node']} {best['sku']}")
    for label, seconds in rows:
        print(f"  {label:<55} {seconds * 1000:8.0f} ms")
    print(f"  warm / cold = {warm_s / cold_s:.3f}; with the solver running {statistics.median(solved) / cold_s:.3f}")
    print(f"  cold runs: {', '.join(f'{t:.2f}' for t in cold)} s")
    print(f"  warm runs: {', '.join(f'{t:.3f}' for t in warm)} s; solved: {', '.join(f'{t:.3f}' for t in solved)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
