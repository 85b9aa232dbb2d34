"""An answer says what its matmul efficiency rests on (physics/efficiency.py, explain/notes.py): on A100 the
base fitted on today's benchmark tables and what older whole runs reached; where no base is fitted, the form
factor's default; on Hopper, fitted on the published rows, nothing more to say."""

from __future__ import annotations

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.efficiency import FITTED_BASE

JOB = {"model": "llama-3.1-8b", "tokens": "2B", "seq_len": 4096, "global_batch": 64, "framework": "fsdp"}


def _notes(sku: str, assumptions: dict | None = None) -> list[str]:
    data = {"catalog": "default", "job": JOB, "assumptions": assumptions or {}}
    layout = CheckRequest(sku, 8, tp=1, pp=1, zero=3, micro_batch=2, recompute="full", framework="fsdp")
    notes = check(Problem.model_validate(expand_models(data)), layout).notes
    return [n for n in notes if n.startswith("matmul efficiency:")]


def test_an_a100_answer_names_its_fitted_base_and_what_older_whole_runs_reached():
    (note,) = _notes("A100-80GB")
    assert f"{FITTED_BASE['ampere']:.0%} of the 16-bit peak" in note
    assert "today's A100 benchmark tables" in note and "0.7-0.8x" in note
    assert "assumptions.matmul_efficiency" in note


def test_a_family_without_a_fitted_base_says_it_runs_at_the_default_and_a_stated_efficiency_says_nothing():
    (note,) = _notes("B200")
    assert "the SXM default, 50% of the 16-bit peak (no efficiency fitted for blackwell GPUs" in note
    assert _notes("B200", {"matmul_efficiency": 0.6}) == []
    assert _notes("H100-SXM") == []
