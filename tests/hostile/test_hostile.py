"""Hostile input, interrupts and failed writes, grouped by the classes of the hardening issue.

Every case runs a command and checks the contract: bad input exits 2 with one paragraph naming the
file or flag and the field, and the allowed range where a number is out of it; an answer exits 0;
^C exits 130 with 'interrupted'; never a traceback, never exit 1, and no partial or clobbered file.
Most cases run in-process through typer's CliRunner; interrupts, FIFOs and output encodings run
``python -m optimizer`` in a subprocess with a timeout.

    1. unbounded work from a tiny file      5. interrupts and time limits
    2. silent misreads                      6. structural input
    3. numbers that are not numbers         7. message quality
    4. output files
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import importlib
import json
import math
import os
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path
from string import Template

import pytest
import yaml
from paths import ROOT
from typer.testing import CliRunner

import optimizer
from optimizer import api, cli, load_job, load_portfolio
from optimizer.cli import plan as cli_plan
from optimizer.cli.shared import emit
from optimizer.cli_options import Format
from optimizer.inputs import schema, units
from optimizer.present import output

runner = CliRunner()

# --------------------------------------------------------------------------- files the cases start from

JOB = Template(
    """\
catalog: $catalog
job:
  name: $name
  model: $model
  tokens: $tokens
  activation_reserve: $reserve
$job_extra$extra"""
)
JOB_DEFAULTS = {
    "catalog": "nodus-2026-11",
    "name": "hostile",
    "model": "{params: 14B}",
    "tokens": "1B",
    "reserve": "0",
    "job_extra": "",
    "extra": "",
}

CATALOG = Template(
    """\
name: hostile-catalog
hardware: hardware
offers:
  - name: $name
    sku: B200
    price: $price
    gpus_per_node: $gpus_per_node
    max_nodes: $max_nodes
$offer_extra$extra"""
)
CATALOG_DEFAULTS = {
    "name": "hostile-b200",
    "price": "$5/h",
    "gpus_per_node": "8",
    "max_nodes": "2",
    "offer_extra": "",
    "extra": "",
}

SKUS = Template(
    """\
skus:
  - name: X1
    memory: $memory
    hbm_bandwidth_gb_per_s: $hbm
    dense_bf16_tflops: $tflops
    intra_node_bandwidth_gb_per_s: 900
offers:
  - {name: x1, sku: X1, price: 2}
"""
)
SKUS_DEFAULTS = {"memory": "80GB", "hbm": "3000", "tflops": "900"}

PORTFOLIO = Template(
    """\
catalog: nodus-2026-11
horizon: $horizon
time_step: $time_step
budget: $budget
pools:
  - offer: nodus-b200
    gpus: $pool_gpus
    windows:
      - {from: 0d, to: 2d, gpus: $window_gpus}
jobs:
  - name: $name_a
    job: {model: {params: 1B}, tokens: 100M, activation_reserve: 0}
    deadline: $deadline
    priority: $priority
    release: $release
  - name: b
    job: {model: {params: 1B}, tokens: 100M, activation_reserve: 0}
    after: $after_b
