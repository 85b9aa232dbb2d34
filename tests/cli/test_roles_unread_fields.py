"""A job with roles refuses the settings its planning does not read (inputs/schema/problem.py ROLE_UNREAD), so an
answer never looks as if it weighed them: the drafter job of seed 003 gave a byte-identical answer with and without
each of these flags before they were refused. Each exits 2 naming the flag; a setting roles do read still plans."""

from __future__ import annotations

import pytest
from paths import ROOT
from typer.testing import CliRunner

from optimizer.cli import app

JOB = ROOT / "problems" / "seed-003-drafter-roles.yaml"
runner = CliRunner()


@pytest.mark.parametrize(
    "flag",
    [
        ["--loss", "fused"],
        ["--attention", "eager"],
        ["--variable-lengths"],
        ["--activation-offload"],
        ["--offload", "optimizer"],
        ["--compile"],
        ["--context-parallel", "all_to_all"],
        ["--optimizer-implementation", "foreach"],
    ],
)
def test_a_setting_roles_do_not_read_is_refused_by_its_flag(flag):
    result = runner.invoke(app, ["solve", str(JOB), *flag])
    assert result.exit_code == 2, result.output
    assert f"option '{flag[0]}'" in result.output and "plan the job without roles" in result.output
    assert "Traceback" not in result.output


def test_a_setting_roles_read_still_plans():
    result = runner.invoke(app, ["solve", str(JOB), "--epochs", "3"])
    assert result.exit_code == 0, result.output
