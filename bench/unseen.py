"""First-seen throughput and peak memory of source families gpuplan never fitted on (issue 48, "validation that cannot
flatter, widened toward where users stand"): validation/unseen_families_<n>.yaml, every set
(2, 3, 4, 5, ...) in the order it was added.

    python bench/unseen.py          # per file: per-row tables, then median |error| and worst ratio per family and group
    python bench/unseen.py validation/unseen_families_3.yaml    # one file

Throughput rows go through bench/throughput.py's ``checked`` (the published layout pinned, every fitted term as
shipped); memory rows through bench/memory.py's ``predict`` (the figure of the kind the source counts). Nothing here
is fitted, so each figure is the family's held-out score. A row gpuplan refuses is listed with its reason and not
scored; a row (throughput or memory) marked ``expressible: false`` is predicted on the nearest layout and listed
apart, not scored. File 2's output comes first and reads as it did before the later files were added.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import memory  # noqa: E402
import throughput  # noqa: E402
from lofo_groups import groups  # noqa: E402

from optimizer import GpuplanError, load_catalog  # noqa: E402

DATA = ROOT / "validation" / "unseen_families_2.yaml"
DATA_3 = ROOT / "validation" / "unseen_families_3.yaml"
DATA_4 = ROOT / "validation" / "unseen_families_4.yaml"
DATA_5 = ROOT / "validation" / "unseen_families_5.yaml"


def _set_number(path: Path) -> int:
    return int(path.stem.rsplit("_", 1)[1])


# Every first-seen set, in the order it was added: a new validation/unseen_families_<n>.yaml is read without an edit.
DATA_FILES = tuple(sorted((ROOT / "validation").glob("unseen_families_*.yaml"), key=_set_number))
HARDWARE = ROOT / "validation" / "hardware.yaml"
MISS_RATIO = 1.5  # issue 48: "every row within 1.5x"


@dataclass
class Speed:
    """One throughput row: gpuplan's tokens/s per GPU on the published layout (None: refused, ``reason``)."""

    row: dict
    predicted: float | None
    reason: str = ""
    fits: bool = True

    @property
    def scored(self) -> bool:
        """Predicted, and of a layout gpuplan can express (a row marked ``expressible: false`` is listed apart)."""
        return self.predicted is not None and self.row.get("expressible", True)

    @property
    def ratio(self) -> float:
        return (self.predicted or 0.0) / self.row["tokens_per_s_per_gpu"]


def load(path: Path = DATA) -> dict:
    return yaml.safe_load(path.read_text())


def ratio_error(ratio: float) -> float:
    return abs(ratio - 1.0)


def worst(ratios: list[float]) -> float:
    """The ratio farthest from 1 (as a factor: 0.5 and 2.0 are equally far)."""
    return max(ratios, key=lambda r: max(r, 1.0 / r))


def figures(ratios: list[float]) -> tuple[int, float, float]:
    """(rows, median |error|, worst ratio) of predicted / published ratios."""
    return len(ratios), statistics.median(ratio_error(r) for r in ratios), worst(ratios)


def speeds(data: dict) -> list[Speed]:
    catalog = load_catalog(str(HARDWARE))
    out = []
    for row in data["runs"]:
        try:
            plan = throughput.checked(row, catalog).plan
        except GpuplanError as exc:
            out.append(Speed(row, None, str(exc).splitlines()[0]))
            continue
        out.append(Speed(row, plan.tokens_per_s / row["gpus"], fits=plan.fits))
    return out


def memories(data: dict) -> list[tuple[dict, memory.Scored | None, str]]:
    """Each memory row scored by bench/memory.py (None and the reason where gpuplan refuses its layout)."""
    catalog = memory.catalog_with(data.get("extra_skus", []))
    out: list[tuple[dict, memory.Scored | None, str]] = []
    for row in data.get("memory_rows") or []:
        try:
            out.append((row, memory.predict(row, catalog), ""))
        except GpuplanError as exc:
            out.append((row, None, str(exc).splitlines()[0]))
    return out


def scored_memories(memory_rows: list[tuple[dict, memory.Scored | None, str]]) -> list[memory.Scored]:
    """The memory rows that count: predicted and expressible."""
    return [s for _, s, _ in memory_rows if s is not None and s.row.get("expressible", True)]


def speed_groups(rows: list[Speed]) -> dict[str, list[float]]:
    """Ratios by source family and by bench/lofo_groups.py's groups (GPU generation, framework; dense / MoE)."""
    catalog = load_catalog(str(HARDWARE))
    scored = [s for s in rows if s.scored]
    out: dict[str, list[float]] = {"all families": [s.ratio for s in scored]}
    for s in scored:
        out.setdefault(f"family {s.row['family']}", []).append(s.ratio)
    # lofo_groups reads the held-out prediction from _lofo: here the first-seen one
    tagged = [{**s.row, "_lofo": s.predicted} for s in scored]
    for name, members in groups(tagged, lambda r: throughput.family(r, catalog)).items():
        out[name] = [m["_lofo"] / m["tokens_per_s_per_gpu"] for m in members]
    return out


def memory_groups(scored: list[memory.Scored]) -> dict[str, list[float]]:
    """Memory ratios by source family, GPU and framework."""
    out: dict[str, list[float]] = {"all families": [s.ratio for s in scored]}
    for s in scored:
        out.setdefault(f"family {s.row['family']}", []).append(s.ratio)
        out.setdefault(f"on {s.row['published']['gpu']}", []).append(s.ratio)
        out.setdefault(f"framework {s.row['job'].get('framework', 'auto')}", []).append(s.ratio)
    return out


