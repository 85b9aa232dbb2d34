"""Role jobs as the role tests change them: a problem with its ``job.roles`` section updated, and a job file
whose roles section is replaced, read back through ``load_job`` (its errors are the ones a user sees)."""

from __future__ import annotations

from pathlib import Path

import yaml

from optimizer import load_job
from optimizer.inputs.schema import Problem


def with_roles(problem: Problem, **roles) -> Problem:
    """The problem with its job's roles section changed (placement, asynchronous, rollout, forward_passes ...)."""
    job = problem.job
    return problem.model_copy(update={"job": job.model_copy(update={"roles": job.roles.model_copy(update=roles)})})


def load_with_roles(job_file: Path, roles: dict, tmp_path: Path) -> Problem:
    """``job_file`` with its roles section replaced by ``roles``, written beside the test and read by load_job."""
    data = yaml.safe_load(job_file.read_text())
    data["catalog"] = str((job_file.parent / data["catalog"]).resolve())
    data["job"]["roles"] = roles
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_job(path)
