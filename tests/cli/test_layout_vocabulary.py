"""One declared layout vocabulary (inputs/layout_fields.py): every dimension ``gpuplan check`` takes is one
declaration, found by the same name and with the same range in the request, the service's body, the command's
options and the range checks; a toy declaration shows up in the faces made from the list."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json

import pytest
import typer
from paths import ROOT
from pydantic import ValidationError
from typer.testing import CliRunner

from optimizer.cli import app, checks, plan
from optimizer.cli.handling import handled
from optimizer.cli.shared import with_check_job_flags, with_options
from optimizer.cli_options import LAYOUT_OPTIONS, layout_option
from optimizer.errors import GpuplanError
from optimizer.inputs import units
from optimizer.inputs.layout_fields import LAYOUT, LAYOUT_FIELDS, LAYOUT_RANGES, LayoutField, layout_ranges, pinned
from optimizer.inputs.requests import CheckRequest
from optimizer.inputs.schema import Strategy
from optimizer.planning.check import Fixed
from optimizer.server.bodies import CheckFields, check_layout_model

runner = CliRunner()
NAMES = [f.name for f in LAYOUT_FIELDS]


def _help(width: int = 200) -> str:
    r = runner.invoke(app, ["check", "--help"], terminal_width=width)
    assert r.exit_code == 0, r.output
    return r.output


def test_every_dimension_is_a_request_field_a_body_field_and_a_flag():
    request = [f.name for f in dataclasses.fields(CheckRequest)]
    assert set(NAMES) <= set(request)
    assert set(request) - set(NAMES) == {"sku", "spot", "compare"}  # the GPU and two switches, not the layout
    assert set(NAMES) <= set(CheckFields.model_fields)
    assert list(LAYOUT_OPTIONS) == NAMES
    text = _help()
    assert all(f.flag in text for f in LAYOUT_FIELDS), text


def test_the_fixed_layout_is_the_dimensions_that_pin_it():
    assert sorted(f.name for f in dataclasses.fields(Fixed)) == sorted(pinned("layout"))
    request = CheckRequest("B200", 8, tp=2, zero=3, recompute="full", virtual_stages=2, offload="optimizer")
    assert Fixed.of(request) == Fixed(tp=2, zero=3, recompute="full", virtual_stages=2)
    assert set(pinned("job")) == {"offload", "framework"} and set(pinned("hardware")) == {"gpus", "nodes"}


def test_each_strategy_name_is_a_strategy_field():
    for f in LAYOUT_FIELDS:
        assert f.strategy is None or f.strategy in Strategy.model_fields, f.name
    assert LAYOUT["zero"].strategy == "zero_stage"


@pytest.mark.parametrize("field", [f for f in LAYOUT_FIELDS if f.limit is not None], ids=lambda f: f.name)
def test_each_range_is_the_same_on_every_face(field):
    limit = units.LIMITS[field.limit]
    assert checks._FLAG_RANGES[field.name] == LAYOUT_RANGES[field.name] == field.limit
    low, high = int(limit.low), int(limit.high)
    # the service: the ends pass, one past either end is refused with the range's own text
    assert getattr(CheckFields.model_validate({field.name: low}), field.name) == low
    assert getattr(CheckFields.model_validate({field.name: high}), field.name) == high
    for bad in (low - 1, high + 1):
        with pytest.raises(ValidationError, match="must be"):
            CheckFields.model_validate({field.name: bad})
        with pytest.raises(Exception, match="must be"):
            checks.check_flags(**{field.name: bad})
    checks.check_flags(**{field.name: low})
    checks.check_flags(**{field.name: high})
    # the flag leaves the range to check_flags (the error states it and why), so it sets no click bounds
    option = LAYOUT_OPTIONS[field.name][1]
    assert option.min is None and option.max is None


def test_a_closed_range_of_its_own_is_the_flags_and_the_bodys():
    zero = LAYOUT["zero"]
    assert zero.bounds == (0, 3)
    option = LAYOUT_OPTIONS["zero"][1]
    assert (option.min, option.max) == zero.bounds
    schema = CheckFields.model_json_schema()["properties"]["zero"]["anyOf"][0]
    assert (schema["minimum"], schema["maximum"]) == zero.bounds


def test_the_body_keeps_its_strict_numbers_and_choices():
    with pytest.raises(ValidationError):
        CheckFields.model_validate({"tp": "2"})  # a JSON number, not text
    with pytest.raises(ValidationError):
        CheckFields.model_validate({"offload": "sometimes"})
    with pytest.raises(ValidationError):
        CheckFields.model_validate({"framework": "jax"})
    assert CheckFields.model_validate({"recompute": "Layers:4"}).recompute == "layers:4"
    with pytest.raises(ValidationError, match="cannot read"):
        CheckFields.model_validate({"recompute": "some"})
    with pytest.raises(ValidationError, match="extra"):
        CheckFields.model_validate({"tpp": 2})


def test_every_description_is_the_flags_help():
    properties = CheckFields.model_json_schema()["properties"]
    for f in LAYOUT_FIELDS:
        assert properties[f.name]["description"] == f.help
        assert LAYOUT_OPTIONS[f.name][1].help.startswith(f.help)  # the flag's adds its range: [1<=x<=72]


def test_the_help_is_readable_at_80_columns():
    text = _help(80)
    assert max(map(len, text.splitlines())) <= 80
    assert "--virtual-stages <int>" in text and "--offload <none|optimizer|auto>" in text


# A dimension no face knows yet: declared once, it is in the body model, the ranges and the command's options.
TOY = LayoutField("toy_degree", "layout", "A toy parallel degree.", "toy", limit="gpus_per_node")


def test_a_toy_dimension_is_one_declaration():
    fields = (*LAYOUT_FIELDS, TOY)
    assert layout_ranges(fields)["toy_degree"] == "gpus_per_node"
    model = check_layout_model(fields)
    assert model.model_json_schema()["properties"]["toy_degree"]["description"] == "A toy parallel degree."
    assert model.model_validate({"toy_degree": 4}).toy_degree == 4  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="at most 72"):
        model.model_validate({"toy_degree": 73})
    with pytest.raises(ValidationError):
        model.model_validate({"toy_degree": "4"})


def test_a_toy_dimension_becomes_a_flag_of_check():
    """check's own function, given the declarations with the toy's, takes --toy-degree beside the others and
    hands it over in ``layout``, by its name."""
    raw = inspect.unwrap(plan.check)
    got: dict = {}

    def spy(**values):
        got.update(values["layout"])
        raise typer.Exit(0)

    toy_app = typer.Typer(rich_markup_mode=None)
    options = {**LAYOUT_OPTIONS, "toy_degree": layout_option(TOY)}
    command = functools.wraps(raw)(spy)
    toy_app.command("check")(handled(with_check_job_flags(with_options("layout", options)(command))))
    toy_app.command("other")(lambda: None)  # two commands: typer keeps the command's name
    r = runner.invoke(toy_app, ["check", "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "--toy-degree" in r.output and "A toy parallel degree." in r.output and "--tp" in r.output, r.output
    r = runner.invoke(toy_app, ["check", "--toy-degree", "4", "--tp", "2", "--offload", "optimizer"])
    assert r.exit_code == 0, r.output
    assert got == {**dict.fromkeys(NAMES), "tp": 2, "offload": "optimizer", "toy_degree": 4}


JOB = ROOT / "problems" / "seed-14b-full-finetune.yaml"


@pytest.fixture(scope="module")
def service():
    from optimizer.server.service import Service

    svc = Service()
    yield svc
    svc.close()


@pytest.mark.parametrize("field", [f for f in LAYOUT_FIELDS if f.limit is not None], ids=lambda f: f.name)
def test_the_flag_and_the_body_refuse_one_past_the_range_alike(service, field):
    """``gpuplan check --tp 73`` and ``POST /v1/check`` with ``tp: 73`` give the same reason, naming the flag and
    the field (both read the declared range)."""
    high = int(units.LIMITS[field.limit].high)
    flags = ["--sku", "B200", "--gpus", "8"] if field.name != "gpus" else ["--sku", "B200"]
    printed = runner.invoke(app, ["check", str(JOB), *flags, field.flag, str(high + 1)])
    assert printed.exit_code == 2, printed.output
    body = {"sku": "B200", "gpus": 8, field.name: high + 1}
    with pytest.raises(GpuplanError) as refused:
        service.check((JOB.read_text() + f"\ncheck: {json.dumps(body)}\n").encode(), "application/yaml")
    assert refused.value.field == f"check.{field.name}"
    assert printed.stderr.strip() == f"error: command line, option '{field.flag}': {refused.value.reason}"