$extra"""
)
PORTFOLIO_DEFAULTS = {
    "horizon": "7d",
    "time_step": "1h",
    "budget": "$5k",
    "pool_gpus": "8",
    "window_gpus": "8",
    "name_a": "a",
    "deadline": "5d",
    "priority": "1",
    "release": "0h",
    "after_b": "[a]",
    "extra": "",
}


def job_text(**fields: str) -> str:
    return JOB.substitute({**JOB_DEFAULTS, **fields})


def catalog_text(**fields: str) -> str:
    return CATALOG.substitute({**CATALOG_DEFAULTS, **fields})


def skus_text(**fields: str) -> str:
    return SKUS.substitute({**SKUS_DEFAULTS, **fields})


def portfolio_text(**fields: str) -> str:
    return PORTFOLIO.substitute({**PORTFOLIO_DEFAULTS, **fields})


def config_json(**fields: typing.Any) -> str:
    base = {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "intermediate_size": 8192,
        "vocab_size": 32000,
    }
    return json.dumps({**base, **fields})


# --------------------------------------------------------------------------- running a case


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder`` with its bytes (to see that nothing was written or changed)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def invoke(args: list, folder: Path | None = None) -> typing.Any:
    result = runner.invoke(cli.app, [str(a) for a in args])
    assert "Traceback" not in result.output, result.output
    assert result.exit_code != 1, result.output  # exit 1 is for bugs only
    return result


def refused(tmp_path: Path, args: list, *expect: str) -> str:
    """Run a command that must fail as bad input: exit 2, every ``expect`` text in its one paragraph,
    and nothing written or changed in ``tmp_path``."""
    before = snapshot(tmp_path)
    result = invoke(args)
    assert result.exit_code == 2, result.output
    text = result.output
    for fragment in expect:
        assert fragment in text, (fragment, text)
    assert "nan GB" not in text and "RuntimeWarning" not in text, text
    assert snapshot(tmp_path) == before, "a refused command wrote or changed a file"
    return text


def files(tmp_path: Path, **contents: str | bytes) -> dict[str, Path]:
    """Write the named files (``job_yaml`` -> job.yaml) into ``tmp_path``."""
    paths = {}
    for key, content in contents.items():
        path = tmp_path / key.replace("_", ".", 1) if "_" in key else tmp_path / key
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        paths[key] = path
    return paths


def gpuplan(*args: typing.Any, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m optimizer ARGS`` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "optimizer", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


# =========================================================================== 1. unbounded work


BILLION_LAUGHS = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    + "job: *i\n"
)

UNBOUNDED_FILES = [
    # (id, files to write, command, expected fragments)
    (
        "config-json-trillion-layers",
        {"cfg.json": config_json(num_hidden_layers=1e12)},
        ["model", "{cfg.json}"],
        ["cfg.json", "job.model.hf_config", "num_hidden_layers", "at most 10,000"],
    ),
    (
        "config-json-trillion-layers-int",
        {"cfg.json": config_json(num_hidden_layers=10**12)},
        ["model", "{cfg.json}"],
        ["num_hidden_layers", "at most 10,000"],
    ),
    (
        "config-json-huge-vocab",
        {"cfg.json": config_json(vocab_size=1e30)},
        ["model", "{cfg.json}"],
        ["vocab_size", "at most"],
    ),
    (
        "config-json-huge-experts",
        {"cfg.json": config_json(num_local_experts=10**9, num_experts_per_tok=2)},
        ["model", "{cfg.json}"],
        ["num_local_experts", "at most"],
    ),
    (
        "config-json-via-job-file",
        {"cfg.json": config_json(num_hidden_layers=1e12), "job.yaml": job_text(model="{hf_config: cfg.json}")},
        ["solve", "{job.yaml}"],
        ["cfg.json", "job.model.hf_config", "num_hidden_layers"],
    ),
    (
        "catalog-million-nodes",
        {"cat.yaml": catalog_text(max_nodes="1000000")},
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "offers[0].max_nodes", "at most 1,024"],
    ),
    (
        "catalog-thousand-gpus-per-node",
        {"cat.yaml": catalog_text(gpus_per_node="1000")},
        ["catalog", "{cat.yaml}"],
        ["offers[0].gpus_per_node", "at most 72"],
    ),
    (
        "catalog-million-nodes-in-solve",
        {"cat.yaml": catalog_text(max_nodes="1e6"), "job.yaml": job_text()},
        ["solve", "{job.yaml}", "--catalog", "{cat.yaml}"],
        ["cat.yaml", "offers[0].max_nodes", "1,024"],
    ),
    (
        "catalog-too-many-node-counts",
        {
            "cat.yaml": catalog_text(
                max_nodes="1024",
                extra="".join(f"  - {{name: o{i}, sku: H200, price: 3, max_nodes: 1024}}\n" for i in range(4)),
            )
        },
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "field 'offers'", "5,120 node counts", "4,096"],
    ),
    (
        "portfolio-one-second-steps",
        {"pf.yaml": portfolio_text(time_step="1s", horizon="30d")},
        ["portfolio", "{pf.yaml}"],
        ["pf.yaml", "time_step", "100,000", "at least 26 s"],  # 30 days / 100,000 (it said "0 min")
    ),
    (
        "portfolio-minute-steps-over-ten-years",
        {"pf.yaml": portfolio_text(time_step="1m", horizon="3650d")},
        ["portfolio", "{pf.yaml}"],
        ["time_step", "100,000"],
    ),
    (
        "portfolio-huge-pool",
        {"pf.yaml": portfolio_text(pool_gpus="10000000")},
        ["portfolio", "{pf.yaml}"],
        ["pools[0].gpus", "at most 294,912"],
    ),
    (
        "job-huge-seq-len",
        {"job.yaml": job_text(job_extra="  seq_len: 99999999999999\n")},
        ["solve", "{job.yaml}"],
        ["job.seq_len", "at most"],
    ),
    (
        "job-huge-global-batch",
        {"job.yaml": job_text(job_extra="  global_batch: 1e15\n")},
        ["solve", "{job.yaml}"],
        ["job.global_batch", "at most"],
    ),
    (
        "job-huge-lora-rank",
        {"job.yaml": job_text(job_extra="  method: lora\n  lora_rank: 1000000000\n")},
        ["solve", "{job.yaml}"],
        ["job.lora_rank", "at most"],
    ),
    (
        "job-billion-layers",
        {"job.yaml": job_text(model="{params: 14B, layers: 1000000000, hidden: 4096}")},
        ["solve", "{job.yaml}"],
        ["job.model.layers", "at most 10,000"],
    ),
    (
        "yaml-alias-bomb",
        {"job.yaml": BILLION_LAUGHS},
        ["solve", "{job.yaml}"],
        ["job.yaml", "alias"],
    ),
    (
        "job-file-too-large",
        {"job.yaml": "# " + "x" * (17 * 2**20) + "\n"},
        ["solve", "{job.yaml}"],
        ["job.yaml", "larger than"],
    ),
]


@pytest.mark.parametrize("case", UNBOUNDED_FILES, ids=[c[0] for c in UNBOUNDED_FILES])
def test_unbounded_work_is_refused_quickly(tmp_path, case):
    _, contents, args, expect = case
    written = {}
    for name, content in contents.items():
        written[name] = tmp_path / name
        written[name].write_text(content)
    argv = [str(written[a[1:-1]]) if a.startswith("{") else a for a in args]
    started = time.perf_counter()
    refused(tmp_path, argv, *expect)
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_job_file_is_refused(tmp_path, device):
    if not Path(device).exists():
        pytest.skip(f"no {device}")
    refused(tmp_path, ["solve", device], device, "not a regular file")


def test_too_many_measured_flags(tmp_path):
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    many = [arg for _ in range(units.MAX_MEASUREMENTS + 1) for arg in ("--measured", "8xB200:10k")]
    refused(tmp_path, ["solve", job, *many], "--measured", f"at most {units.MAX_MEASUREMENTS}")
    refused(tmp_path, ["check", job, "--sku", "B200", "--gpus", "8", *many], "--measured")


def test_a_fifo_job_file_does_not_hang(tmp_path):
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    result = gpuplan("solve", fifo, timeout=60)
    assert result.returncode == 2, result.stderr
    assert str(fifo) in result.stderr and "named pipe" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_fifo_catalog_does_not_hang(tmp_path):
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    fifo = tmp_path / "cat.yaml"
    os.mkfifo(fifo)
    result = gpuplan("solve", job, "--catalog", fifo, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "--catalog" in result.stderr and "not a regular file" in result.stderr  # it exists: not "not found"
    assert "Traceback" not in result.stderr


# =========================================================================== 2. silent misreads


def test_cyclic_after_is_a_cycle_not_infeasible(tmp_path):
    pf = files(
        tmp_path,
        pf_yaml=portfolio_text(
            extra="  - name: c\n    job: {model: {params: 1B}, tokens: 100M, activation_reserve: 0}\n    after: [b]\n"
        )
        .replace("after: [a]", "after: [c]")
        .replace("    priority: 1\n", "    priority: 1\n    after: [b]\n"),
    )["pf_yaml"]
    text = refused(tmp_path, ["portfolio", pf, "--time-limit", "2"], str(pf), "cycle", "'after:'")
    assert "a -> b" in text or "b -> c" in text or "c -> a" in text
    assert "infeasible" not in text


def test_two_job_cycle(tmp_path):
    pf = files(tmp_path, pf_yaml=portfolio_text().replace("    priority: 1\n", "    priority: 1\n    after: [b]\n"))[
        "pf_yaml"
    ]
    refused(tmp_path, ["portfolio", pf], "jobs[0].after", "cycle", "a -> b -> a")


def test_self_dependency(tmp_path):
    pf = files(tmp_path, pf_yaml=portfolio_text(after_b="[b]"))["pf_yaml"]
    refused(tmp_path, ["portfolio", pf], "after itself")


DUPLICATES = [
    (
        "same-offer-name-twice",
        {"cat.yaml": catalog_text(extra="  - {name: hostile-b200, sku: H200, price: 3}\n")},
        ["offers[1].name", "given twice", "offers[0]"],
    ),
    (
        "same-offer-name-other-case",
        {"cat.yaml": catalog_text(extra="  - {name: Hostile_B200, sku: H200, price: 3}\n")},
        ["given twice"],
    ),
    (
        "offer-name-clashes-with-an-include",
        {"cat.yaml": "include: [nodus-2026-11]\n" + catalog_text(name="nodus-b200")},
        ["nodus-b200", "given twice", "nodus-2026-11.yaml"],
    ),
    (
        "catalog-included-twice",
        {"cat.yaml": "include: [nodus-2026-11, nodus-2026-11]\n"},
        ["include[1]", "included twice"],
    ),
    (
        "catalog-included-twice-through-another",
        {"cat.yaml": "include: [default, nodus-2026-11]\n"},
        ["include[1]", "included twice", "default.yaml"],
    ),
    (
        "catalog-included-twice-through-two-files",
        {
            "a.yaml": "include: [nodus-2026-11]\n",
            "b.yaml": "include: [nodus-2026-11]\n",
            "cat.yaml": "include: [a.yaml, b.yaml]\n",
        },
        ["included twice", "a.yaml", "b.yaml"],
    ),
    *(
        (
            f"sku-{kind}",
            {
                "cat.yaml": skus_text().replace(
                    "offers:",
                    f"  - {{name: {second[0]}, memory: 8GB, hbm_bandwidth_gb_per_s: 30, "
                    f"dense_bf16_tflops: 10, intra_node_bandwidth_gb_per_s: 9{second[1]}}}\noffers:",
                )
            },
            ["cat.yaml", "skus[1]", "names two SKUs"],
        )
        for kind, second in (
            ("twice", ("X1", "")),
            ("other-case", ("x1", "")),
            ("alias-clash", ("Y1", ", aliases: [x1]")),
        )
    ),
    ("catalog-includes-itself", {"cat.yaml": "include: [cat.yaml]\n"}, ["include[0]", "cycle", "cat.yaml -> cat.yaml"]),
    (
        "include-cycle-of-two",
        {"cat.yaml": "include: [other.yaml]\n", "other.yaml": "include: [cat.yaml]\n"},
        ["cycle", "cat.yaml -> other.yaml -> cat.yaml"],
    ),
    (
        "include-cycle-of-three",
        {"cat.yaml": "include: [b.yaml]\n", "b.yaml": "include: [c.yaml]\n", "c.yaml": "include: [cat.yaml]\n"},
        ["cycle", "cat.yaml -> b.yaml -> c.yaml -> cat.yaml"],
    ),
    (
        "duplicate-key",
        {"cat.yaml": catalog_text(offer_extra="    price: $6/h\n")},
        ["duplicate key 'price'"],
    ),
]


@pytest.mark.parametrize("case", DUPLICATES, ids=[c[0] for c in DUPLICATES])
@pytest.mark.parametrize("command", ["catalog", "solve"])
def test_duplicates_and_include_cycles_are_refused(tmp_path, case, command):
    _, contents, expect = case
    for name, content in contents.items():
        (tmp_path / name).write_text(content)
    cat = tmp_path / "cat.yaml"
    if command == "catalog":
        args = ["catalog", cat]
    else:
        job = tmp_path / "job.yaml"
        job.write_text(job_text())
        args = ["solve", job, "--catalog", cat]
    refused(tmp_path, args, *expect)


@pytest.mark.parametrize("value", ["0", "-1"])
def test_check_nodes_zero_is_not_the_default(tmp_path, value):
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    refused(tmp_path, ["check", job, "--sku", "B200", "--gpus", "8", "--nodes", value], "--nodes", "at least 1")


def test_base_60_is_not_a_duration(tmp_path):
    job = files(tmp_path, job_yaml=job_text(extra="constraints:\n  deadline: 1:30\n"))["job_yaml"]
    refused(tmp_path, ["solve", job], "constraints.deadline", "1:30")


# =========================================================================== 3. numbers that are not numbers

NOT_NUMBERS = [".inf", ".nan", "1e400", "-.inf"]


def _job_field(field: str, value: str) -> str:
    """A job file with ``value`` written at the dotted ``field``."""
    section, _, name = field.partition(".")
    if field == "job.model.params":
        return job_text(model=f"{{params: {value}}}")
    if field == "job.tokens":
        return job_text(tokens=value)
    if field == "job.activation_reserve":
        return job_text(reserve=value)
    if section == "job":
        return job_text(job_extra=f"  {name}: {value}\n")
    return job_text(extra=f"{section}:\n  {name}: {value}\n")


JOB_NUMBERS = [
    ("job.model.params", ["1e30", "1e15", "1e-300", "999"]),
    ("job.tokens", ["1e30", "1e17"]),
    ("job.activation_reserve", ["1e30", "-5"]),
    ("job.seq_len", ["1e12"]),
    ("job.global_batch", ["-4", "1e12"]),
    ("job.lora_rank", ["0", "1e12"]),
    ("job.bytes_per_param", ["1e6", "1e-300"]),
    ("constraints.deadline", ["99999999999999999999d", "876000h", "1000w", "5h garbage", "1.2.3h"]),
    ("constraints.budget", ["1e300", "$1e11", "'1,5'"]),
    ("constraints.max_nodes", ["1000000"]),
    ("constraints.max_gpus", ["1e12"]),
    ("assumptions.startup", ["1e30", "365d"]),
    ("assumptions.restart", ["1e30"]),
    ("assumptions.link_efficiency", ["1e30", "0"]),
    ("assumptions.overlap", ["2"]),
    ("assumptions.mfu", ["1e30"]),
    ("assumptions.host_memory_per_node", ["1e30"]),
    ("assumptions.failure_rate_per_gpu_hour", ["1e30"]),
]
JOB_NUMBER_CASES = [(field, v) for field, extra in JOB_NUMBERS for v in NOT_NUMBERS + extra]


@pytest.mark.parametrize(("field", "value"), JOB_NUMBER_CASES, ids=[f"{f}={v}" for f, v in JOB_NUMBER_CASES])
def test_job_numbers_out_of_range(tmp_path, field, value):
    job = files(tmp_path, job_yaml=_job_field(field, value))["job_yaml"]
    text = refused(tmp_path, ["solve", job, "--time-limit", "2"], str(job), f"field '{field}'")
    assert "at most" in text or "finite" in text, text


CATALOG_NUMBERS = [
    ("offers[0].price", "price", ["$1e300/h", "1e30", "0"]),
    ("offers[0].max_nodes", "max_nodes", ["0", "1e30"]),
    ("offers[0].gpus_per_node", "gpus_per_node", ["0", "73"]),
    ("offers[0].spot_price", "offer_extra:spot_price", ["1e30"]),
    ("offers[0].memory_delivered", "offer_extra:memory_delivered", ["1e30", "1e400GB"]),
    ("offers[0].billing_increment", "offer_extra:billing_increment", ["1e30", "0"]),
    ("offers[0].spot_preemptions_per_node_hour", "offer_extra:spot_preemptions_per_node_hour", ["1e30", "-1"]),
]
CATALOG_NUMBER_CASES = [
    (field, key, v) for field, key, extra in CATALOG_NUMBERS for v in [".inf", ".nan", "1e400", *extra]
]


@pytest.mark.parametrize(
    ("field", "key", "value"), CATALOG_NUMBER_CASES, ids=[f"{f}={v}" for f, _, v in CATALOG_NUMBER_CASES]
)
def test_catalog_numbers_out_of_range(tmp_path, field, key, value):
    if key.startswith("offer_extra:"):
        text = catalog_text(offer_extra=f"    {key.split(':')[1]}: {value}\n")
    else:
        text = catalog_text(**{key: value})
    cat = files(tmp_path, cat_yaml=text)["cat_yaml"]
    out = refused(tmp_path, ["catalog", cat], str(cat), f"field '{field}'")
    assert "at most" in out or "finite" in out, out


SKU_NUMBER_CASES = [
    (field, key, v)
    for field, key in (
        ("skus[0].memory", "memory"),
        ("skus[0].dense_bf16_tflops", "tflops"),
        ("skus[0].hbm_bandwidth_gb_per_s", "hbm"),
    )
    for v in (".inf", ".nan", "1e400", "1e30", "0")
] + [("skus[0].hbm_bandwidth_gb_per_s", "hbm", "5.0e-324")]  # above 0, but a denormal divides by zero


@pytest.mark.parametrize(("field", "key", "value"), SKU_NUMBER_CASES, ids=[f"{f}={v}" for f, _, v in SKU_NUMBER_CASES])
def test_sku_numbers_out_of_range(tmp_path, field, key, value):
    cat = files(tmp_path, cat_yaml=skus_text(**{key: value}))["cat_yaml"]
    refused(tmp_path, ["catalog", cat], str(cat), f"field '{field}'", "at most")


PORTFOLIO_NUMBERS = [
    ("jobs[0].priority", "priority", ["1e30", "0"]),
    ("jobs[0].deadline", "deadline", ["99999999999999999999d", "1e30"]),
    ("jobs[0].release", "release", ["-1", "1e30"]),
    ("horizon", "horizon", ["876000h", "0"]),
    ("budget", "budget", ["1e300", "$1e12"]),
    ("pools[0].gpus", "pool_gpus", ["-1", "1e12"]),
    ("pools[0].windows[0].gpus", "window_gpus", ["-1", "1e12"]),
]
PORTFOLIO_NUMBER_CASES = [
    (field, key, v) for field, key, extra in PORTFOLIO_NUMBERS for v in [".inf", ".nan", "1e400", *extra]
]


@pytest.mark.parametrize(
    ("field", "key", "value"), PORTFOLIO_NUMBER_CASES, ids=[f"{f}={v}" for f, _, v in PORTFOLIO_NUMBER_CASES]
)
def test_portfolio_numbers_out_of_range(tmp_path, field, key, value):
    pf = files(tmp_path, pf_yaml=portfolio_text(**{key: value}))["pf_yaml"]
    out = refused(tmp_path, ["portfolio", pf, "--time-limit", "2"], str(pf), f"field '{field}'")
    assert "at most" in out or "finite" in out or "greater than" in out, out


FLAG_NUMBERS = [
    # (command, flag, bad values)
    ("solve", "--budget", ["1e400", "inf", "nan", "1e300", "-5", "0"]),
    ("solve", "--deadline", ["99999999999999999999d", "1e400h", "876000h", "0h"]),
    ("solve", "--time-limit", ["0", "-1", "nan", "inf", "1e30"]),
    ("solve", "--max-nodes", ["0", "1000000"]),
    ("solve", "--max-gpus", ["0", "99999999999"]),
    ("solve", "--min-memory", ["1e400GB", "1e30GB", "0"]),
    ("options", "--budget", ["1e400", "1e300"]),
    ("options", "--deadline", ["876000h"]),
    ("options", "--max-nodes", ["0", "99999"]),
    ("check", "--gpus", ["0", "-8", "99999999999"]),
    ("check", "--nodes", ["0", "99999"]),
    ("check", "--tp", ["0", "1000"]),
    ("check", "--pp", ["0", "1000000"]),
    ("check", "--micro-batch", ["100000000000"]),
    ("check", "--shard-degree", ["0", "99999999999"]),
    ("check", "--cp", ["0", "99999999999"]),
    ("check", "--ep", ["0", "99999999999"]),
    ("check", "--budget", ["1e400"]),
    ("check", "--deadline", ["99999999999999999999d"]),
    ("capacity", "--gpus", ["0", "99999999999"]),
    ("capacity", "--reserve", ["1e400GB", "1e30"]),
    ("capacity", "--bytes-per-param", ["nan", "inf", "0", "1e30", "1e-300"]),
    ("catalog", "--min-memory", ["1e400GB", "1e30"]),
    ("portfolio", "--time-limit", ["0", "-1", "nan", "inf"]),
    ("portfolio", "--workers", ["0", "1000"]),
]
FLAG_CASES = [(cmd, flag, v) for cmd, flag, values in FLAG_NUMBERS for v in values]


@pytest.mark.parametrize(("command", "flag", "value"), FLAG_CASES, ids=[f"{c}{f}={v}" for c, f, v in FLAG_CASES])
def test_flag_numbers_out_of_range(tmp_path, command, flag, value):
    job = files(tmp_path, job_yaml=job_text(), pf_yaml=portfolio_text())
    args: list = {
        "solve": ["solve", job["job_yaml"]],
        "options": ["options", job["job_yaml"]],
        "check": ["check", job["job_yaml"], "--sku", "B200", "--gpus", "8"],
        "capacity": ["capacity", "--sku", "B200"],
        "catalog": ["catalog", "default"],
        "portfolio": ["portfolio", job["pf_yaml"]],
    }[command]
    if flag == "--gpus":
        args = [a for a in args if a not in ("--gpus", "8")]
    text = refused(tmp_path, [*args, flag, value], flag)
    assert "Invalid value" in text or "at most" in text or "finite" in text or "at least" in text, text


def test_every_numeric_input_field_has_a_range():
    """Each numeric field of the input schema is bounded in units.LIMITS (the one table of ranges)."""

    def numeric(annotation: typing.Any) -> bool:
        if typing.get_origin(annotation) in (list, dict):
            return False  # list and dict entries are checked by their model's validators
        if annotation in (int, float):
            return True
        return any(numeric(arg) for arg in typing.get_args(annotation))

    missing = []
    for model in schema._Model.__subclasses__():
        if model is schema.Strategy:  # an output, built by the planner
            continue
        for name, info in model.model_fields.items():
            if (
                numeric(info.annotation)
                and f"{model.__name__}.{name}" not in schema._RANGES
                and name not in schema._RANGES
            ):
                missing.append(f"{model.__name__}.{name}")
    assert not missing, missing
    assert set(schema._RANGES.values()) <= set(units.LIMITS)


def test_every_range_says_why():
    for kind, limit in units.LIMITS.items():
        assert limit.reason and limit.low < limit.high, kind
        assert limit.text().startswith("must be"), kind


def test_no_numpy_warning_reaches_stderr(tmp_path):
    job = files(tmp_path, job_yaml=job_text(tokens=".nan"))["job_yaml"]
    result = gpuplan("solve", job, env={"PYTHONWARNINGS": "error::RuntimeWarning"})
    assert result.returncode == 2 and "RuntimeWarning" not in result.stderr and "Traceback" not in result.stderr


# =========================================================================== 4. output files


def _solve_args(paths: dict[str, Path]) -> list:
    return ["solve", paths["job_yaml"], "--time-limit", "2"]


BAD_DESTINATIONS = [
    # (id, flag, destination relative to tmp_path (or absolute), extra args, expected fragments)
    ("plot-unknown-extension", "--plot", "chart.txt", [], ["--plot", "'.txt'", ".png"]),
    ("plot-no-extension", "--plot", "chart", [], ["--plot", "no extension"]),
    ("plot-existing-directory", "--plot", "adir", [], ["--plot", "is a directory"]),
    ("plot-missing-folder", "--plot", "nope/chart.png", [], ["--plot", "does not exist"]),
    ("plot-parent-is-a-file", "--plot", "job.yaml/chart.png", [], ["--plot", "not a folder"]),
    ("report-unknown-extension", "--report", "report.pdf", [], ["--report", "'.pdf'", ".html"]),
    ("report-existing-directory", "--report", "adir", [], ["--report", "is a directory"]),
    ("report-missing-folder", "--report", "nope/r.html", [], ["--report", "does not exist"]),
    ("out-is-the-job-file", "--out", "job.yaml", ["--export", "skypilot"], ["--out", "input file"]),
    ("out-existing-directory", "--out", "adir", ["--export", "skypilot"], ["--out", "is a directory"]),
    ("out-missing-folder", "--out", "nope/x.yaml", ["--export", "skypilot"], ["--out", "does not exist"]),
    ("out-dev-full", "--out", "/dev/full", ["--export", "skypilot"], ["--out", "/dev/full", "not a regular file"]),
    ("out-dev-null", "--out", "/dev/null", ["--export", "skypilot"], ["--out", "not a regular file"]),
    ("out-unknown-export", "--out", "x.yaml", ["--export", "nomad"], ["--export", "nomad"]),
]


@pytest.mark.parametrize("case", BAD_DESTINATIONS, ids=[c[0] for c in BAD_DESTINATIONS])
def test_bad_destination_fails_before_solving(tmp_path, case):
    _, flag, dest, extra, expect = case
    paths = files(tmp_path, job_yaml=job_text())
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir" / "keep").write_text("x")
    target = dest if dest.startswith("/") else tmp_path / dest
    text = refused(tmp_path, [*_solve_args(paths), flag, target, *extra], *expect)
    assert "Cheapest plan" not in text and "status" not in text  # failed before solving: nothing printed


@pytest.mark.parametrize(
    ("command", "flag", "dest"),
    [
        ("check", "--plot", "memory.txt"),
        ("check", "--plot", "job.yaml"),
        ("portfolio", "--plot", "gantt.html"),
        ("portfolio", "--plot", "pf.yaml"),
        ("solve", "--report", "job.yaml"),
    ],
)
def test_bad_destinations_on_every_command(tmp_path, command, flag, dest):
    paths = files(tmp_path, job_yaml=job_text(), pf_yaml=portfolio_text())
    args = {
        "check": ["check", paths["job_yaml"], "--sku", "B200", "--gpus", "8"],
        "portfolio": ["portfolio", paths["pf_yaml"], "--time-limit", "2"],
        "solve": ["solve", paths["job_yaml"]],
    }[command]
    refused(tmp_path, [*args, flag, tmp_path / dest], flag)


def test_the_input_file_is_never_overwritten_under_another_name(tmp_path):
    paths = files(tmp_path, job_yaml=job_text())
    link = tmp_path / "link.yaml"
    link.symlink_to(paths["job_yaml"])
    refused(tmp_path, [*_solve_args(paths), "--export", "skypilot", "--out", link], "--out", "input file")


@pytest.mark.parametrize("target", ["cat.yaml", "sub.yaml", "hw.yaml", "cfg.json"])
@pytest.mark.parametrize("command", ["solve", "check"])
def test_no_file_the_job_reads_is_overwritten(tmp_path, command, target):
    """Not only the job file: its catalog, the catalogs and hardware file that one includes, and the
    config.json of its model (an --out there replaced the catalog with a Kubernetes manifest)."""
    (tmp_path / "hw.yaml").write_text(skus_text().split("offers:")[0])
    (tmp_path / "sub.yaml").write_text("hardware: hw.yaml\noffers:\n  - {name: x1, sku: X1, price: 2}\n")
    (tmp_path / "cat.yaml").write_text("include: [sub.yaml]\n")
    (tmp_path / "cfg.json").write_text(config_json())
    (tmp_path / "job.yaml").write_text(job_text(catalog="cat.yaml", model="{hf_config: cfg.json}"))
    args = [command, tmp_path / "job.yaml", *(["--sku", "X1", "--gpus", "8"] if command == "check" else [])]
    refused(tmp_path, [*args, "--export", "skypilot", "--out", tmp_path / target], "--out", "input file", target)


@pytest.mark.parametrize("out", [True, False], ids=["to-a-file", "to-stdout"])
def test_no_launcher_config_for_a_layout_that_does_not_fit(tmp_path, out):
    """A 70B full fine-tune on one L40S needs about 1 TB per GPU: its config would start and then fail."""
    args = [
        "check",
        ROOT / "problems/llama-70b-within-5-days.yaml",
        "--sku",
        "L40S",
        "--gpus",
        "1",
        "--export",
        "skypilot",
    ]
    text = refused(
        tmp_path, [*args, *(["--out", tmp_path / "x.yaml"] if out else [])], "--export", "does not fit", "GiB per GPU"
    )
    assert "resources" not in text


@pytest.mark.parametrize(
    ("measured", "expect"),
    [
        ("4xB200:1e12 tok/s", "MFU, more model FLOP/s than the GPUs' peak"),
        ("4xB200:1e-300 tok/s", "times slower than gpuplan predicts"),
        ("4xB200:15k tok/s,1GB", "less than half"),
    ],
    ids=["faster-than-peak", "slower-than-any-efficiency", "peak-below-the-state"],
)
def test_an_impossible_measurement_is_refused(tmp_path, measured, expect):
    """Calibrating to a typo would mislead every plan: a 1e12 tok/s measurement was reported at 4,654 % MFU."""
    job = files(tmp_path, job_yaml=job_text(model="{preset: llama-3.1-8b}"))["job_yaml"]
    refused(tmp_path, ["check", job, "--sku", "B200", "--gpus", "4", "--measured", measured], "measured", expect)


def test_one_path_for_two_outputs_is_refused(tmp_path):
    paths = files(tmp_path, job_yaml=job_text())
    same = tmp_path / "x.html"
    refused(tmp_path, [*_solve_args(paths), "--export", "skypilot", "--out", same, "--report", same], "--report")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_folder_and_file(tmp_path):
    paths = files(tmp_path, job_yaml=job_text())
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        refused(tmp_path, [*_solve_args(paths), "--report", locked / "r.html"], "--report", "permission")
    finally:
        locked.chmod(0o700)
    existing = tmp_path / "r.html"
    existing.write_text("old")
    existing.chmod(0o400)
    refused(tmp_path, [*_solve_args(paths), "--report", existing], "--report", "read-only")


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize(
    ("flag", "name", "extra"),
    [("--report", "r.html", []), ("--out", "sky.yaml", ["--export", "skypilot"]), ("--plot", "f.svg", [])],
)
def test_disk_full_keeps_the_old_file(tmp_path, monkeypatch, flag, name, extra):
    paths = files(tmp_path, job_yaml=job_text())
    old = tmp_path / name
    old.write_text("the old file")
    monkeypatch.setattr(output.os, "fsync", _disk_full)
    result = invoke([*_solve_args(paths), flag, old, *extra])
    assert result.exit_code == 2, result.output
    assert str(old) in result.output and "No space left on device" in result.output and flag in result.output
    assert old.read_text() == "the old file"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["job.yaml", name])  # no temporary left


def test_disk_full_at_a_later_file_keeps_every_old_file(tmp_path, monkeypatch):
    """solve writes the launcher config, then the report: the disk filling at the report must leave the
    old config too: no file is renamed into place before every one is written, so the refusal says nothing was."""
    paths = files(tmp_path, job_yaml=job_text())
    config, report = tmp_path / "sky.yaml", tmp_path / "r.html"
    config.write_text("the old config")
    report.write_text("the old report")
    synced: list[int] = []
    real_fsync = os.fsync

    def second_fails(fd: int) -> None:
        synced.append(fd)
        if len(synced) == 2:
            _disk_full()
        real_fsync(fd)

    monkeypatch.setattr(output.os, "fsync", second_fails)
    result = invoke([*_solve_args(paths), "--export", "skypilot", "--out", config, "--report", report])
    assert result.exit_code == 2, result.output
    assert "--report" in result.output and "No space left on device" in result.output
    assert "wrote" not in result.output
    assert (config.read_text(), report.read_text()) == ("the old config", "the old report")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml", "r.html", "sky.yaml"]  # no temporary left


def test_an_output_through_a_symlink_replaces_the_file_it_points_at(tmp_path):
    """Renaming over a symbolic link would replace the link and leave the file it points at with its old text
    while the command said it wrote the config: the file it points at gets the new text, and the link stays."""
    paths = files(tmp_path, job_yaml=job_text())
    target, link = tmp_path / "target.yaml", tmp_path / "link.yaml"
    target.write_text("old")
    link.symlink_to(target.name)
    result = invoke([*_solve_args(paths), "--export", "skypilot", "--out", link])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == "target.yaml"
    assert yaml.safe_load(target.read_text())["resources"]


def test_a_job_file_the_portfolio_names_is_never_overwritten(tmp_path):
    """The job files a portfolio's entries name are protected as its own file and --catalog are: --plot onto
    one would replace a job file with a chart."""
    job = tmp_path / "job.svg"  # a job file, whatever its name
    job.write_text(job_text())
    before = job.read_text()
    pf = tmp_path / "pf.yaml"
    pf.write_text("catalog: default\nhorizon: 7d\nbudget: $5k\njobs:\n  - {name: a, file: job.svg}\n")
    result = invoke(["portfolio", pf, "--time-limit", "2", "--plot", job])
    assert result.exit_code == 2, result.output
    assert "--plot" in result.output and "read as input" in result.output
    assert job.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.svg", "pf.yaml"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(
    "args",
    [
        ["solve", "problems/llama-70b-within-5-days.yaml", "-f", "table"],
        ["solve", "problems/llama-70b-within-5-days.yaml", "-f", "json"],
        ["--version"],
        ["--help"],
        ["portfolio", "--help"],
    ],
    ids=["table", "json", "version", "help", "command-help"],
)
def test_stdout_on_a_full_disk_is_named_not_a_bug(args):
    """``gpuplan solve ... > /dev/full``: the answer cannot be written, which is the destination's fault,
    named as such (exit 2, as for a file on a full disk), not an internal error (exit 1); the same for
    what click writes before any command runs (``--help``, ``--version``)."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "optimizer", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: standard output") and "No space left on device" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Exception ignored" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "args",
    [["solve", "problems/llama-70b-within-5-days.yaml"], ["catalog"], ["--version"], ["--help"]],
    ids=["solve", "catalog", "version", "help"],
)
@pytest.mark.parametrize("stdout", ["read-only", "closed"])
def test_stdout_not_open_for_writing_is_named_not_a_bug(tmp_path, args, stdout):
    """``gpuplan solve ... 1<file`` or ``>&-``: no answer can be written; exit 2 naming standard output
    (it was exit 1, 'internal error', and a traceback for --help and --version)."""
    readable = tmp_path / "in.txt"
    readable.write_text("x")
    with open(readable) as handle:
        redirect = (lambda: os.dup2(handle.fileno(), 1)) if stdout == "read-only" else (lambda: os.close(1))
        proc = subprocess.run(
            [sys.executable, "-m", "optimizer", *args],
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
            preexec_fn=redirect,
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: standard output") and "Traceback" not in proc.stderr, proc.stderr


def test_a_pdf_chart_over_the_file_size_limit_is_a_failed_write(tmp_path):
    """matplotlib's PDF backend answers a failed write (a full disk, ``ulimit -f``) with an AttributeError
    from its clean-up; the write error behind it is what gpuplan reports (it was exit 1)."""
    pytest.importorskip("matplotlib")
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "optimizer",
            "solve",
            "problems/llama-70b-within-5-days.yaml",
            "--plot",
            tmp_path / "f.pdf",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        preexec_fn=limited,
    )
    assert proc.returncode == 2, proc.stderr
    assert "'--plot': cannot write" in proc.stderr and "File too large" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_long_valid_file_name_is_written(tmp_path):
    """A 250-byte name is valid; the temporary file written beside it must not be refused for being longer
    (it was 'File name too long')."""
    paths = files(tmp_path, job_yaml=job_text())
    out = tmp_path / ("a" * 245 + ".yaml")
    result = invoke([*_solve_args(paths), "--export", "skypilot", "--out", out])
    assert result.exit_code == 0, result.output
    assert out.read_text().strip() and sorted(p.name for p in tmp_path.iterdir()) == sorted(["job.yaml", out.name])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("case", ["refusal", "written"])
