"""Mutation testing of the input files: valid job, catalog and portfolio files changed at random
(values replaced by hostile ones, keys dropped, renamed or added, structure wrapped or flattened), run
through the CLI in-process. Whatever the mutation, the CLI answers (exit 0) or refuses the input
(exit 2 with one paragraph); it never fails as a bug (exit 1), never takes more than a few seconds
and never grows the process's memory past a cap.
"""

from __future__ import annotations

import copy
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from optimizer import cli

runner = CliRunner()

# The slowest answer allowed for one mutated file (each command runs with --time-limit 2).
MAX_SECONDS = 12.0
# The most the process's peak memory may grow over one mutated file.
MAX_GROWTH_BYTES = 1 << 30

JOB = {
    "catalog": "nodus-2026-11",
    "objective": "cost",
    "job": {
        "name": "mutant",
        "model": {"params": "8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336},
        "method": "lora",
        "lora_rank": 16,
        "tokens": "500M",
        "seq_len": 4096,
        "global_batch": 64,
        "activation_reserve": "auto",
        "measured": [{"sku": "B200", "gpus": 8, "tokens_per_s": "40k"}],
    },
    "assumptions": {"mfu": 0.4, "overlap": 0.7, "link_efficiency": 0.8, "startup": "10m"},
    "constraints": {"deadline": "5d", "budget": "$20k", "max_nodes": 2, "gpu": {"min_memory": "80GB"}},
}
JOB["job"]["model"]["vocab"] = 128256

CATALOG = {
    "name": "mutant-catalog",
    "description": "a small price sheet",
    "include": ["nodus-2026-11"],
    "hardware": "hardware",
    "offers": [
        {
            "name": "mutant-h200",
            "sku": "H200",
            "provider": "Mutant",
            "price": "$3.20/h",
            "spot_price": "$1.90/h",
            "gpus_per_node": 8,
            "gpu_counts": [1, 2, 4, 8],
            "max_nodes": 4,
            "memory_delivered": "141GB",
            "billing_increment": "1m",
        }
    ],
}

PORTFOLIO = {
    "catalog": "nodus-2026-11",
    "start": "2027-01-04",
    "horizon": "10d",
    "budget": "$8,000",
    "objective": "cost",
    "time_step": "2h",
    "pools": [{"offer": "nodus-b200", "gpus": 8, "windows": [{"from": "0d", "to": "3d", "gpus": 16}]}],
    "jobs": [
        {
            "name": "a",
            "job": {"model": {"params": "1B"}, "tokens": "200M", "activation_reserve": 0},
            "deadline": "6d",
            "priority": 2,
        },
        {
            "name": "b",
            "job": {"model": {"params": "3B"}, "tokens": "100M", "activation_reserve": "20GB"},
            "after": ["a"],
            "release": "1d",
            "required": False,
        },
    ],
}

HOSTILE = st.sampled_from(
    [
        0,
        -1,
        1,
        3,
        2**31,
        10**25,
        1e30,
        -1e30,
        math.inf,
        -math.inf,
        math.nan,
        1e-300,
        0.5,
        True,
        False,
        None,
        "",
        "abc",
        "1e400",
        "-5GB",
        "99999999999999999999d",
        "1:30",
        "0x10",
        "[/bold]",
        "\u00e9\u221e",
        "nodus-2026-11",
        "B200",
        "8xB200:10k",
        [],
        {},
        [1, 2],
        {"a": 1},
        ["nodus-2026-11", "nodus-2026-11"],
    ]
)
SCALES = st.sampled_from([0, -1, 0.001, 0.5, 10, 1000, 1e6])


def _paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indexes) to a node of the tree, the root excluded."""
    out = []
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else []
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def _parent(tree: Any, path: tuple) -> Any:
    for key in path[:-1]:
        tree = tree[key]
    return tree


def _scaled(value: Any, factor: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return value
    if isinstance(value, (int, float)):
        return value * factor
    number = "".join(ch for ch in value if ch.isdigit() or ch == ".")
    try:
        return value.replace(number, f"{float(number) * factor:g}", 1) if number else value
    except ValueError:
        return value


@st.composite
def mutated(draw: st.DrawFn, base: dict) -> dict:
    tree = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(tree)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _parent(tree, path), path[-1]
        kind = draw(st.sampled_from(["replace", "replace", "scale", "scale", "drop", "rename", "add", "wrap"]))
        if kind == "replace":
            parent[key] = copy.deepcopy(draw(HOSTILE))  # sampled values are shared: never mutate them
        elif kind == "scale":
            parent[key] = _scaled(parent[key], draw(SCALES))
        elif kind == "drop":
            del parent[key]
        elif kind == "rename" and isinstance(parent, dict):
            parent[f"{key}x"] = parent.pop(key)
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "include", "after", "jobs", "skus", "name"]))] = copy.deepcopy(
                draw(HOSTILE)
            )
        elif kind == "add" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))  # a duplicate entry
        else:
            parent[key] = draw(st.sampled_from([[parent[key]], {"value": parent[key]}]))
    return tree


def _run(args: list[str]) -> None:
    """The CLI on ``args``: exit 0 or 2, no traceback, within the time and memory caps."""
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = runner.invoke(cli.app, args)
    took = time.perf_counter() - started
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) * (
        1 if sys.platform == "darwin" else 1024
    )
    assert result.exit_code in (0, 2), (args, result.exit_code, result.output[-2000:], result.exception)
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output[-2000:]
    if result.exit_code == 2:
        text = result.output
        assert text.startswith("error: ") or "Usage:" in text, text[-2000:]
    assert took < MAX_SECONDS, (args, took)
    assert grown < MAX_GROWTH_BYTES, (args, grown)


def _write(tree: dict, folder: str, name: str) -> str:
    path = Path(folder) / name
    path.write_text(yaml.safe_dump(tree, sort_keys=False, allow_unicode=True))
    return str(path)


# MUTATION_EXAMPLES=10 runs ten times as many examples (for a longer hunt than the test suite's).
SCALE = float(os.environ.get("MUTATION_EXAMPLES", "1"))

SETTINGS = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@settings(max_examples=int(90 * SCALE), **SETTINGS)
@given(tree=mutated(JOB), command=st.sampled_from(["solve", "check", "options"]))
def test_mutated_job_files(tree, command):
    with tempfile.TemporaryDirectory() as folder:
        job = _write(tree, folder, "job.yaml")
        args = {
            "solve": ["solve", job, "--time-limit", "2", "-f", "json"],
            "check": ["check", job, "--sku", "B200", "--gpus", "8", "--no-compare", "-f", "json"],
            "options": ["options", job, "-f", "json"],
        }[command]
        _run(args)


@settings(max_examples=int(75 * SCALE), **SETTINGS)
@given(tree=mutated(CATALOG), command=st.sampled_from(["catalog", "solve"]))
def test_mutated_catalog_files(tree, command):
    with tempfile.TemporaryDirectory() as folder:
        cat = _write(tree, folder, "catalog.yaml")
        job = _write(JOB, folder, "job.yaml")
        if command == "catalog":
            _run(["catalog", cat, "-f", "json"])
        else:
            _run(["solve", job, "--catalog", cat, "--time-limit", "2", "-f", "json"])


@settings(max_examples=int(45 * SCALE), **SETTINGS)
@given(tree=mutated(PORTFOLIO))
def test_mutated_portfolio_files(tree):
    with tempfile.TemporaryDirectory() as folder:
        _write(JOB, folder, "job.yaml")
        pf = _write(tree, folder, "portfolio.yaml")
        _run(["portfolio", pf, "--time-limit", "2", "--workers", "1", "-f", "json"])
