"""The time limit ends in the best answer known, never in nothing (issue 40). An offer of 1,024 nodes builds
only the rows its global batch fits. Behaviour only: how long these take is in BENCHMARKS.md."""

from optimizer import load_catalog, plan
from optimizer.api import candidate_table
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Catalog, Offer, Problem
from optimizer.planning.candidates import SHOWN_UNBATCHED_LAYOUTS

HARDWARE = load_catalog("hardware").skus


def _problem(job: dict, **constraints) -> Problem:
    return Problem.model_validate(expand_models({"job": job, "constraints": constraints}))


def test_an_offer_of_1024_nodes_evaluates_the_rows_its_global_batch_fits():
    """``max_nodes: 1024`` (the documented limit) took 26 s and 1.7 GB: 997 of its node counts fit no layout
    of the global batch and were each evaluated without it (2.1 million layouts) only to be shown as rejected.
    Now only the first of them are, up to SHOWN_UNBATCHED_LAYOUTS; every row is still in the table."""
    offer = Offer(name="big-b200", sku="B200", price=5.5, gpus_per_node=8, max_nodes=1024)
    catalog = Catalog(name="big", skus=HARDWARE, offers=[offer])
    job = {"name": "sft", "model": {"preset": "llama-3.1-70b"}, "tokens": "20B", "seq_len": 4096, "global_batch": 256}
    problem = _problem(job, deadline="5d")
    table = candidate_table(problem, catalog)
    assert len(table.candidates) == 1024 + 3  # 1, 2, 4 GPUs on one node, and 1..1024 nodes of 8
    batch_rows = [c for c in table.candidates if c.rejected_by != "global_batch"]
    assert len(table.evaluation.row) <= SHOWN_UNBATCHED_LAYOUTS + 100_000  # the batch's rows: 16,000 layouts
    unshown = [c for c in table.candidates if c.rejected_by == "global_batch" and c.index < 0]
    assert len(unshown) > 800  # rejected by the batch, listed without numbers
    assert any(c.row.nodes == 1024 for c in batch_rows)  # 1,024 nodes of TP 8 x PP 4 x DP 256 fit the batch
    answer = plan(problem, catalog=catalog, table=table, time_limit_s=10)
    assert answer.status == "optimal" and answer.best is not None