def test_stderr_on_a_full_disk_keeps_the_exit_code(tmp_path, case):
    """``2>/dev/full``: the notice is lost, not the outcome (a refusal still exits 2, a written config 0)."""
    args = ["solve", tmp_path / "gone.yaml"]
    if case == "written":
        args = ["solve", "problems/llama-70b-within-5-days.yaml", "--export", "skypilot", "--out", tmp_path / "k.yaml"]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "optimizer", *map(str, args)],
            stdout=subprocess.DEVNULL,
            stderr=full,
            cwd=ROOT,
            timeout=120,
        )
    assert proc.returncode == (2 if case == "refusal" else 0)
    assert (tmp_path / "k.yaml").exists() == (case == "written")


def test_a_failing_chart_writer_leaves_nothing(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    paths = files(tmp_path, job_yaml=job_text())
    monkeypatch.setattr(Figure, "savefig", _disk_full)
    result = invoke([*_solve_args(paths), "--plot", tmp_path / "f.png"])
    assert result.exit_code == 2 and "--plot" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]


def test_outputs_are_written_whole_with_no_temporary_left(tmp_path):
    paths = files(tmp_path, job_yaml=job_text())
    report, out = tmp_path / "r.html", tmp_path / "sky.yaml"
    report.write_text("old report")
    result = invoke([*_solve_args(paths), "--report", report])
    assert result.exit_code == 0, result.output
    assert report.read_text().rstrip().endswith("</html>")
    result = invoke([*_solve_args(paths), "--export", "skypilot", "--out", out])
    assert result.exit_code == 0 and out.read_text().strip()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml", "r.html", "sky.yaml"]