def speed_lines(rows: list[Speed]) -> list[str]:
    lines = [
        "| row | GPUs | layout (tp/pp/zero, mbs x ga) | published tok/s/GPU | predicted | ratio |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for s in rows:
        lay = s.row["layout"]
        shape = (
            f"{lay.get('tp', 1)}/{lay.get('pp', 1)}/{lay.get('zero', '-')}, {s.row['micro_batch']} x {lay.get('ga')}"
        )
        predicted = f"{s.predicted:,.0f}" if s.predicted is not None else f"refused: {s.reason}"
        ratio = f"{s.ratio:.2f}" if s.predicted is not None else "-"
        apart = "" if s.row.get("expressible", True) else " (not scored)"
        lines.append(
            f"| {s.row['name']}{apart} | {s.row['gpus']} | {shape} | {s.row['tokens_per_s_per_gpu']:,} | {predicted} | {ratio} |"
        )
    return lines


def memory_lines(memory_rows: list[tuple[dict, memory.Scored | None, str]]) -> list[str]:
    lines = [
        "| row | counts | GPU x n | published GiB | predicted GiB | ratio | as reserved |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for row, s, reason in memory_rows:
        p = row["published"]
        if s is None:
            lines.append(
                f"| {row['name']} | {row['counts']} | {p['gpu']} x {p['gpus']} | - | refused: {reason} | - | - |"
            )
            continue
        apart = "" if row.get("expressible", True) else " (not scored)"
        lines.append(
            f"| {row['name']}{apart} | {row['counts']} | {p['gpu']} x {p['gpus']} | {s.published_gib:.1f} | "
            f"{s.predicted_gib:.1f} | {s.ratio:.2f} | {reserved_ratio(s):.2f} |"
        )
    return lines


def reserved_ratio(scored: memory.Scored) -> float:
    """The ratio had the published figure been torch's reserved peak (bench/memory.py's ``counted_gib``)."""
    return memory.counted_gib(scored.terms, "reserved") / scored.published_gib


def summary_lines(label: str, grouped: dict[str, list[float]]) -> list[str]:
    out = []
    for name, ratios in sorted(grouped.items()):
        if not ratios:
            continue
        n, median, far = figures(ratios)
        out.append(f"{label} {name}: {n} rows, median |error| {median:.1%}, worst ratio {far:.2f}")
    return out


def misses(rows: list[Speed], scored: list[memory.Scored]) -> list[str]:
    """Rows beyond issue 48's 1.5x, throughput and memory."""
    out = [
        f"throughput {s.row['name']}: {s.ratio:.2f}"
        for s in rows
        if s.scored and max(s.ratio, 1 / s.ratio) > MISS_RATIO
    ]
    out += [f"memory {s.row['name']}: {s.ratio:.2f}" for s in scored if max(s.ratio, 1 / s.ratio) > MISS_RATIO]
    return out


def report(data: dict, collected: list | None = None) -> list[str]:
    """One data file's tables and figures, as printed; its predictions appended to ``collected`` (rows, scored
    memory rows) for the summary over every set."""
    rows = speeds(data)
    memory_rows = memories(data)  # each row predicted once, for the table and the figures
    scored = scored_memories(memory_rows)
    if collected is not None:
        collected.append((rows, scored))
    lines = speed_lines(rows) + [""]
    if memory_rows:
        lines += memory_lines(memory_rows) + [""]
    lines += summary_lines("throughput", speed_groups(rows))
    lines += summary_lines("memory", memory_groups(scored))
    unfit = [f"{s.row['name']}" for s in rows if s.predicted is not None and not s.fits]
    lines.append("throughput rows gpuplan says do not fit on the GPU they ran on: " + (", ".join(unfit) or "none"))
    lines.append("beyond 1.5x: " + ("; ".join(misses(rows, scored)) or "none"))
    apart = [f"{s.row['name']} ({s.ratio:.2f})" for s in rows if s.predicted is not None and not s.scored]
    if apart:
        lines.append("throughput rows not scored (not expressible, nearest layout): " + "; ".join(apart))
    refused = [f"{s.row['name']} ({s.reason})" for s in rows if s.predicted is None]
    lines.append("refused: " + ("; ".join(refused) or "none"))
    return lines


def every_set_lines(collected: list) -> list[str]:
    """Every set's scored rows together, by source family's GPU generation and framework (bench/lofo_groups.py's
    groups) and for memory by GPU and framework: issue 48 asks the fitted families' thresholds of first-seen ones
    too (15 % a group, every row within 1.5x)."""
    rows = [s for set_rows, _ in collected for s in set_rows]
    scored = [m for _, set_scored in collected for m in set_scored]
    speed = {k: v for k, v in speed_groups(rows).items() if not k.startswith("family ")}
    mem = {k: v for k, v in memory_groups(scored).items() if not k.startswith("family ")}
    families = {s.row["family"] for s in rows if s.scored} | {m.row["family"] for m in scored}
    head = f"{len(collected)} sets, {len(families)} source families"
    return [head] + summary_lines("throughput", speed) + summary_lines("memory", mem)


def main(argv: list[str] | None = None) -> int:
    paths = [Path(a) for a in (sys.argv[1:] if argv is None else argv)] or list(DATA_FILES)
    collected: list = []
    for i, path in enumerate(paths):
        if i:
            print(f"\n## {path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path}\n")
        print("\n".join(report(load(path), collected)))
    if len(paths) > 1:
        print("\n## every first-seen set together\n")
        print("\n".join(every_set_lines(collected)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
