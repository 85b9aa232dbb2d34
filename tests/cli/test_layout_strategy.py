"""A layout dimension reaches the plan's Strategy and the JSON plan from its declaration (issue 50: "a test adds a
toy dimension and finds it in the CLI's check --help, the service's schema and the JSON plan"; the flag and the
service's body are tests/cli/test_layout_vocabulary.py's)."""

from __future__ import annotations

import json

from paths import PROBLEMS

from optimizer import CheckRequest, Strategy, check, load_job
from optimizer.inputs.layout_fields import LAYOUT_FIELDS, LayoutField, strategy_model
from optimizer.present.answers import json_text
from optimizer.present.render import check_data

TOY = LayoutField("toy_degree", "layout", "A toy parallel degree.", "toy", "toy_degree", limit="gpus_per_node")


def test_gpuplans_own_declarations_are_strategys_fields():
    assert strategy_model() is Strategy


def test_a_toy_dimension_reaches_the_json_plan_and_reads_back():
    model = strategy_model((*LAYOUT_FIELDS, TOY))
    assert model.model_fields["toy_degree"].description == "A toy parallel degree."
    result = check(load_job(PROBLEMS / "seed-14b-full-finetune.yaml"), CheckRequest("H100-SXM", 8, compare=False))
    strategy = model(**result.plan.strategy.model_dump(exclude={"global_batch"}), toy_degree=4)
    toy = result.model_copy(update={"plan": result.plan.model_copy(update={"strategy": strategy})})
    written = json.loads(json_text(check_data(toy)))["strategy"]
    assert written["toy_degree"] == 4 and written["tp"] == result.plan.strategy.tp
    assert model.model_validate(written).toy_degree == 4  # type: ignore[attr-defined]
    # without the toy, the plan's JSON is what it was
    assert "toy_degree" not in json.loads(json_text(check_data(result)))["strategy"]