def test_write_text_replaces_atomically(tmp_path):
    dest = tmp_path / "a.txt"
    dest.write_text("old")
    dest.chmod(0o640)
    output.write_text(dest, "new", "out")
    assert dest.read_text() == "new" and (dest.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


# =========================================================================== 5. interrupts and time limits


def _raise_interrupt(*args, **kwargs):
    raise KeyboardInterrupt


INTERRUPTED = [
    ("check", "check", ["check", "{job}", "--sku", "B200", "--gpus", "8"]),
    ("solve", "plan", ["solve", "{job}"]),
    ("options", "options", ["options", "{job}"]),
    ("capacity", "capacity", ["capacity", "--sku", "B200"]),
    ("portfolio", "portfolio", ["portfolio", "{pf}"]),
    ("portfolio-json", "portfolio", ["portfolio", "{pf}", "-f", "json"]),
]


@pytest.mark.parametrize("case", INTERRUPTED, ids=[c[0] for c in INTERRUPTED])
def test_keyboard_interrupt_in_any_command_exits_130(tmp_path, monkeypatch, case):
    _, function, args = case
    paths = files(tmp_path, job_yaml=job_text(), pf_yaml=portfolio_text())
    monkeypatch.setattr(api, function, _raise_interrupt)
    argv = [{"{job}": paths["job_yaml"], "{pf}": paths["pf_yaml"]}.get(a, a) for a in args]
    result = runner.invoke(cli.app, [str(a) for a in argv])
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output
    assert "infeasible" not in result.output.lower() and "schedule" not in result.output.lower()
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("module", "target", "args"),
    [
        ("reference", "load_catalog", ["catalog", "default"]),
        ("reference", "presets", ["models"]),
        ("reference", "expand_models", ["model", "llama-3.1-8b"]),
        ("reference", "json_schema", ["schema", "job"]),
        ("shared", "load_job", ["solve", "job.yaml"]),
    ],
)
def test_keyboard_interrupt_while_reading_exits_130(monkeypatch, module, target, args):
    monkeypatch.setattr(importlib.import_module(f"optimizer.cli.{module}"), target, _raise_interrupt)
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 130 and "interrupted" in result.output


def test_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch):
    paths = files(tmp_path, job_yaml=job_text())
    report = tmp_path / "r.html"
    report.write_text("old")
    monkeypatch.setattr(cli_plan, "html_report", _raise_interrupt)
    result = runner.invoke(cli.app, [str(a) for a in [*_solve_args(paths), "--report", report]])
    assert result.exit_code == 130 and report.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml", "r.html"]


