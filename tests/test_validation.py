"""The validation suite runs in CI: 15 published training runs predicted with the defaults; the
median |error| must stay within the figure the README documents (20 %)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_validation_median_error_stays_within_the_documented_figure():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "validate.py"), "--max-median", "0.20"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "15 runs" in out.stdout


def test_throughput_on_published_layouts_stays_within_the_documented_figures():
    # 27 dense published layouts (NeMo / Megatron-Bridge, torchtitan, AutoModel; H100, H200, B200; BF16 and
    # FP8), none used to choose gpuplan's defaults: README and BENCHMARKS document a median of 7.5 % with
    # one row (ZeRO-3 re-gathering per micro-batch) off by 2.55x; CI holds the 10 % median and
    # a margin over the worst row; the 12 MoE rows (median 29.0 %, the issue asks for 15 %) may not regress.
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "throughput.py"),
            *("--max-median", "0.10", "--max-worst", "1.65", "--max-moe-median", "0.12"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "27 dense rows" in out.stdout
