"""Every numeric input field at the two ends of its range (``units.LIMITS``): the smallest value the range
lets in (5e-324, the smallest double, where it is open at 0) and its largest. Whatever the physics makes
of such a value, the command answers (exit 0) or refuses it as bad input (exit 2, one paragraph): never an
internal error, nor a numpy overflow on the way: a denormal efficiency, bandwidth or TFLOPS must not divide by
zero, nor a start-up of 30 days draw the frontier chart past its edge.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_mutation import JOB, PORTFOLIO
from typer.testing import CliRunner

from optimizer import cli
from optimizer.inputs import units

runner = CliRunner()

SKU = {
    "name": "X1",
    "memory": "80GB",
    "memory_reported": "79GB",
    "board_memory": "640GB",
    "hbm_bandwidth_gb_per_s": 3000,
    "dense_bf16_tflops": 900,
    "dense_fp8_tflops": 1800,
    "intra_node_bandwidth_gb_per_s": 900,
    "network_gb_per_s_per_gpu": 50,
    "default_mfu": 0.4,
}
OFFER = {
    "name": "x1",
    "sku": "X1",
    "price": 2,
    "spot_price": 1,
    "gpus_per_node": 8,
    "max_nodes": 4,
    "spot_preemptions_per_node_hour": 0.1,
    "billing_increment": "1m",
    "memory_delivered": "79GB",
}
SKU_JOB = {
    "catalog": "cat.yaml",
    "job": {"name": "h", "model": {"params": "8B"}, "tokens": "1B", "activation_reserve": 0},
    "constraints": {"deadline": "30d"},
}

# (file, path to the field, kind of range)
FIELDS: list[tuple[str, tuple, str]] = [
    *(
        ("job", ("job", "model", key), kind)
        for key, kind in [
            ("params", "params"),
            ("layers", "layers"),
            ("hidden", "width"),
            ("heads", "heads"),
            ("kv_heads", "heads"),
            ("ffn_hidden", "width"),
            ("vocab", "vocab"),
        ]
    ),
    *(
        ("job", ("job", key), kind)
        for key, kind in [
            ("lora_rank", "lora_rank"),
            ("tokens", "tokens"),
            ("seq_len", "seq_len"),
            ("global_batch", "global_batch"),
            ("epochs", "epochs"),
        ]
    ),
    ("job", ("job", "measured", 0, "gpus"), "gpus"),
    ("job", ("job", "measured", 0, "tokens_per_s"), "rate"),
    *(
        ("job", ("assumptions", key), kind)
        for key, kind in [
            ("mfu", "fraction"),
            ("overlap", "share"),
            ("moe_overlap", "share"),
            ("link_efficiency", "fraction"),
            ("startup", "overhead"),
            ("restart", "overhead"),
            ("failure_rate_per_gpu_hour", "failure_rate"),
            ("checkpoint_gb_per_s_per_node", "bandwidth"),
            ("host_link_gb_per_s_per_gpu", "bandwidth"),
            ("host_memory_gb_per_s_per_gpu", "bandwidth"),
        ]
    ),
    ("job", ("constraints", "deadline"), "duration"),
    ("job", ("constraints", "budget"), "budget"),
    ("job", ("constraints", "max_nodes"), "nodes"),
    ("job", ("constraints", "gpu", "min_memory"), "memory"),
    *(
        ("sku", ("skus", 0, key), kind)
        for key, kind in [
            ("memory", "memory"),
            ("memory_reported", "memory"),
            ("board_memory", "memory"),
            ("hbm_bandwidth_gb_per_s", "bandwidth"),
            ("dense_bf16_tflops", "tflops"),
            ("dense_fp8_tflops", "tflops"),
            ("intra_node_bandwidth_gb_per_s", "bandwidth"),
            ("network_gb_per_s_per_gpu", "bandwidth"),
            ("default_mfu", "fraction"),
        ]
    ),
    *(
        ("sku", ("offers", 0, key), kind)
        for key, kind in [
            ("price", "price"),
            ("spot_price", "price"),
            ("gpus_per_node", "gpus_per_node"),
            ("max_nodes", "offer_nodes"),
            ("spot_preemptions_per_node_hour", "preemptions"),
            ("billing_increment", "billing_increment"),
            ("memory_delivered", "memory"),
        ]
    ),
    *(
        ("portfolio", path, kind)
        for path, kind in [
            (("horizon",), "duration"),
            (("time_step",), "duration"),
            (("budget",), "budget"),
            (("pools", 0, "gpus"), "pool_gpus"),
            (("pools", 0, "windows", 0, "gpus"), "pool_gpus"),
            (("jobs", 0, "priority"), "priority"),
            (("jobs", 0, "deadline"), "duration"),
            (("jobs", 1, "release"), "offset"),
            (("jobs", 0, "job", "tokens"), "tokens"),
        ]
    ),
]


def ends(kind: str) -> list[float]:
    limit = units.LIMITS[kind]
    low = limit.low if limit.low_inclusive else math.nextafter(limit.low, math.inf)
    return [low, limit.high]


def written(kind: str, value: float) -> Any:
    """``value`` (base units) as a file gives it: durations in seconds, money in dollars, sizes in bytes."""
    limit = units.LIMITS[kind]
    if limit.low_inclusive and value == int(value) and limit.high >= 1 and limit.unit not in ("h", "GB"):
        value = int(value)
    if limit.unit == "h":
        return f"{value}s"
    if limit.unit == "USD":
        return f"${value}"
    if limit.unit == "GB" and value >= 1:
        return f"{value}B"
    return value


CASES = [(file, path, kind, value) for file, path, kind in FIELDS for value in ends(kind)]


@pytest.mark.filterwarnings("error::RuntimeWarning")  # an overflow or NaN on the way is a failure too
@pytest.mark.parametrize(
    ("file", "path", "kind", "value"), CASES, ids=[f"{f}:{'.'.join(map(str, p))}={v:g}" for f, p, _, v in CASES]
)
def test_a_field_at_an_end_of_its_range_is_answered_or_refused(tmp_path: Path, file, path, kind, value):
    tree = copy.deepcopy({"job": JOB, "sku": {"skus": [SKU], "offers": [OFFER]}, "portfolio": PORTFOLIO}[file])
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    assert path[-1] in parent or file != "portfolio", path  # the sweep changes fields the file has
    parent[path[-1]] = written(kind, value)
    (tmp_path / "f.yaml").write_text(yaml.safe_dump(tree))
    f = str(tmp_path / "f.yaml")
    if file == "sku":
        (tmp_path / "cat.yaml").write_text(yaml.safe_dump(tree))
        (tmp_path / "f.yaml").write_text(yaml.safe_dump(SKU_JOB))
    commands = {
        "job": [["solve", f, "--time-limit", "2"], ["check", f, "--sku", "B200", "--gpus", "8"], ["options", f]],
        "sku": [["solve", f, "--time-limit", "2"], ["check", f, "--sku", "X1", "--gpus", "8"], ["options", f]],
        "portfolio": [["portfolio", f, "--time-limit", "3"]],
    }[file]
    for args in commands:
        result = runner.invoke(cli.app, args)
        assert result.exit_code in (0, 2), (args[0], result.exit_code, result.output[-1500:])
        assert "Traceback" not in result.output and "internal error" not in result.output, result.output[-1500:]
        if result.exit_code == 2:
            assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