def test_a_timeout_without_a_solution_is_unknown_not_infeasible(tmp_path):
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    result = invoke(["solve", job, "--time-limit", "0.000001", "-f", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "unknown" and data["best"] is None and not data["infeasible"]
    assert any("time limit" in note for note in data["notes"])


def _big_portfolio(folder: Path, jobs: int = 80) -> Path:
    lines = ["catalog: default", "horizon: 40d", "budget: $80k", "time_step: 1h", "pools:"]
    lines += ["  - {offer: nodus-b200, gpus: 16}", "  - {offer: lambda-h100-sxm, gpus: 16}", "jobs:"]
    for i in range(jobs):
        layers = 16 + i % 30  # a distinct model per layer count (each its own candidate table to build)
        params = layers * 218.1e6 + 268.4e6  # what those shapes hold: the blocks and two embeddings
        lines += [
            f"  - name: j{i}",
            f"    job: {{model: {{params: {params:.4g}, layers: {layers}, hidden: 4096, heads: 32, kv_heads: 8, "
            f"ffn_hidden: 14336, vocab: 32768}}, tokens: {1 + i % 5}B, global_batch: 64}}",
            f"    deadline: {5 + i % 20}d",
            f"    required: {'false' if i % 3 == 0 else 'true'}",
        ]
    path = folder / "big.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _as_from_a_terminal() -> None:
    """A shell starts a foreground command with SIGINT at its default action and unblocked; pytest's own
    process may have changed either by now (ignored and blocked signals pass to children through exec), and
    Python then installs no KeyboardInterrupt handler at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _interrupt_after(
    args: list, delay: float, timeout: float = 60, sig: int = signal.SIGINT
) -> tuple[int, str, str, float] | None:
    """Run gpuplan, send ``sig`` (SIGINT) after ``delay`` s; (code, stdout, stderr, seconds from the signal
    to exit), or None if it finished before the signal."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "optimizer", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        proc.wait(timeout=delay)
        _, err = proc.communicate()
        # a refused input is no reason to skip: the tests that skip here would test nothing
        assert proc.returncode != 2, f"the command was refused before the signal: {err[-600:]}"
        return None
    except subprocess.TimeoutExpired:
        pass
    sent = time.perf_counter()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err, time.perf_counter() - sent


def test_the_portfolio_the_interrupt_tests_send_is_a_valid_one(tmp_path):
    # they skip when the command ends before the signal: an input refused at once must not be why
    assert len(load_portfolio(_big_portfolio(tmp_path)).jobs) == 80


@pytest.mark.parametrize(
    ("fmt", "delay"), [("json", 6.0), ("table", 3.0)], ids=["json-while-solving", "table-while-loading"]
)
def test_sigint_during_a_portfolio_exits_130_with_nothing_misleading(tmp_path, fmt, delay):
    pf = _big_portfolio(tmp_path)
    plot = tmp_path / "gantt.png"
    outcome = _interrupt_after(["portfolio", pf, "--time-limit", "60", "-f", fmt, "--plot", plot], delay)
    if outcome is None:
        pytest.skip("the portfolio finished before the signal")
    code, out, err, took = outcome
    assert code == 130, (code, out[-500:], err[-500:], took)
    assert "interrupted" in err and "Traceback" not in err
    assert "infeasible" not in out.lower() and "schedule" not in out.lower() and "status" not in out
    assert took < 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.yaml"]  # no chart, no temporary


def test_sigterm_during_a_portfolio_exits_143_and_leaves_no_file(tmp_path):
    """A scheduler's or ``kill``'s SIGTERM stops gpuplan as ^C does, with 'terminated' and exit 143: no
    answer, no chart, and no temporary file beside it (SIGTERM had killed the process outright, leaving a
    hidden .tmp file when it landed during a write)."""
    pf = _big_portfolio(tmp_path)
    plot = tmp_path / "gantt.png"
    outcome = _interrupt_after(["portfolio", pf, "--time-limit", "60", "--plot", plot], 6.0, sig=signal.SIGTERM)
    if outcome is None:
        pytest.skip("the portfolio finished before the signal")
    code, out, err, took = outcome
    assert code == 143, (code, out[-500:], err[-500:], took)
    assert err.strip().endswith("terminated") and "Traceback" not in err
    assert "infeasible" not in out.lower() and "status" not in out and took < 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.yaml"]


def _handler_installed_after_s() -> float:
    """Seconds this machine takes from a process's start to gpuplan's signal handlers (``optimizer.launch``
    imports ``stops`` before anything else): a signal before them lands in Python's own start-up, which no
    program handles. Measured, as the machine's load sets it (a loaded two-core runner took over 0.1 s)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import optimizer.launch"], cwd=ROOT, check=True)
    return time.perf_counter() - started


@pytest.mark.parametrize("delay", [0.1, 0.3, 0.6])
def test_sigint_while_the_modules_load_exits_130(delay):
    """A ^C in the first second, while ortools, numpy and pydantic load, is an interruption like any
    other (it was a traceback from inside an import, with exit 1 or 130). The delay counts from the moment
    the handlers are in place (``_handler_installed_after_s``)."""
    outcome = _interrupt_after(["solve", "problems/llama-70b-within-5-days.yaml"], _handler_installed_after_s() + delay)
    if outcome is None:
        pytest.skip("the solve finished before the signal")
    code, _, err, _ = outcome
    assert code == 130 and err.strip().endswith("interrupted") and "Traceback" not in err, (code, err[-800:])


def test_the_package_loads_its_names_on_first_use():
    """``import optimizer`` loads no solver module; each public name resolves to the object it names."""
    code = (
        "import sys, optimizer; heavy = [m for m in ('ortools', 'numpy', 'pydantic') if m in sys.modules]; "
        "names = [n for n in optimizer.__all__ if getattr(optimizer, n) is None]; print(heavy, names)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip() == "[] []", proc.stdout + proc.stderr
    import optimizer
    from optimizer.api import plan

    assert optimizer.plan is plan and set(optimizer.__all__) == set(optimizer._WHERE)


def test_sigint_during_a_single_solve_exits_130(tmp_path):
    # measurements of one configuration must agree within calibration.MEASURED_SPREAD_MAX
    many = [
        arg for i in range(units.MAX_MEASUREMENTS) for arg in ("--measured", f"{8 * (1 + i % 2)}xB200:{10 + i / 4:g}k")
    ]
    big = tmp_path / "cat.yaml"  # 4 x 1,024 node counts: the most a catalog may offer, a long table to build
    big.write_text(
        catalog_text(
            max_nodes="1024",
            extra="".join(f"  - {{name: o{i}, sku: H200, price: 3, max_nodes: 1024}}\n" for i in range(3)),
        )
    )
    job = files(tmp_path, job_yaml=job_text(catalog="cat.yaml"))["job_yaml"]
    outcome = _interrupt_after(["solve", job, *many, "-f", "json"], 2.5)
    if outcome is None or _whole_json(outcome[1]):
        # the solve finished first (on a loaded machine the signal can land after the whole answer was written,
        # while the process exits): nothing was cut short
        pytest.skip("the solve finished before the signal")
    code, out, err, took = outcome
    assert code == 130 and "interrupted" in err and "Traceback" not in err, (code, err[-500:])
    assert "status" not in out and took < 10


def _whole_json(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


@pytest.mark.parametrize(
    "args",
    [
        ["solve", "problems/llama-70b-within-5-days.yaml", "--plot", "{tmp}/frontier.svg"],
        ["solve", "problems/llama-70b-within-5-days.yaml", "-f", "json"],
        ["check", "problems/seed-100b-one-node.yaml", "--sku", "B300", "--gpus", "8", "--export", "deepspeed"],
    ],
    ids=["solve-table-and-plot", "solve-json", "check-export"],
)
def test_a_reader_that_closes_the_pipe_ends_it_like_yes_head(tmp_path, args):
    """``gpuplan solve ... | head -1``: the reader is gone, so the process ends by SIGPIPE, silently, as
    ``yes | head`` does; not exit 1 (a bug by our codes), and a file it was asked for is written whole."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "optimizer", *(a.format(tmp=tmp_path) for a in args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before gpuplan writes a byte
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == -signal.SIGPIPE, err[-500:]
    assert err == b""
    if "--plot" in args:
        assert (tmp_path / "frontier.svg").read_text().startswith("<?xml")
        assert [p.name for p in tmp_path.iterdir()] == ["frontier.svg"]  # no temporary left


# =========================================================================== 6. structural input

STRUCTURE = [
    ("deep-yaml", {"job.yaml": "job: " + "[" * 200 + "]" * 200 + "\n"}, ["solve", "{job.yaml}"], ["job.yaml", "nest"]),
    (
        "deep-json-config",
        {"cfg.json": '{"a": ' + "[" * 200 + "]" * 200 + "}"},
        ["model", "{cfg.json}"],
        ["cfg.json", "nests"],
    ),
    (
        "hf-config-directory",
        {"job.yaml": job_text(model="{hf_config: adir}")},
        ["solve", "{job.yaml}"],
        ["job.model.hf_config", "directory"],
    ),
    (
        "hf-config-number",
        {"job.yaml": job_text(model="{hf_config: 5}")},
        ["solve", "{job.yaml}"],
        ["job.yaml", "job.model.hf_config", "got 5"],
    ),
    (
        "hf-config-list",
        {"job.yaml": job_text(model="{hf_config: [a, b]}")},
        ["solve", "{job.yaml}"],
        ["job.model.hf_config"],
    ),
    ("hf-config-json-list", {"cfg.json": "[1, 2, 3]"}, ["model", "{cfg.json}"], ["cfg.json", "JSON object", "list"]),
    *(
        (
            f"hf-config-{key}-{kind}",
            {"cfg.json": config_json(**{key: value}), "job.yaml": job_text(model="{hf_config: cfg.json}")},
            ["solve", "{job.yaml}"],
            ["cfg.json", "job.model.hf_config", key, "not a name"],
        )
        for key in ("model_type", "hidden_act")
        for kind, value in (("int", 5), ("list", ["llama"]), ("object", {"a": 1}))
    ),
    ("hf-config-json-number", {"cfg.json": "42"}, ["model", "{cfg.json}"], ["cfg.json", "JSON object"]),
    (
        "hf-config-zero-heads",
        {"cfg.json": config_json(num_attention_heads=0)},
        ["model", "{cfg.json}"],
        ["num_attention_heads", "at least 1"],
    ),
    (
        "hf-config-heads-as-text",
        {"cfg.json": config_json(num_attention_heads="sixteen")},
        ["model", "{cfg.json}"],
        ["num_attention_heads", "whole number"],
    ),
    (
        "hf-config-negative-hidden",
        {"cfg.json": config_json(hidden_size=-4096)},
        ["model", "{cfg.json}"],
        ["hidden_size", "at least 1"],
    ),
    (
        "hf-config-boolean-layers",
        {"cfg.json": config_json(num_hidden_layers=True)},
        ["model", "{cfg.json}"],
        ["num_hidden_layers", "whole number"],
    ),
    ("hf-config-missing-keys", {"cfg.json": "{}"}, ["model", "{cfg.json}"], ["cfg.json", "hidden_size"]),
    ("hf-config-nan", {"cfg.json": '{"hidden_size": NaN}'}, ["model", "{cfg.json}"], ["cfg.json", "NaN"]),
    ("hf-config-missing-file", {}, ["model", "{tmp}/none.json"], ["none.json", "not found"]),
    (
        "horizon-shorter-than-time-step",
        {"pf.yaml": portfolio_text(horizon="30m")},
        ["portfolio", "{pf.yaml}"],
        ["time_step", "longer than the horizon"],
    ),
    (
        "global-batch-negative",
        {"job.yaml": job_text(job_extra="  global_batch: -4\n")},
        ["solve", "{job.yaml}"],
        ["job.global_batch", "at least 1"],
    ),
    (
        "global-batch-true",
        {"job.yaml": job_text(job_extra="  global_batch: true\n")},
        ["solve", "{job.yaml}"],
        ["job.global_batch", "not true"],
    ),
    (
        "global-batch-text",
        {"job.yaml": job_text(job_extra="  global_batch: lots\n")},
        ["solve", "{job.yaml}"],
        ["job.global_batch", "lots"],
    ),
    (
        "global-batch-infinite-tokens",
        {"job.yaml": job_text(job_extra="  global_batch: 1e400 tokens\n")},
        ["solve", "{job.yaml}"],
        ["job.global_batch"],
    ),
    (
        "gpus-true",
        {"job.yaml": job_text(extra="constraints:\n  max_gpus: true\n")},
        ["solve", "{job.yaml}"],
        ["constraints.max_gpus", "not true"],
    ),
    (
        "include-number",
        {"cat.yaml": "include: 5\n"},
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "field 'include'", "list"],
    ),
    ("include-mapping", {"cat.yaml": "include: {a: 1}\n"}, ["catalog", "{cat.yaml}"], ["field 'include'", "list"]),
    ("include-list-of-numbers", {"cat.yaml": "include: [5]\n"}, ["catalog", "{cat.yaml}"], ["field 'include'", "list"]),
    (
        "include-missing-file",
        {"cat.yaml": "include: [nope.yaml]\n"},
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "include[0]", "not found"],
    ),
    (
        "offers-mapping",
        {"cat.yaml": "hardware: hardware\noffers: {a: 1}\n"},
        ["catalog", "{cat.yaml}"],
        ["field 'offers'", "list"],
    ),
    ("hardware-number", {"cat.yaml": "hardware: 5\noffers: []\n"}, ["catalog", "{cat.yaml}"], ["field 'hardware'"]),
    (
        "hardware-missing",
        {"cat.yaml": "hardware: nope.yaml\noffers: []\n"},
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "field 'hardware'", "not found"],
    ),
    ("catalog-a-list", {"cat.yaml": "- a\n- b\n"}, ["catalog", "{cat.yaml}"], ["cat.yaml", "mapping"]),
    ("job-file-a-list", {"job.yaml": "- job\n"}, ["solve", "{job.yaml}"], ["job.yaml", "'job:'"]),
    ("job-a-string", {"job.yaml": "job: hello\n"}, ["solve", "{job.yaml}"], ["job.yaml", "job"]),
    ("jobs-a-mapping", {"pf.yaml": "horizon: 7d\njobs: {a: 1}\n"}, ["portfolio", "{pf.yaml}"], ["pf.yaml", "jobs"]),
    (
        "pools-a-string",
        {"pf.yaml": portfolio_text().replace("pools:\n", "pools: x\nunused:\n")},
        ["portfolio", "{pf.yaml}"],
        ["pf.yaml"],
    ),
    (
        "portfolio-job-file-is-itself",
        {"pf.yaml": portfolio_text(extra="  - {name: c, file: pf.yaml}\n")},
        ["portfolio", "{pf.yaml}"],
        ["pf.yaml", "'job:'"],
    ),
    (
        "portfolio-job-file-dev-zero",
        {"pf.yaml": portfolio_text(extra="  - {name: c, file: /dev/zero}\n")},
        ["portfolio", "{pf.yaml}"],
        ["/dev/zero", "not a regular file"],
    ),
    ("empty-job-file", {"job.yaml": ""}, ["solve", "{job.yaml}"], ["job.yaml", "'job:'"]),
    ("binary-job-file", {"job.yaml": "\x00\x01\x02"}, ["solve", "{job.yaml}"], ["job.yaml"]),
    ("null-byte-catalog-name", {"job.yaml": job_text(catalog='"a\\0b"')}, ["solve", "{job.yaml}"], ["job.yaml"]),
    (
        "model-preset-number",
        {"job.yaml": job_text(model="{preset: 5}")},
        ["solve", "{job.yaml}"],
        ["job.model.preset", "'5'"],
    ),
    (
        "measured-not-a-list",
        {"job.yaml": job_text(job_extra="  measured: 8xB200\n")},
        ["solve", "{job.yaml}"],
        ["job.measured"],
    ),
    ("yaml-tag", {"job.yaml": "job: !!python/object:os.system {}\n"}, ["solve", "{job.yaml}"], ["job.yaml", "tag"]),
    *(
        (f"job-name-{kind}", {"job.yaml": job_text(name=name)}, ["solve", "{job.yaml}"], ["job.yaml", "job.name", why])
        for kind, name, why in (
            ("line-break", '"a\\nb"', "control characters"),
            ("tab", '"a\\tb"', "control characters"),
            ("blank", '"  "', "blank"),
        )
    ),
    (
        "offer-name-line-break",
        {"cat.yaml": catalog_text(name='"a\\nb"')},
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "offers[0].name", "control characters"],
    ),
    *(
        (f"spec-{kind}", {"job.yaml": job_text(extra=f"spec: {spec}\n")}, ["solve", "{job.yaml}"], ["job.yaml", field])
        for kind, spec, field in (
            ("typo", "{resource: {gpu: {type: B200, count: 8}}}", "field 'spec'"),
            ("text", '"x"', "field 'spec'"),
            ("extra-key", "{resources: {gpu: {type: B200}}, extra: 1}", "field 'spec'"),
            ("resources-list", "{resources: []}", "field 'spec.resources'"),
            ("gpu-empty", "{resources: {gpu: {}}}", "field 'spec.resources.gpu'"),
        )
    ),
    (
        "epochs-with-tokens",
        {"job.yaml": job_text(job_extra="  epochs: 3\n")},
        ["solve", "{job.yaml}"],
        ["job.yaml", "job.epochs goes with job.dataset_tokens"],
    ),
    (
        "one-step-more-than-the-tokens",
        {"job.yaml": job_text(tokens="1M", job_extra="  global_batch: 1073741824\n")},
        ["solve", "{job.yaml}"],
        ["job.yaml", "one optimizer step", "more than the job's 1M tokens"],
    ),
    (
        "portfolio-job-gpu-filter",
        {
            "pf.yaml": portfolio_text()
            .replace("    after: $after_b", "    after: $after_b")
            .replace("    priority: 1\n", "    priority: 1\n    gpu: {types: [NOPE]}\n")
        },
        ["portfolio", "{pf.yaml}", "--time-limit", "2"],
        ["pf.yaml", "jobs[0].gpu.types", "NOPE"],
    ),
    (
        "pool-offer-twice",
        {"pf.yaml": portfolio_text().replace("jobs:", "  - {offer: nodus-b200, gpus: 0}\njobs:")},
        ["portfolio", "{pf.yaml}", "--time-limit", "2"],
        ["pf.yaml", "pools[1].offer", "pools[0]", "both hold offer 'nodus-b200'"],
    ),
    (
        "pool-offer-twice-by-sku",
        {"pf.yaml": portfolio_text().replace("jobs:", "  - {offer: B200, gpus: 0}\njobs:")},
        ["portfolio", "{pf.yaml}", "--time-limit", "2"],
        ["pf.yaml", "pools[1].offer", "both hold offer 'nodus-b200'"],
    ),
    (
        "pool-windows-overlap",
        {
            "pf.yaml": portfolio_text()
            .replace("jobs:", "")
            .replace("gpus: $window_gpus}", "gpus: 8}")
            .replace(
                "      - {from: 0d, to: 2d, gpus: 8}\n",
                "      - {from: 0d, to: 2d, gpus: 8}\n      - {from: 1d, to: 3d, gpus: 0}\njobs:\n",
            )
        },
        ["portfolio", "{pf.yaml}", "--time-limit", "2"],
        ["pf.yaml", "pools[0]", "windows overlap"],
    ),
    *(
        (
            f"catalog-name-{kind}",
            {"cat.yaml": catalog_text().replace("name: hostile-catalog", f"name: {name}")},
            ["catalog", "{cat.yaml}"],
            ["cat.yaml", "field 'name'", why],
        )
        for kind, name, why in (
            ("line-break", '"a\\nb"', "control characters"),
            ("blank", '"  "', "blank"),
            ("list", "[a]", "text"),
        )
    ),
    (
        "scaling-efficiency-true-key",
        {"job.yaml": job_text(extra="assumptions:\n  scaling_efficiency: {true: 0.5}\n")},
        ["solve", "{job.yaml}"],
        ["job.yaml", "assumptions.scaling_efficiency", "node counts"],
    ),
    (
        "moe-without-experts-per-token",
        {
            "job.yaml": job_text(
                model="{params: 7B, layers: 16, hidden: 2048, heads: 16, ffn_hidden: 8192, vocab: 32000, experts: 8}"
            )
        },
        ["solve", "{job.yaml}"],
        ["job.yaml", "job.model", "experts_per_token"],
    ),
    (
        "params-contradict-shapes",
        {
            "job.yaml": job_text(
                model="{params: 1B, layers: 32, hidden: 4096, heads: 32, kv_heads: 8, ffn_hidden: 14336, vocab: 128256}"
            )
        },
        ["solve", "{job.yaml}"],
        ["job.yaml", "job.model", "params is 1B", "8.03B"],
    ),
    (
        "preset-params-tenfold",
        {"job.yaml": job_text(model="{preset: llama-3.1-8b, params: 80B}")},
        ["solve", "{job.yaml}"],
        ["job.yaml", "job.model", "params is 80B"],
    ),
    (
        "moe-config-top-k-zero",
        {"cfg.json": config_json(num_local_experts=8, num_experts_per_tok=0)},
        ["model", "{cfg.json}"],
        ["cfg.json", "experts_per_token"],
    ),
    (
        "yaml-lone-surrogate",
        {"job.yaml": job_text(name='"bad\\ud800name"')},
        ["solve", "{job.yaml}"],
        ["job.yaml", "job.name", "half a character"],
    ),
    (
        "yaml-lone-surrogate-key",
        {"job.yaml": job_text(extra='"k\\udfff": 1\n')},
        ["solve", "{job.yaml}"],
        ["job.yaml", "half a character"],
    ),
    (
        # PyYAML reads text shaped like a date as one; an impossible one raised ValueError (exit 1)
        "impossible-date-as-name",
        {"job.yaml": job_text(name="2027-02-30")},
        ["solve", "{job.yaml}"],
        ["job.yaml", "line", "'2027-02-30' is written like a date but is not one", "quotes"],
    ),
    (
        "impossible-portfolio-start",
        {"pf.yaml": portfolio_text(extra="start: 2026-13-01\n")},
        ["portfolio", "{pf.yaml}"],
        ["pf.yaml", "'2026-13-01'", "month must be in 1..12"],
    ),
    (
        "impossible-catalog-time",
        {"cat.yaml": catalog_text(name='"x"') + "checked: 2027-01-01 25:61:00\n"},
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "hour must be in 0..23"],
    ),
    (
        # the schedule's dates ran past the calendar: OverflowError in the extraction (exit 1)
        "portfolio-start-at-the-end-of-the-calendar",
        {"pf.yaml": portfolio_text(extra="start: 9999-12-30\n")},
        ["portfolio", "{pf.yaml}"],
        ["pf.yaml", "field 'start'", "9999-12-31"],
    ),
    (
        # "--sku H200" selected this B200 offer
        "offer-alias-names-another-gpu",
        {"cat.yaml": catalog_text(offer_extra="    aliases: [H200]\n")},
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "offers[0].aliases[0]", "'H200' is the GPU H200, while this offer is a B200"],
    ),
    (
        # one name selected two offers
        "offer-alias-names-another-offer",
        {"cat.yaml": catalog_text(offer_extra="    aliases: [o2]\n", extra="  - {name: o2, sku: H200, price: 3}\n")},
        ["catalog", "{cat.yaml}"],
        ["cat.yaml", "offers[0].aliases[0]", "the name of offer 'o2'"],
    ),
    (
        # a raw TypeError from int(None) was the message
        "multimodal-config-nests-text-config",
        {
            "cfg.json": json.dumps(
                {"model_type": "llava", "text_config": json.loads(config_json()), "vocab_size": 32000}
            )
        },
        ["model", "{cfg.json}"],
        ["cfg.json", "text_config", "multimodal"],
    ),
    (
        "json-lone-surrogate",
        {"cfg.json": config_json(model_type="llama\ud800")},
        ["model", "{cfg.json}"],
        ["cfg.json", "model_type", "half a character"],
    ),
]


@pytest.mark.parametrize("case", STRUCTURE, ids=[c[0] for c in STRUCTURE])
def test_structural_input(tmp_path, case):
    _, contents, args, expect = case
    (tmp_path / "adir").mkdir()
    for name, content in contents.items():
        (tmp_path / name).write_text(content)
    argv = [
        str(tmp_path) + a[5:] if a.startswith("{tmp}") else str(tmp_path / a[1:-1]) if a.startswith("{") else a
        for a in args
    ]
    refused(tmp_path, argv, *expect)


NUL_PATHS = [
    # (id, files, command, expected fragments): a path a file gives, holding a NUL byte
    (
        "hf-config",
        {"job.yaml": job_text(model='{hf_config: "cfg\\0.json"}')},
        ["solve", "{job.yaml}"],
        ["job.model.hf_config", "cfg\\x00.json", "NUL byte"],
    ),
    (
        "portfolio-job-file",
        {"pf.yaml": 'horizon: 30d\njobs:\n  - name: a\n    file: "a\\0.yaml"\n'},
        ["portfolio", "{pf.yaml}"],
        ["pf.yaml", "jobs[0]", "NUL byte"],
    ),
]


