"""bench/unseen.py's summary over every first-seen set: each set's scored rows counted once, grouped as
bench/lofo_groups.py groups the fitted families (issue 48: "the same thresholds hold there")."""

from __future__ import annotations

import re
import sys

from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import unseen  # noqa: E402

SETS = (ROOT / "validation" / "unseen_families_8.yaml", ROOT / "validation" / "unseen_families_9.yaml")


def _rows(line: str) -> int:
    return int(re.search(r": (\d+) rows", line).group(1))


def test_every_set_together_counts_each_sets_scored_rows_once():
    collected: list = []
    per_set = [unseen.report(unseen.load(path), collected) for path in SETS]
    together = unseen.every_set_lines(collected)
    assert together[0] == "2 sets, 3 source families"  # liger-hf-examples, te-llama-tutorial, modalities
    for label in ("throughput", "memory"):
        total = sum(_rows(next(x for x in lines if x.startswith(f"{label} all families"))) for lines in per_set)
        assert _rows(next(x for x in together if x.startswith(f"{label} all families"))) == total
    # grouped by generation and framework, not by family (each set's own report names its families)
    assert not any(" family " in line for line in together)
    assert any(line.startswith("throughput dense on ampere") for line in together)
