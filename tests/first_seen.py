"""The rule every first-seen data file of validation/ keeps (unseen_families_2.yaml to unseen_families_4.yaml): its
families are its own, registered in its own ``families:`` and nowhere else, so that nothing fitted ever reads them;
and the figures their tests hold, a family's scored ratios (predicted / published) and how far each is from 1."""

from __future__ import annotations

import re
import sys

import yaml
from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402
import unseen  # noqa: E402


def assert_families_new(file_name: str, data: dict) -> set[str]:
    """The file's families (its ``families:`` keys), after checking that they are exactly its rows' families, that
    validation/families.yaml does not register them, that no other file of validation/ names them on a row, that
    no fitted row is theirs, and that every row name is unique."""
    registered = set(yaml.safe_load((ROOT / "validation" / "families.yaml").read_text())["families"])
    ours = set(data["families"])
    rows = data["runs"] + data["memory_rows"]
    assert {r["family"] for r in rows} == ours
    assert not ours & registered
    for path in (ROOT / "validation").glob("*.yaml"):
        if path.name == file_name:
            continue
        text = path.read_text()
        for family in ours:
            assert not re.search(rf"family: {re.escape(family)}\b", text), (path.name, family)
    fitted = {r.get("family") for path in throughput.DATA_FILES for r in yaml.safe_load(path.read_text())["runs"]}
    assert not ours & fitted
    # a first-seen family whose MoE rows later joined the MoE host-time fit (bench/throughput.py MOE_FOLDED) stays in
    # its own file, and no later set reuses it
    own_folded = {fam for path, fam in throughput.MOE_FOLDED if path.name == file_name}
    assert not ours & (throughput.MOE_FOLDED_FAMILIES - own_folded)
    assert len({r["name"] for r in rows}) == len(rows)
    return ours


def factor(ratio: float) -> float:
    """How far a predicted / published ratio is from 1, as a factor (0.5 and 2.0 are both 2x off)."""
    return max(ratio, 1.0 / ratio)


def scored(speeds: list, family: str) -> list[float]:
    """The family's scored throughput ratios (bench/unseen.py ``speeds``: expressible rows gpuplan predicted)."""
    return [s.ratio for s in speeds if s.scored and s.row["family"] == family]


def scored_memory(memories: list, family: str) -> list[float]:
    """The family's scored peak-memory ratios (bench/unseen.py ``memories``)."""
    return [s.ratio for s in unseen.scored_memories(memories) if s.row["family"] == family]