@pytest.mark.parametrize("case", NUL_PATHS, ids=[c[0] for c in NUL_PATHS])
def test_a_nul_byte_in_a_path_is_bad_input(tmp_path, case):
    _, contents, args, expect = case
    for name, content in contents.items():
        (tmp_path / name).write_text(content)
    refused(tmp_path, [str(tmp_path / a[1:-1]) if a.startswith("{") else a for a in args], *expect)


def test_a_missing_portfolio_job_file_names_its_entry(tmp_path):
    (tmp_path / "pf.yaml").write_text("horizon: 30d\njobs:\n  - {name: a, file: gone.yaml}\n")
    refused(tmp_path, ["portfolio", tmp_path / "pf.yaml"], "pf.yaml", "jobs[0].file", "gone.yaml", "not found")


LONG = "a" * 300  # longer than any file name may be (ENAMETOOLONG)


@pytest.mark.parametrize(
    ("where", "name"),
    [("flag", LONG), ("flag", LONG + ".yaml"), ("job", LONG + ".yaml"), ("include", LONG)],
)
def test_a_catalog_name_too_long_for_a_file_is_bad_input(tmp_path, where, name):
    (tmp_path / "job.yaml").write_text(job_text(catalog=name if where == "job" else "nodus-2026-11"))
    (tmp_path / "cat.yaml").write_text(f"name: c\ninclude: [{name}]\noffers: []\n")
    args = ["solve", tmp_path / "job.yaml"]
    if where == "flag":
        args += ["--catalog", name]
    elif where == "include":
        args += ["--catalog", tmp_path / "cat.yaml"]
    refused(tmp_path, args, "catalog", LONG[:40])


def test_control_characters_in_a_named_path_are_escaped(tmp_path):
    """A file name with an escape sequence or a line break is shown escaped: the message stays one
    paragraph and sends nothing to the terminal."""
    text = refused(tmp_path, ["solve", str(tmp_path / "a\x1b[31mb\nc.yaml")], "a\\x1b[31mb\\x0ac.yaml", "not found")
    assert "\x1b" not in text and text.count("\n") == 1


def test_a_character_outside_the_basic_plane_reads_as_written(tmp_path):
    """A surrogate pair in JSON and a ``\\U`` escape in YAML are one character, not refused."""
    (tmp_path / "cfg.json").write_text(config_json(model_type="llama\U0001f600"))
    assert "\\ud83d\\ude00" in (tmp_path / "cfg.json").read_text()
    assert invoke(["model", tmp_path / "cfg.json"]).exit_code == 0
    (tmp_path / "job.yaml").write_text(job_text(name='"ok\\U0001f600"'))
    assert invoke(["check", tmp_path / "job.yaml", "--sku", "B200", "--gpus", "8"]).exit_code == 0


def test_json_output_is_json_even_with_a_non_finite_number(capsys):
    """JSON has no NaN or Infinity (Python writes them, and strict parsers refuse the whole answer): a
    figure that is not finite goes out as null, as pydantic writes it."""
    emit({"tokens_per_s": math.inf, "rows": [{"cost": math.nan, "gpus": 8}]}, Format.json, print)

    def refuse(name):
        raise ValueError(name)

    assert json.loads(capsys.readouterr().out, parse_constant=refuse) == {
        "tokens_per_s": None,
        "rows": [{"cost": None, "gpus": 8}],
    }


def test_a_job_whose_unfit_rows_run_for_centuries_is_answered_not_refused(tmp_path):
    """DeepSeek-V3, 50B tokens, at most 2 nodes: rows that never fit (an L40S for 209 years, $7M) made the
    cost x time tie-break pass 2^62, and the answer was "check job.tokens" (exit 2). It is infeasible, on
    supply and memory, and says so."""
    (tmp_path / "job.yaml").write_text(
        "job: {name: dsv3, model: deepseek-v3, method: full, tokens: 50B, seq_len: 1024, global_batch: 64}\n"
    )
    # at most 64 GPUs too: one CoreWeave GB200 rack (72 GPUs on one NVLink node) holds it
    result = invoke(["solve", tmp_path / "job.yaml", "--max-nodes", "2", "--max-gpus", "64", "--time-limit", "5"])
    assert result.exit_code == 0 and "Infeasible (supply)" in result.output, result.output


def test_null_names_in_a_config_read_as_absent(tmp_path):
    """``"model_type": null`` is how some exporters write a field they do not know: the same as leaving it out."""
    (tmp_path / "cfg.json").write_text(config_json(model_type=None, hidden_act=None))
    (tmp_path / "plain.json").write_text(config_json())
    sizes = [invoke(["model", str(tmp_path / name)]) for name in ("cfg.json", "plain.json")]
    assert [r.exit_code for r in sizes] == [0, 0]
    assert sizes[0].output.replace("cfg", "x") == sizes[1].output.replace("plain", "x")  # named for their files


MARKUP_NAMES = ["[/bold]", "[red]x[/red]", "[link=http://x]y", ":warning:", "[/]", "\\[x]"]


@pytest.mark.parametrize("name", MARKUP_NAMES)
def test_rich_markup_in_names_prints_as_written(tmp_path, name):
    quoted = json.dumps(name)
    paths = files(
        tmp_path,
        job_yaml=job_text(name=quoted),
        cat_yaml=catalog_text(name=quoted),
        pf_yaml=portfolio_text(name_a=quoted, after_b=f"[{quoted}]"),
    )
    for args in (
        ["solve", paths["job_yaml"], "--catalog", paths["cat_yaml"], "--time-limit", "2"],
        ["options", paths["job_yaml"], "--catalog", paths["cat_yaml"]],
        ["check", paths["job_yaml"], "--catalog", paths["cat_yaml"], "--sku", "B200", "--gpus", "8", "--no-compare"],
        ["catalog", paths["cat_yaml"]],
        ["portfolio", paths["pf_yaml"], "--time-limit", "2"],
    ):
        result = invoke(args)
        assert result.exit_code == 0, (args, result.output)
        if args[0] in ("solve", "options", "catalog", "portfolio"):
            assert name in result.output, (args, result.output)


@pytest.mark.parametrize("name", ["a$\\frac{1}$b", "$x$", "o$\\sqrt{$"])
def test_dollar_signs_in_names_plot_as_written(tmp_path, name):
    """Plots take names as text: mathtext raised on an unbalanced TeX command between two "$" (exit 1)."""
    quoted = json.dumps(name)
    paths = files(
        tmp_path,
        job_yaml=job_text(),
        cat_yaml=catalog_text(name=quoted),
        pf_yaml=portfolio_text(name_a=quoted, after_b=f"[{quoted}]"),
    )
    for args in (
        ["portfolio", paths["pf_yaml"], "--time-limit", "2", "--plot", tmp_path / "pf.png"],
        ["check", paths["job_yaml"], "--catalog", paths["cat_yaml"], "--sku", name, "--gpus", "8"]
        + ["--no-compare", "--plot", tmp_path / "check.png"],
    ):
        result = invoke(args)
        assert result.exit_code == 0, (args, result.output)
    assert (tmp_path / "pf.png").stat().st_size > 0 and (tmp_path / "check.png").stat().st_size > 0


@pytest.mark.parametrize(
    "args",
    [
        ["solve", "{job}", "--time-limit", "2"],
        ["check", "{job}", "--sku", "B200", "--gpus", "8", "--no-compare"],
        ["portfolio", "{pf}", "--time-limit", "2"],
        ["catalog", "default"],
        ["models"],
        ["solve", "{missing}"],
    ],
    ids=["solve", "check", "portfolio", "catalog", "models", "error"],
)
def test_ascii_output_encoding_does_not_crash(tmp_path, args):
    written = files(
        tmp_path, job_yaml=job_text(name="café-ünïcode"), pf_yaml=portfolio_text(name_a="naïve", after_b="[naïve]")
    )
    paths = {"job": written["job_yaml"], "pf": written["pf_yaml"], "missing": tmp_path / "nö.yaml"}
    argv = [paths[a[1:-1]] if a.startswith("{") else a for a in args]
    result = gpuplan(*argv, env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C"})
    assert "Traceback" not in result.stderr and "UnicodeEncodeError" not in result.stderr, result.stderr
    assert result.returncode == (2 if "{missing}" in args else 0), result.stderr[-800:]
    assert result.stdout.strip() or result.stderr.startswith("error: ")


# =========================================================================== 7. message quality

MESSAGES = [
    (
        "include-a-string",
        {"cat.yaml": "include: nodus-2026-11\n"},
        ["catalog", "{cat.yaml}"],
        ["field 'include'", "list", "'nodus-2026-11'"],
        ["unknown catalog 'n'"],
    ),
    (
        "sku-flag",
        {},
        ["check", "{job.yaml}", "--sku", "B201", "--gpus", "8"],
        ["option '--sku'", "B201", "Did you mean"],
        [],
    ),
    ("types-flag", {}, ["catalog", "default", "--types", "B200,B201"], ["option '--types'", "B201"], []),
    (
        "gpu-types-flag",
        {},
        ["solve", "{job.yaml}", "--gpu-types", "B999"],
        ["option '--gpu-types'", "B999"],
        ["constraints.gpu.types"],
    ),
    ("gpu-types-flag-options", {}, ["options", "{job.yaml}", "--gpu-types", "B999"], ["option '--gpu-types'"], []),
    (
        "measured-flag",
        {},
        ["solve", "{job.yaml}", "--measured", "8xB999:10k"],
        ["option '--measured'", "B999"],
        ["job.measured"],
    ),
    (
        "measured-flag-check",
        {},
        ["check", "{job.yaml}", "--sku", "B200", "--gpus", "8", "--measured", "8xB999:10k"],
        ["option '--measured'"],
        [],
    ),
    (
        "measured-in-file",
        {"job.yaml": job_text(job_extra="  measured:\n    - {sku: B999, gpus: 8, tokens_per_s: 10k}\n")},
        ["solve", "{job.yaml}"],
        ["job.yaml", "job.measured[0]", "B999"],
        ["--measured"],
    ),
    (
        # the flag's measurement joins the job's, and its refusal names the flag, not the job file
        "measured-flag-past-peak",
        {},
        ["check", "{job.yaml}", "--sku", "B200", "--gpus", "8", "--measured", "8xB200:1e12"],
        ["option '--measured'", "8xB200:1e12", "MFU"],
        ["job.measured", "job.yaml"],
    ),
    (
        "measured-flag-nodes",
        {},
        ["check", "{job.yaml}", "--sku", "B200", "--gpus", "8", "--measured", "16xB200@3:45k"],
        ["option '--measured'", "16xB200@3:45k", "3 nodes"],
        ["job.measured"],
    ),
    (
        # two measurements of one configuration that disagree are refused, not averaged (100k and 10k: 31.6k)
        "measured-twice-contradicting",
        {
            "job.yaml": job_text(
                job_extra="  measured:\n    - {sku: B200, gpus: 8, tokens_per_s: 100k}\n"
                "    - {sku: B200, gpus: 8, tokens_per_s: 10k}\n"
            )
        },
        ["check", "{job.yaml}", "--sku", "B200", "--gpus", "8"],
        ["job.yaml", "job.measured[1]", "10 times", "same configuration"],
        [],
    ),
    (
        # one of many inline jobs: the message named 'job.activation_reserve', not which job
        "portfolio-inline-job-field",
        {
            "pf.yaml": portfolio_text().replace(
                "{model: {params: 1B}, tokens: 100M, activation_reserve: 0}\n    after",
                "{model: {params: 1B}, tokens: 100M}\n    after",
            )
        },
        ["portfolio", "{pf.yaml}", "--time-limit", "5"],
        ["pf.yaml", "jobs[1].job.activation_reserve"],
        [],
    ),
    # given but naming no GPU: it meant "no filter"
    (
        "gpu-types-empty",
        {},
        ["solve", "{job.yaml}", "--gpu-types", ",,,"],
        ["option '--gpu-types'", "names no GPU"],
        [],
    ),
    # the catalog's filter listed everything for an empty --types, where solve's refuses it
    ("catalog-types-empty", {}, ["catalog", "--types", ""], ["option '--types'", "names no GPU"], []),
    (
        # a dense model has no experts to split: refused as --ep is, never silently ignored
        "expert-tp-on-a-dense-model",
        {"job.yaml": job_text(model="{preset: llama-3.1-8b}")},
        ["check", "{job.yaml}", "--sku", "B200", "--gpus", "8", "--expert-tp", "2"],
        ["option '--expert-tp'", "dense"],
        [],
    ),
    (
        # the config took stdout, so a script reading the JSON answer got YAML
        "export-to-stdout-with-json",
        {},
        ["solve", "{job.yaml}", "--export", "skypilot", "-f", "json"],
        ["option '--export'", "--out"],
        [],
    ),
    ("capacity-sku-flag", {}, ["capacity", "--sku", "B999"], ["option '--sku'"], []),
    ("catalog-flag", {}, ["solve", "{job.yaml}", "--catalog", "nodus-2025"], ["option '--catalog'", "nodus-2025"], []),
    ("preset-argument", {}, ["model", "llama-9"], ["argument 'NAME'", "llama-9"], []),
    (
        "non-utf8-config",
        {"cfg.json": b'{"hidden_size": "\xff"}'},
        ["model", "{cfg.json}"],
        ["cfg.json", "UTF-8", "job.model.hf_config"],
        [],
    ),
    ("non-utf8-job", {"job.yaml": b"job:\n  name: \xff\n"}, ["solve", "{job.yaml}"], ["job.yaml", "UTF-8"], []),
    (
        "preset-in-file",
        {"job.yaml": job_text(model="{preset: llama-9}")},
        ["solve", "{job.yaml}"],
        ["job.yaml", "job.model.preset", "llama-9"],
        [],
    ),
    ("export-kind", {}, ["solve", "{job.yaml}", "--export", "nomad"], ["option '--export'", "nomad"], []),
    ("schema-kind", {}, ["schema", "jobs"], ["KIND"], []),
]


@pytest.mark.parametrize("case", MESSAGES, ids=[c[0] for c in MESSAGES])
def test_messages_name_the_flag_field_or_file(tmp_path, case):
    _, contents, args, expect, never = case
    (tmp_path / "job.yaml").write_text(job_text())
    for name, content in contents.items():
        path = tmp_path / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    argv = [str(tmp_path / a[1:-1]) if a.startswith("{") else a for a in args]
    text = refused(tmp_path, argv, *expect)
    for fragment in never:
        assert fragment not in text, (fragment, text)
    assert text.startswith("error: ") and text.count("\n") == 1, text  # one paragraph


@pytest.mark.parametrize("assumption", ["mfu", "link_efficiency"])
def test_an_efficiency_too_small_to_be_real_is_refused(tmp_path, assumption):
    # 5e-324 (the smallest double) is above 0 but divides by zero downstream; 1e-30 overflowed the solver
    job = tmp_path / "job.yaml"
    for value in ("5.0e-324", "1.0e-30"):
        job.write_text(job_text(extra=f"assumptions:\n  {assumption}: {value}\n"))
        refused(tmp_path, ["solve", str(job)], "job.yaml", f"assumptions.{assumption}", "at least 0.0001")


def test_a_gpu_so_slow_that_plans_run_for_aeons_is_bad_input(tmp_path):
    """In range, but at 0.001 TFLOPS the best plan runs 1,334 years, past the 10 years any rental is planned
    for: the answer names the file and what to check (exit 2), not an internal error or that plan."""
    paths = files(tmp_path, cat_yaml=skus_text(tflops="0.001"), job_yaml=job_text(catalog="cat.yaml"))
    refused(tmp_path, ["solve", str(paths["job_yaml"])], "job.yaml", "years", "TFLOPS")


def test_the_cheapest_plan_is_the_cheapest_within_the_years_a_rental_is_planned_for(problems):
    """Llama 70B on 4e13 tokens: the cheapest plan of all runs 17 years, and --objective time answers with an
    8-year plan. A plan past the 10 years is no plan to rent, so the cost question answers the cheapest within
    them, on the frontier too."""
    from optimizer import load_job, plan

    problem = load_job(problems / "llama-70b-within-5-days.yaml")
    problem = problem.model_copy(update={"job": problem.job.model_copy(update={"tokens": 4e13})})
    problem = problem.model_copy(update={"constraints": problem.constraints.model_copy(update={"deadline_s": None})})
    best = plan(problem, runners_up=False).best
    assert best is not None and best.hours.p50 <= 10 * 365 * 24
    assert all(p.hours.p50 <= 10 * 365 * 24 for p in plan(problem, runners_up=False).frontier)


def test_the_slowest_memory_allowed_gives_a_memory_bound_plan(tmp_path):
    """At the lowest HBM bandwidth the range allows (1 MB/s) the plan takes 6 years, within the 10 a rental
    may be planned for: an answer, with no overflow of cost x time in the tie-break. (The free
    batch: at a fine-tune's recipe batch the weights are read 40 times as often, and the plan takes 48 years.)"""
    free = job_text(catalog="cat.yaml", job_extra="  global_batch: free\n")
    paths = files(tmp_path, cat_yaml=skus_text(hbm="0.001"), job_yaml=free)
    result = invoke(["solve", paths["job_yaml"]])
    assert result.exit_code == 0 and "memory-bound" in result.output and "days" in result.output


def test_a_plan_past_ten_years_left_out_is_said_in_solve_and_check():
    """Llama 3.1 8B LoRA on 2T tokens: 1 spot RTX PRO 6000 takes 10.05 years for $0.76 less than solve's
    answer (5.0 years); solve left it out silently and check called it '$0.76 less than that plan'."""
    from optimizer import CheckRequest, check, plan
    from optimizer.inputs.files import expand_models
    from optimizer.inputs.schema import Problem

    job = {"name": "aeon", "model": {"preset": "llama-3.1-8b"}, "method": "lora", "lora_rank": 8}
    job |= {"tokens": "2T", "seq_len": 2048, "global_batch": 64}
    problem = Problem.model_validate(expand_models({"catalog": "default", "job": job}))
    answer = plan(problem, runners_up=False)
    assert answer.best is not None and answer.best.hours.p50 <= 10 * 365 * 24
    assert any("past 10 years are left out" in n for n in answer.notes), answer.notes
    slow = check(problem, CheckRequest("runpod-rtx-pro-6000", 1, spot=True, compare=False))
    assert slow.plan.hours.p50 > 10 * 365 * 24 and any("past the 10 years" in n for n in slow.notes)


# =========================================================================== inputs no hardware or unit allows


def test_an_offer_cannot_put_more_gpus_on_a_node_than_its_sku_holds(tmp_path):
    # an HGX B200 node holds 8 (NVL72 is another SKU): 64 B200 on one node is no offer to plan on
    paths = files(tmp_path, cat_yaml=catalog_text(gpus_per_node="64"), job_yaml=job_text(catalog="cat.yaml"))
    refused(tmp_path, ["solve", paths["job_yaml"]], "gpus_per_node", "a B200 node holds 8")


def test_a_portfolio_job_with_a_file_and_an_inline_job_names_the_rule(tmp_path):
    # the inline job was validated first: 'job.model: required field is missing' pointed at the wrong fix
    paths = files(tmp_path, job_yaml=job_text())
    text = portfolio_text().replace(
        "  - name: b\n    job: {model: {params: 1B}, tokens: 100M, activation_reserve: 0}\n",
        f"  - name: b\n    file: {paths['job_yaml']}\n    job: {{tokens: 1B}}\n",
    )
    pf = files(tmp_path, pf_yaml=text)["pf_yaml"]
    refused(tmp_path, ["portfolio", pf, "--time-limit", "5"], "jobs[1]", "not both")


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["capacity", "--sku", "B200", "--reserve", "1.0"], "fraction of the GPU's memory, which must be below 1"),
        (["capacity", "--sku", "B200", "--reserve", "1"], "fraction of the GPU's memory, which must be below 1"),
        (["solve", "problems/llama-8b-lora.yaml", "--budget", "1e-300"], "at least 0.01"),
    ],
    ids=["reserve-1.0", "reserve-1", "budget-below-a-cent"],
)
def test_numbers_that_read_as_something_else_say_what(tmp_path, args, expect):
    # 1.0 is a fraction written whole, not one byte ('has no unit'); $1e-300 was accepted and shown as $0.00
    refused(tmp_path, args, expect)


