"""Published peak memory per GPU from several families (validation/memory_runs.yaml), scored by bench/memory.py.

The thresholds are the bench's figures with a little slack: 83 rows, median |error| 5.7 %, worst 0.60 (Answer.AI's
QLoRA at 512 tokens, whose reserved figure holds FSDP's loading cache) when they were set (BENCHMARKS.md, "Two
families never seen"), held at 6 % and 1.70x. A change to the memory model that makes the published peaks worse
fails here; one that makes them better should lower the thresholds. The worst ratio is held looser than issue 49's
1.30x bar because two families never fitted on (ms-swift's swift 1.x benchmark and Answer.AI's FSDP-QLoRA, scored as
gathered) sit below it, which the issue counts as not done.
"""

from __future__ import annotations

import sys

import pytest
import yaml
from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import memory as bench  # noqa: E402

from optimizer.physics.constants import FRAMEWORK_RESERVE_FIXED_BYTES  # noqa: E402

MAX_MEDIAN = 0.06
MAX_WORST = 1.70
TABLE = bench.load_rows()
ROWS = TABLE["rows"]
FAMILIES = yaml.safe_load((ROOT / "validation" / "families.yaml").read_text())["families"]


def test_bench_within_todays_thresholds(capsys):
    assert bench.main(["--max-median", str(MAX_MEDIAN), "--max-worst", str(MAX_WORST)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "leave-one-family-out" in out and "does not fit on the GPU it ran on: none" in out


def test_bench_fails_past_a_threshold(capsys):
    assert bench.main(["--max-median", "0.01"]) == 1
    assert "FAIL: median |error|" in capsys.readouterr().out


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_every_row_names_a_family_a_source_and_what_it_counts(row):
    assert row["family"] in FAMILIES, f"{row['name']}: family {row['family']!r} is not in validation/families.yaml"
    assert row["source"].startswith("https://github.com/") and "/blob/" in row["source"], row["name"]
    assert row["counts"] in bench.COUNTS, row["name"]
    assert bench.published_gib(row["published"]) > 0


def test_rows_span_at_least_four_scored_families():
    scored = [r for r in ROWS if r.get("expressible", True)]
    assert len({r["family"] for r in scored}) >= 4
    assert 20 <= len(ROWS) <= 100  # a bound on a file one reads, not on evidence
    assert len({r["name"] for r in ROWS}) == len(ROWS)


def test_not_a_torchtune_row_twice():
    # torchtune's table lives in validation/torchtune_memory.yaml (tests/validation/test_torchtune_memory.py)
    assert all(r["family"] != "torchtune" for r in ROWS)


def test_allocated_rows_leave_the_reserve_out():
    # an allocated figure is compared with weights + gradients + optimizer + activations (+ the optimizer step's
    # temporaries, less what is never held at once: physics/memory_terms.py not_concurrent_bytes); the others add
    # the reserve and the freed segments the allocator keeps cached while there is room
    catalog = bench.catalog_with(TABLE.get("extra_skus", []))
    allocated = next(r for r in ROWS if r["counts"] == "allocated" and r.get("expressible", True))
    scored = bench.predict(allocated, catalog)
    t = scored.terms
    peak = t["weights"] + t["gradients"] + t["optimizer"] + t["activations"] + t["optimizer_step"] - t["not_concurrent"]
    assert scored.predicted_gib == pytest.approx(peak)
    device = bench.predict({**allocated, "counts": "device"}, catalog)
    cached = min(t["not_concurrent"], max(t["capacity"] - peak - t["reserve"], 0.0))
    assert device.predicted_gib == pytest.approx(scored.predicted_gib + t["reserve"] + cached)
    # a reserved figure (torch's caching allocator) leaves out the CUDA context and NCCL's own buffers
    reserved = bench.predict({**allocated, "counts": "reserved"}, catalog)
    assert reserved.predicted_gib == pytest.approx(device.predicted_gib - FRAMEWORK_RESERVE_FIXED_BYTES / 2.0**30)


def test_variable_lengths_hold_the_length_dependent_tensors_once_more():
    # ms-swift's rows run samples of many lengths unpacked: the reserved figure holds the allocator's segments of
    # earlier, shorter steps beside the longest step's (physics/memory_terms.variable_length_fragmentation_bytes);
    # the allocated figure does not change, and fixed-shape rows keep one largest transient tensor
    catalog = bench.catalog_with(TABLE.get("extra_skus", []))
    row = next(r for r in ROWS if r["job"].get("variable_lengths") and r["counts"] == "reserved")
    fixed_job = {**row["job"], "variable_lengths": False}
    varied = bench.predict(row, catalog)
    fixed = bench.predict({**row, "job": fixed_job}, catalog)
    outside_allocator_gib = FRAMEWORK_RESERVE_FIXED_BYTES / 2.0**30
    assert varied.terms["reserve"] == pytest.approx(outside_allocator_gib + varied.terms["activations"])
    assert fixed.terms["reserve"] < varied.terms["reserve"]
    assert varied.predicted_gib - fixed.predicted_gib == pytest.approx(varied.terms["reserve"] - fixed.terms["reserve"])
    allocated = {**row, "counts": "allocated"}
    assert bench.predict(allocated, catalog).predicted_gib == pytest.approx(
        bench.predict({**allocated, "job": fixed_job}, catalog).predicted_gib
    )


def test_the_terms_table_adds_up_to_each_allocated_figure(capsys):
    # bench/memory.py --terms: an allocated figure (torch.cuda.max_memory_allocated) is the state and activations,
    # plus the optimizer step's temporaries, less what is never allocated at once; the reserve is not in it
    assert bench.main(["--terms"]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if "| allocated |" in line]
    assert len(rows) >= 20
    for cells in rows:
        w, g, o, a, step, apart, _, predicted = (float(c) for c in cells[2:10])
        assert w + g + o + a + step - apart == pytest.approx(predicted, abs=0.03), cells[0]
