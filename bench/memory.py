"""Score gpuplan's per-GPU memory against published peaks from several framework families (issue 49).

    python bench/memory.py                                  # the table and the summary lines
    python bench/memory.py --max-median 0.19 --max-worst 2.1    # exit 1 past either (tests use this)
    python bench/memory.py --terms                              # each row's terms in GiB, to compare term by term

Each row of validation/memory_runs.yaml is predicted through ``check`` on the layout its source ran (the row's
``job:`` and ``layout:``, mapped the same way for every row; nothing is tuned per row) and compared with the figure
its source publishes, by what that figure counts (the row's ``counts:``):

- ``allocated`` (torch.cuda.max_memory_allocated, Megatron's mem-max-allocated-bytes): gpuplan's weights +
  gradients + optimizer state + activations, without its reserve;
- ``reserved`` (torch.cuda.max_memory_reserved: torchtitan's logged memory): the allocated peak plus the caching
  allocator's fragmentation (physics/memory.py ``allocator_fragmentation_bytes``; for a row whose samples differ in
  length, ``job.variable_lengths``, physics/memory_terms.py ``variable_length_fragmentation_bytes``), gpuplan's
  total less the fixed part of its reserve that lies outside the allocator (the CUDA context and NCCL's own buffers,
  constants.FRAMEWORK_RESERVE_FIXED_BYTES: PyTorch's reserved memory is what its caching allocator manages);
- ``device`` (nvidia-smi or an unstated reading): gpuplan's total, with the whole framework reserve
  (``framework_reserve_bytes``).

Nothing is fitted on these rows, so every row is already held out: leave-one-family-out equals the plain score,
and the per-family lines are the leave-one-family-out figures. Rows marked ``expressible: false`` ran something
gpuplan has no setting for; they are predicted on the nearest layout and listed apart, not scored.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optimizer import CheckRequest, check, load_catalog  # noqa: E402
from optimizer.inputs.files import expand_models  # noqa: E402
from optimizer.inputs.schema import Catalog, Offer, Problem, Sku  # noqa: E402
from optimizer.physics.constants import FRAMEWORK_RESERVE_FIXED_BYTES  # noqa: E402
from optimizer.physics.memory_terms import cached_beyond_peak_bytes  # noqa: E402

DATA = ROOT / "validation" / "memory_runs.yaml"
GIB = 2.0**30
COUNTS = ("allocated", "reserved", "device")
# check's layout arguments a row's ``layout:`` may pin (CheckRequest fields of the same name)
LAYOUT_KEYS: tuple[str, ...] = ("tp", "pp", "cp", "ep", "zero", "shard_degree", "micro_batch", "grad_accum")
LAYOUT_KEYS += ("recompute", "virtual_stages", "expert_tp", "offload")


@dataclass
class Scored:
    row: dict
    predicted_gib: float
    published_gib: float
    fits: bool
    capacity_gib: float
    terms: dict

    @property
    def ratio(self) -> float:
        return self.predicted_gib / self.published_gib

    @property
    def error(self) -> float:
        return abs(self.ratio - 1.0)


def load_rows(path: Path = DATA) -> dict:
    return yaml.safe_load(path.read_text())


def published_gib(published: dict) -> float:
    """The published peak per GPU in GiB, from whichever unit the source printed (peak_gib, peak_gb, peak_bytes)."""
    if "peak_gib" in published:
        return float(published["peak_gib"])
    if "peak_gb" in published:
        return float(published["peak_gb"]) * 1e9 / GIB
    return float(published["peak_bytes"]) / GIB


def catalog_with(extra_skus: list[dict]) -> Catalog:
    """The default catalog plus the GPUs a row ran on that it does not carry (each a copy of a catalog SKU with
    the memory the source states), each with a price-free offer so ``check`` can place the row on it."""
    catalog = load_catalog("default")
    skus, offers = list(catalog.skus), list(catalog.offers)
    for extra in extra_skus:
        base = next(s for s in skus if s.name == extra["like"])
        data = base.model_dump(by_alias=True)
        data.update(
            name=extra["name"], aliases=[], memory=extra["memory"], memory_reported=extra.get("memory_reported")
        )
        sku = Sku.model_validate(data)
        skus.append(sku)
        offers.append(
            Offer.model_validate({"name": extra["name"].lower(), "sku": sku.name, "price": 1.0, "max_nodes": 64})
        )
    return catalog.model_copy(update={"skus": skus, "offers": offers})


def predict(row: dict, catalog: Catalog) -> Scored:
    """The row's published layout through ``check``: its memory figure of the kind the row's source counts."""
    published = row["published"]
    layout = row["layout"]
    gpus = int(published["gpus"])
    model_parallel = layout.get("tp", 1) * layout.get("pp", 1) * layout.get("cp", 1)
    dp = gpus // model_parallel
    global_batch = dp * layout["micro_batch"] * layout.get("grad_accum", 1)
    job = {"tokens": "10M", "global_batch": global_batch, **row["job"]}
    problem = Problem.model_validate(expand_models({"job": job}))
    pinned = {key: layout[key] for key in LAYOUT_KEYS if key in layout}
    if dp * layout.get("cp", 1) == 1:
        pinned.pop("zero", None)  # nothing to shard over (FSDP shards over the data-parallel x context-parallel ranks)
    result = check(problem, CheckRequest(published["gpu"], gpus, compare=False, **pinned), catalog=catalog)
    m = result.plan.memory_gib
    terms = {"weights": m.weights, "gradients": m.gradients, "optimizer": m.optimizer}
    terms |= {"activations": m.activations, "reserve": m.reserve}
    terms |= {"optimizer_step": m.optimizer_step, "not_concurrent": m.not_concurrent, "capacity": m.capacity}
    return Scored(row, counted_gib(terms, row["counts"]), published_gib(published), result.fits, m.capacity, terms)


def counted_gib(terms: dict[str, float], counts: str) -> float:
    """gpuplan's figure of the kind a source counts: ``allocated`` (torch.cuda.max_memory_allocated) the state and
    activations, ``reserved`` (torch's reserved peak) the total less the reserve's part outside the allocator (the
    CUDA context and NCCL), ``device`` (nvidia-smi) the total."""
    state = terms["weights"] + terms["gradients"] + terms["optimizer"] + terms["activations"]
    state = state + terms.get("optimizer_step", 0.0) - terms.get("not_concurrent", 0.0)  # the allocated peak
    total = state + terms["reserve"]
    # a reserved or nvidia-smi reading keeps the freed activation segments cached while there is room
    cached = cached_beyond_peak_bytes(terms.get("not_concurrent", 0.0), total, terms.get("capacity", total))
    total = total + float(cached)
    return {"allocated": state, "reserved": total - FRAMEWORK_RESERVE_FIXED_BYTES / GIB, "device": total}[counts]


def evaluate_all(table: dict) -> list[Scored]:
    catalog = catalog_with(table.get("extra_skus", []))
    return [predict(row, catalog) for row in table["rows"]]


def summary(scored: list[Scored]) -> dict:
    """Median |error| and the worst ratio (farthest from 1) of the scored rows."""
    errors = [s.error for s in scored]
    worst = max(scored, key=lambda s: s.error)
    return {"rows": len(scored), "median": statistics.median(errors), "worst": worst.ratio, "worst_row": worst}


def markdown(scored: list[Scored]) -> list[str]:
    lines = [
        "| row | family | counts | GPU x n | predicted GiB | published GiB | ratio | fits |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for s in scored:
        p = s.row["published"]
        lines.append(
            f"| {s.row['name']} | {s.row['family']} | {s.row['counts']} | {p['gpu']} x {p['gpus']} | "
            f"{s.predicted_gib:.1f} | {s.published_gib:.1f} | {s.ratio:.2f} | {'yes' if s.fits else 'NO'} |"
        )
    return lines


TERMS = ("weights", "gradients", "optimizer", "activations", "optimizer_step", "not_concurrent", "reserve")


def terms_table(scored: list[Scored]) -> list[str]:
    """Each row's memory terms in GiB as ``check`` reports them (what the figure of its ``counts`` sums), beside the
    published figure: where a row misses, the term to read at its source."""
    lines = [
        "| row | counts | " + " | ".join(TERMS) + " | predicted | published |",
        "| --- | --- |" + " ---: |" * (len(TERMS) + 2),
    ]
    for s in scored:
        cells = " | ".join(f"{s.terms[t]:.2f}" for t in TERMS)
        lines.append(
            f"| {s.row['name']} | {s.row['counts']} | {cells} | {s.predicted_gib:.2f} | {s.published_gib:.2f} |"
        )
    return lines


def summary_lines(scored: list[Scored]) -> list[str]:
    def line(label: str, rows: list[Scored]) -> str:
        s = summary(rows)
        return (
            f"{label}: {s['rows']} rows, median |error| {s['median']:.1%}, worst ratio {s['worst']:.2f} "
            f"({s['worst_row'].row['name']})"
        )

    scoring = [s for s in scored if s.row.get("expressible", True)]
    out = [line("all rows", scoring)]
    for counts in COUNTS:
        rows = [s for s in scoring if s.row["counts"] == counts]
        if rows:
            out.append(line(f"counts {counts}", rows))
    for family in sorted({s.row["family"] for s in scoring}):
        out.append(line(f"family {family} (held out)", [s for s in scoring if s.row["family"] == family]))
    out.append(
        "leave-one-family-out: nothing in gpuplan is fitted on these rows, so each family's figures above are "
        "already its held-out score"
    )
    unfit = [s for s in scored if not s.fits]
    out.append(
        "does not fit on the GPU it ran on: "
        + (", ".join(f"{s.row['name']} ({s.predicted_gib:.1f} of {s.capacity_gib:.1f} GiB)" for s in unfit) or "none")
    )
    apart = [s for s in scored if not s.row.get("expressible", True)]
    if apart:
        out.append("not scored (expressible: false): " + ", ".join(f"{s.row['name']} {s.ratio:.2f}" for s in apart))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-median", type=float, help="exit 1 when the median |error| is above this (0.10 = 10 %%)")
    ap.add_argument("--max-worst", type=float, help="exit 1 when a scored ratio is above this or below its inverse")
    ap.add_argument("--terms", action="store_true", help="print each row's memory terms (GiB) instead of the table")
    args = ap.parse_args(argv)
    scored = evaluate_all(load_rows())
    print("\n".join(terms_table(scored) if args.terms else markdown(scored)))
    print()
    print("\n".join(summary_lines(scored)))
    overall = summary([s for s in scored if s.row.get("expressible", True)])
    failed = []
    if args.max_median is not None and overall["median"] > args.max_median:
        failed.append(f"median |error| {overall['median']:.1%} > {args.max_median:.1%}")
    worst = max(overall["worst"], 1.0 / overall["worst"])
    if args.max_worst is not None and worst > args.max_worst:
        failed.append(f"worst ratio {overall['worst']:.2f} beyond {args.max_worst:.2f}x")
    for reason in failed:
        print(f"FAIL: {reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