def test_a_time_limit_takes_a_unit(tmp_path):
    # every other duration takes units, and so does --time-limit
    result = invoke(["-q", "solve", "problems/llama-8b-lora.yaml", "--time-limit", "1m"])
    assert result.exit_code == 0 and result.output.startswith(("Cheapest plan", "Best plan (")), result.output
    refused(
        tmp_path, ["solve", "problems/llama-8b-lora.yaml", "--time-limit", "5x"], "--time-limit", "unknown time unit"
    )


@pytest.mark.parametrize(
    ("field", "value", "expect"),
    [
        ("deadline", "2020-01-01", "2020-01-01 is a date"),
        ("gpu", "{types: []}", "an empty list names nothing"),
    ],
)
def test_constraints_that_read_as_something_else_say_what(tmp_path, field, value, expect):
    # a date was shown as datetime.date(2020, 1, 1); an empty type list meant 'any GPU' where
    # --gpu-types '' is refused
    paths = files(tmp_path, job_yaml=job_text(extra=f"constraints:\n  {field}: {value}\n"))
    text = refused(tmp_path, ["solve", paths["job_yaml"]], expect)
    assert "datetime" not in text


def test_portfolio_start_is_a_day_and_names_cannot_reverse_text(tmp_path):
    pf = files(tmp_path, pf_yaml="start: 2027-01-04T10:00:00\n" + portfolio_text())["pf_yaml"]
    text = refused(tmp_path, ["portfolio", pf, "--time-limit", "5"], "'start'", "release")
    assert "datetime" not in text and "Datetimes provided" not in text
    pf.write_text(portfolio_text(name_a='"\\u202eevil"'))
    refused(tmp_path, ["portfolio", pf, "--time-limit", "5"], "bidirectional")


def test_catalog_takes_quiet_after_the_command():
    result = invoke(["catalog", "-q"])
    assert result.exit_code == 0 and result.output.count("\n") == 1 and result.output.startswith("Catalog default:")


def test_a_model_folder_whose_config_is_a_fifo_names_the_fifo(tmp_path):
    # named for what it is, not as a folder without a config.json in it
    folder = tmp_path / "m"
    folder.mkdir()
    os.mkfifo(folder / "config.json")
    refused(tmp_path, ["model", folder], "named pipe")


# =========================================================================== GB200, spot


def test_spot_only_without_a_spot_price_is_not_blamed_on_the_gpu_filters(problems):
    # --spot with GB200, whose offers have no spot price: 'no offer passes the GPU filters types=GB200' while
    # both GB200 offers pass them; what leaves them out is spot only
    r = invoke(["solve", problems / "llama-70b-within-5-days.yaml", "--gpu-types", "GB200", "--spot"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "no offer that passes the GPU filters types=GB200 has a spot price (oci-gb200, azure-gb200" in text
    assert "no offer passes the GPU filters" not in text


def test_a_node_too_large_for_the_offer_names_the_offer(problems):
    # --sku GB200 resolved to OCI's 4-GPU trays: '72 GPUs per node exceeds the 4 a GB200 node holds' was false
    # (the GB200 node, its NVLink domain, holds 72); the offer's node is what is too small
    job = problems / "llama-70b-within-5-days.yaml"
    r = invoke(["check", job, "--sku", "oci-gb200", "--gpus", "144", "--nodes", "2"])
    assert r.exit_code == 2, r.output
    assert "exceeds the 4 of each oci-gb200 node;" in " ".join(r.output.split())
    r = invoke(["check", job, "--sku", "H100-SXM", "--gpus", "32", "--nodes", "2"])
    assert "exceeds the 8 of each lambda-h100-sxm node (the cheapest H100-SXM offer)" in " ".join(r.output.split())


def test_an_empty_gpu_counts_list_is_refused(tmp_path):
    # gpu_counts: [] read as "not given" (1, 2, 4, 8), where the file says the offer rents no single node
    paths = files(
        tmp_path, cat_yaml=catalog_text(offer_extra="    gpu_counts: []\n"), job_yaml=job_text(catalog="cat.yaml")
    )
    refused(tmp_path, ["solve", paths["job_yaml"]], "gpu_counts is empty", "leave it out")


def test_a_spot_price_above_on_demand_is_refused(tmp_path):
    # a swapped price/spot_price pair planned --spot runs on the dearer, preemptible capacity as the bargain
    paths = files(
        tmp_path,
        cat_yaml=catalog_text(price="$2.00/h", offer_extra="    spot_price: $3.10/h\n"),
        job_yaml=job_text(catalog="cat.yaml"),
    )
    refused(tmp_path, ["solve", paths["job_yaml"], "--spot"], "offers[0]", "spot_price $3.10/h is above price $2.00/h")
    paths = files(tmp_path, cat_yaml=catalog_text(price="$2.00/h", offer_extra="    spot_price: $2.00/h\n"))
    assert invoke(["catalog", paths["cat_yaml"]]).exit_code == 0  # as cheap as on-demand: allowed


@pytest.mark.parametrize("where", ["offer", "sku"])
def test_a_checked_date_in_the_future_is_refused(tmp_path, where):
    # a typo (2062 for 2026) showed the offer's price as checked decades from now, i.e. fresh
    ahead = (dt.date.today() + dt.timedelta(days=30)).isoformat()
    if where == "offer":
        paths = files(tmp_path, cat_yaml=catalog_text(offer_extra=f"    checked: {ahead}\n"))
        refused(tmp_path, ["catalog", paths["cat_yaml"]], "offers[0].checked", "in the future", ahead)
    else:
        sku = skus_text().replace("bandwidth_gb_per_s: 900\n", f"bandwidth_gb_per_s: 900\n    checked: {ahead}\n")
        paths = files(tmp_path, hw_yaml=sku)
        refused(tmp_path, ["catalog", paths["hw_yaml"]], "skus[0].checked", "in the future", ahead)
    today = files(tmp_path, cat_yaml=catalog_text(offer_extra=f"    checked: {dt.date.today().isoformat()}\n"))
    assert invoke(["catalog", today["cat_yaml"]]).exit_code == 0


def test_spot_only_with_a_gpu_count_filter_still_names_the_missing_spot_price(tmp_path):
    # the offers were tested at their whole node only: Lambda's H100 rents 4 GPUs on a node of 8, which a
    # gpu.count of 4 keeps, and the answer fell back to blaming the filters
    paths = files(
        tmp_path,
        job_yaml="job: {model: llama-3.1-8b, method: lora, tokens: 1B, seq_len: 4096, global_batch: 64}\n"
        "constraints: {spot: only, gpu: {types: [H100-SXM], count: 4}}\n",
    )
    r = invoke(["solve", paths["job_yaml"]])
    assert r.exit_code == 0 and "has a spot price (lambda-h100-sxm" in " ".join(r.output.split()), r.output


@pytest.mark.parametrize(("field", "written", "read"), [("precision", "NVFP4", "nvfp4"), ("method", "LoRA", "lora")])
def test_a_choice_is_read_in_any_case(tmp_path, field, written, read):
    # SKU and model names match in any case, and so do the choices (`precision: NVFP4`)
    path = tmp_path / "job.yaml"
    path.write_text(f"job: {{model: llama-3.1-8b, tokens: 1B, seq_len: 4096, {field}: {written}}}\n")
    assert getattr(load_job(path).job, field) == read


# =========================================================================== audit of issue 40: the CLI's edges
# A working folder deleted under gpuplan, signals at every moment (SIGHUP too), control characters in output
# paths, '-' for an output, outputs that are one file under two names or gpuplan's own files, and a shell
# start-up file --install-completion cannot write.

DELETED_CWD = [
    ("out", ["--export", "skypilot", "--out", "sky.yaml"], "--out"),
    ("report", ["--report", "r.html"], "--report"),
    ("plot", ["--plot", "f.svg"], "--plot"),
    ("catalog", ["--catalog", "cat.yaml"], "--catalog"),
]


@pytest.mark.parametrize("case", DELETED_CWD, ids=[c[0] for c in DELETED_CWD])
def test_a_relative_output_in_a_deleted_working_folder_is_bad_input(tmp_path, monkeypatch, case):
    """The working folder deleted (``cd d; rm -r ../d``): a relative path names nothing, which was exit 1 from
    inside os.path.abspath ('internal error: FileNotFoundError')."""
    _, extra, flag = case
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    text = refused(tmp_path, ["solve", job, "--time-limit", "2", *extra], flag, "working folder", "absolute path")
    assert len(text.strip().splitlines()) == 1, text


@pytest.mark.parametrize(
    "args", [["solve", "job.yaml"], ["portfolio", "pf.yaml"], ["model", "./m/config.json"]], ids=["job", "pf", "model"]
)
def test_a_relative_input_in_a_deleted_working_folder_names_the_folder(tmp_path, monkeypatch, args):
    # it was 'job file not found; check the path' (for a file that may well be there, in the folder's new place)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    refused(tmp_path, args, args[1], "working folder", "no longer exists")


def test_a_deleted_working_folder_from_the_command_itself(tmp_path):
    """The same through ``python -m optimizer`` started in a folder that is then removed."""
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m optimizer solve "{job}" --report r.html'
    proc = subprocess.run(
        ["sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2, proc.stderr
    assert "'--report'" in proc.stderr and "working folder" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- signals at every moment

STOP_SIGNALS = [
    pytest.param(signal.SIGINT, 130, "interrupted", id="SIGINT"),
    pytest.param(signal.SIGTERM, 143, "terminated", id="SIGTERM"),
    pytest.param(signal.SIGHUP, 129, "hung up", id="SIGHUP"),
]
proc_fs = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")


def _as_from_a_shell(ignore: tuple[int, ...] = ()) -> None:
    """A shell's foreground command: SIGINT, SIGTERM and SIGHUP at their default action and unblocked
    (whatever pytest's own process has done to them), but those in ``ignore`` ignored (``nohup``)."""
    stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    for signum in stops:
        signal.signal(signum, signal.SIG_IGN if signum in ignore else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)


def _start(args: list, *, ignore: tuple[int, ...] = (), stdout: typing.Any = subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "optimizer", *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: _as_from_a_shell(ignore),
    )


def _catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for ``signum`` (the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(mask, 16) >> (signum - 1) & 1)


def _heavy_modules_loaded(pid: int) -> bool:
    """Whether numpy or ortools, which the CLI's modules load, is mapped into the process yet."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
    return "numpy" in maps or "ortools" in maps


def _wait_for(condition: typing.Callable[[], bool], proc: subprocess.Popen, timeout: float = 120) -> bool:
    """Poll ``condition`` until it holds (True) or the process ends (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.002)
    raise AssertionError("gave up waiting")


@proc_fs
@pytest.mark.parametrize(("sig", "code", "line"), STOP_SIGNALS)
def test_a_signal_while_the_modules_load_ends_it_at_once(sig, code, line):
    """From the first instruction: the handlers are in place before numpy and ortools load (a SIGTERM or
    SIGHUP then killed the process by the signal, with no line), and a signal then ends the process at once
    (a ^C waited for the imports to finish, 5 s on a busy machine)."""
    proc = _start(["solve", "problems/llama-70b-within-5-days.yaml"])
    try:
        assert _wait_for(lambda: _catches(proc.pid, signal.SIGTERM), proc), proc.communicate()
        assert not _heavy_modules_loaded(proc.pid), "the handlers came only after the heavy modules"
        proc.send_signal(sig)
        sent = time.perf_counter()
        loaded = _wait_for(lambda: _heavy_modules_loaded(proc.pid), proc, timeout=60)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code and err == line + "\n", (proc.returncode, err[-800:])
    assert not loaded, "it went on loading the modules after the signal"
    assert time.perf_counter() - sent < 10


@pytest.mark.parametrize(("sig", "code", "line"), STOP_SIGNALS)
def test_a_signal_while_a_chart_is_written_leaves_no_temporary_file(tmp_path, sig, code, line):
    """Mid-run, while the chart is being drawn into its temporary file (``.frontier.XXXX.tmp.svg``): the
    code and line of the signal, no chart and no temporary file (SIGHUP left the temporary file behind)."""
    proc = _start(["solve", "problems/llama-70b-within-5-days.yaml", "--plot", tmp_path / "frontier.svg"])
    try:
        if not _wait_for(lambda: any(tmp_path.glob(".frontier.*.tmp.svg")), proc):
            pytest.skip("the chart was written before the test saw its temporary file")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code and err.strip().endswith(line), (proc.returncode, err[-800:])
    assert "Traceback" not in err and "Cheapest plan" not in out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("sig", "code", "line"), STOP_SIGNALS)
def test_a_signal_after_the_answer_still_gives_its_code(tmp_path, sig, code, line):
    """Late: the report written and the whole answer on stdout, the process exiting. Python puts the
    signals back to their default action while it shuts down, so a signal then killed the process (status
    -2, -15, -1, no line); now it ends with the signal's code and line, or had already ended with 0."""
    report = tmp_path / "r.html"
    for _ in range(4):  # the moment after the answer is short: a few tries
        proc = _start(["solve", "problems/llama-70b-within-5-days.yaml", "-f", "json", "--report", report])
        assert proc.stdout is not None
        try:
            answer = ""
            while True:
                chunk = os.read(proc.stdout.fileno(), 65536).decode()
                assert chunk, "stdout ended before the answer did"
                answer += chunk
                with contextlib.suppress(ValueError):
                    json.loads(answer)
                    break
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode in (0, code), (proc.returncode, err[-800:])
        assert err.strip().splitlines()[-1] == (line if proc.returncode == code else f"wrote report to {report}")
        assert report.read_text().rstrip().endswith("</html>")


@pytest.mark.parametrize(("sig", "code", "line"), STOP_SIGNALS)
def test_a_signal_during_a_solve_gives_its_code(tmp_path, sig, code, line):
    pf = _big_portfolio(tmp_path)
    proc = _start(["portfolio", pf, "--time-limit", "60", "-f", "json"])
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=6)
            pytest.skip("the portfolio finished before the signal")
        proc.send_signal(sig)
        sent = time.perf_counter()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code and err.strip().endswith(line) and "Traceback" not in err, err[-800:]
    assert "status" not in out and time.perf_counter() - sent < 10


@proc_fs
def test_an_ignored_sighup_stays_ignored():
    """``nohup gpuplan ...``: a SIGHUP ignored when gpuplan starts stays ignored, and the command answers."""
    proc = _start(["solve", "problems/llama-70b-within-5-days.yaml", "-q"], ignore=(signal.SIGHUP,))
    try:
        assert _wait_for(lambda: _catches(proc.pid, signal.SIGTERM), proc), proc.communicate()
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and out.startswith("Cheapest plan"), (proc.returncode, err[-800:])


# --------------------------------------------------------------------------- output paths in messages, '-'


def test_a_newline_in_an_output_path_is_escaped(tmp_path):
    """A newline in --out split the success line ('wrote ... to PATH') and the one-paragraph refusal."""
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    out = tmp_path / "a\nb.yaml"
    result = invoke(["solve", job, "--time-limit", "2", "--export", "skypilot", "--out", out, "-q"])
    assert result.exit_code == 0, result.output
    assert f"wrote skypilot config to {tmp_path}/a\\x0ab.yaml\n" in result.stderr, result.stderr
    assert yaml.safe_load(out.read_text())["resources"]
    out.unlink()
    for flag, name in [("--out", "no\ndir/x.yaml"), ("--report", "no\ndir/r.html"), ("--plot", "f.s\nvg")]:
        args = ["solve", job, flag, tmp_path / name, *(["--export", "skypilot"] if flag == "--out" else [])]
        text = refused(tmp_path, args, flag, "\\x0a")
        assert len(text.strip().splitlines()) == 1, text


def test_out_dash_is_standard_output(tmp_path, monkeypatch):
    """``--out -`` is standard output, as no --out is (it wrote a file named '-')."""
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    monkeypatch.chdir(tmp_path)
    result = invoke(["solve", job, "--time-limit", "2", "--export", "skypilot", "--out", "-"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["resources"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]
    # with a JSON answer on stdout as well, refused as without --out
    refused(tmp_path, ["solve", job, "--export", "skypilot", "--out", "-", "-f", "json"], "--out", "standard output")


@pytest.mark.parametrize("out", [[], ["--out", "-"]], ids=["no-out", "out-dash"])
@pytest.mark.parametrize("command", ["solve", "check"])
def test_a_config_on_stdout_still_writes_the_chart_and_report(tmp_path, monkeypatch, command, out):
    """With the launcher config on stdout the command returned before writing --plot and --report, and
    exited 0 without them."""
    pytest.importorskip("matplotlib")
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    monkeypatch.chdir(tmp_path)  # a file named '-' would show in the listing below
    args = [command, job, *(["--sku", "B200", "--gpus", "8"] if command == "check" else ["--time-limit", "2"])]
    args += ["--export", "skypilot", *out, "--plot", tmp_path / "f.svg"]
    args += ["--report", tmp_path / "r.html"] if command == "solve" else []
    result = invoke(args)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["resources"]
    assert (tmp_path / "f.svg").read_text().startswith("<?xml")
    expect = ["f.svg", "job.yaml", *(["r.html"] if command == "solve" else [])]
    assert sorted(p.name for p in tmp_path.iterdir()) == expect


@pytest.mark.parametrize(("flag", "suffix"), [("--report", ".html"), ("--plot", ".svg")])
def test_a_report_or_chart_to_dash_is_refused(tmp_path, flag, suffix):
    # it was "- has no extension"
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    refused(tmp_path, ["solve", job, flag, "-"], flag, "standard output", suffix)


# --------------------------------------------------------------------------- outputs onto each other or gpuplan


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_two_outputs_that_are_one_file_are_refused(tmp_path, link):
    """``--out out.svg --plot link.svg`` with link.svg a link to out.svg: the names differ, the file does not
    (it exited 0 and the chart replaced the config)."""
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    out, other = tmp_path / "out.svg", tmp_path / "link.svg"
    if link == "symbolic":
        other.symlink_to(out.name)  # dangling until written: the writer writes through it
    else:
        out.write_text("old")
        other.hardlink_to(out)
    args = ["solve", job, "--time-limit", "2", "--export", "skypilot", "--out", out, "--plot", other]
    refused(tmp_path, args, "--out", "is also the --plot file", "link.svg")


def _own_file_cases() -> list:
    from optimizer.inputs.bundled import bundled_dir

    catalogs = bundled_dir("catalogs")
    package = Path(optimizer.__file__).resolve().parent
    return [
        pytest.param("--out", catalogs / "default.yaml", id="bundled-catalog"),
        pytest.param("--out", catalogs / "models.yaml", id="model-presets"),
        pytest.param("--out", catalogs / "hostile-new.yaml", id="new-file-among-the-catalogs"),
        pytest.param("--out", package / "hostile-new.yaml", id="new-file-in-the-package"),
        pytest.param("--report", package / "present" / "hostile-new.html", id="report-in-the-package"),
    ]


@pytest.mark.parametrize(("flag", "target"), _own_file_cases())
@pytest.mark.parametrize("through_a_link", [False, True], ids=["named", "through-a-link"])
def test_no_output_overwrites_gpuplan_s_own_files(tmp_path, flag, target, through_a_link):
    """--out onto a bundled catalog or models.yaml would break every later use of it (exit 1): refused."""
    job = files(tmp_path, job_yaml=job_text())["job_yaml"]
    before = target.read_bytes() if target.exists() else None
    dest = target
    if through_a_link:
        dest = tmp_path / ("link" + target.suffix)
        dest.symlink_to(target)
    extra = ["--export", "skypilot"] if flag == "--out" else []
    try:
        refused(tmp_path, ["solve", job, "--time-limit", "2", flag, dest, *extra], flag, "gpuplan's own files")
    finally:  # a command that wrote there anyway must not leave gpuplan changed: put it back as it was
        if before is None:
            target.unlink(missing_ok=True)
        elif target.read_bytes() != before:
            target.write_bytes(before)
    assert (target.read_bytes() if target.exists() else None) == before


# --------------------------------------------------------------------------- --install-completion


@pytest.mark.parametrize("rc", ["a-folder", "read-only"])
def test_install_completion_into_an_unwritable_start_up_file_is_bad_input(tmp_path, rc):
    """``gpuplan --install-completion bash`` with a ~/.bashrc it cannot write was a traceback (exit 1).
    A folder where the file should be is unwritable even for root."""
    if rc == "a-folder":
        (tmp_path / ".bashrc").mkdir()
    else:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            pytest.skip("root may write a read-only file")
        (tmp_path / ".bashrc").write_text("# mine\n")
        (tmp_path / ".bashrc").chmod(0o400)
    # typer detects the shell from the process tree (shellingham) unless told not to, and then takes no value: run
    # from a tree with no shell above it, it printed "Shell None is not supported" (exit 1) before writing anything.
    # typer's own test switch makes the shell the argument's, so the test does not depend on who launched pytest.
    no_detection = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    proc = gpuplan("--install-completion", "bash", env={"HOME": str(tmp_path), **no_detection})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "'--install-completion'" in proc.stderr and f"{tmp_path}/.bashrc" in proc.stderr
    assert "--show-completion" in proc.stderr
