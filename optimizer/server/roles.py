"""Jobs with roles (issue 52, docs/roles.md) as the service answers them: a body whose job has ``roles:`` mapped
to the calls the CLI makes for the same file, and nothing computed here.

``POST /v1/solve`` answers ``present.roles.solved``'s result as ``roles_data`` (what ``gpuplan solve JOB -f json``
prints for a role job); ``POST /v1/check`` takes the split as ``check.roles`` (``{"target": "3xRTX-PRO-6000",
"drafter": "1xRTX-PRO-6000"}``, each entry read by ``--role``'s parser, ``inputs.roles.parse_role_flag``) and
answers ``check_roles``' result; ``POST /v1/export`` writes the chosen split's launch per role
(``present.exports.roles``: kubernetes, slurm, skypilot; ``export.roles`` exports a hand-picked split), a GRPO job's
NeMo RL or verl launch (``present.exports.nemo_rl`` and ``verl``), other kinds refused with the CLI's reason. Bad
input: a ``JobError`` naming the body's field (422).
"""

from __future__ import annotations

from typing import Any

from .. import api
from ..errors import ArgumentError, GpuplanError, JobError
from ..inputs.roles import ROLE_NAMES, parse_role_flag, role_names
from ..inputs.schema import Catalog, Problem
from ..present import roles
from ..present.exports import Launcher
from ..present.exports.roles import GRPO_KINDS, ROLE_KINDS, no_role_meaning
from .bodies import SOURCE

EXAMPLE = '{"target": "3xRTX-PRO-6000", "drafter": "1xRTX-PRO-6000"}'


def _refused(reason: str, field: str) -> JobError:
    return JobError(reason, source=SOURCE, field=field)


def role_split(given: dict[str, str], field: str, workload: str | None = None) -> list[tuple[str, int, str]]:
    """``check.roles`` (``export.roles``): each role's GPUs as ``GPUSxSKU`` (a SKU or an offer by name), read
    as ``--role ROLE=GPUSxSKU`` is, under the names of the job's ``workload`` (drafter: target and drafter;
    distill: teacher and student; grpo: rollout and policy); each of the job's roles once."""
    names_given = role_names(workload)
    split = []
    for name, value in given.items():
        try:
            split.append(parse_role_flag(f"{name}={value}", workload))
        except ArgumentError:
            if name.strip().lower() not in names_given:
                reason = f"no role {name!r} in a {workload or 'drafter'} job; its roles are {' and '.join(names_given)}"
            else:
                reason = f"cannot read {value!r}; give the role's GPUs as GPUSxSKU (a GPU or an offer by name)"
            raise _refused(f"{reason}: {field}: {EXAMPLE}", f"{field}.{name}") from None
    slots = sorted(slot for slot, _, _ in split)
    if slots != sorted(ROLE_NAMES):
        got = ", ".join(sorted(given)) or "none"
        raise _refused(
            f"give each of the job's roles once, {' and '.join(names_given)} (got {got}): {field}: {EXAMPLE}",
            field,
        )
    return split


def with_roles(problem: Problem, field: str) -> None:
    """A role split given (``check.roles``, ``export.roles``) for a job with no ``roles:`` section: refused."""
    if problem.job.roles is None:
        instead = "check: {sku: B200, gpus: 8}" if field.startswith("check") else "export.plan, or none for the best"
        raise _refused(
            f"this job has no roles: section, so there is nothing to split; give {instead}, or add job.roles "
            "(docs/roles.md)",
            field,
        )


def _answered(problem: Problem, catalog: Catalog, split: dict[str, str] | None, field: str) -> roles.Answered:
    if split is None:
        return roles.solved(problem, catalog)
    requests = role_split(split, field, problem.job.roles.workload if problem.job.roles else None)
    try:
        result = api.check_roles(problem, requests, catalog=catalog)
    except GpuplanError as exc:
        # the split itself (no such GPU, the roles on two offers, no GPU for a role, more GPUs than a node), which
        # the library names as --role or not at all; an error of the job keeps its field
        if isinstance(exc, ArgumentError) or (exc.field is None and exc.source is None):
            raise _refused(exc.reason, field) from None
        raise
    return roles.Answered(result, problem, catalog, roles.Outputs())


def solve(problem: Problem, catalog: Catalog) -> dict:
    """``gpuplan solve JOB -f json`` on a job with roles: every offer and GPU count's best split, the chosen one."""
    return roles.roles_data(roles.solved(problem, catalog).result)


def check(problem: Problem, catalog: Catalog, split: dict[str, str], unused: set[str]) -> dict:
    """``gpuplan check JOB --role target=... --role drafter=... -f json``: ``split`` is ``check.roles``,
    ``unused`` the other ``check:`` fields the body set (a one-model layout: refused beside a split)."""
    with_roles(problem, "check.roles")
    if unused:
        first = sorted(unused)[0]
        raise _refused(
            f"check.roles gives each role's GPUs, and a role's layout is the job's (job.roles): drop {first}",
            f"check.{first}",
        )
    return roles.roles_data(_answered(problem, catalog, split, "check.roles").result)


def one_model_refused(problem: Problem, route: str) -> None:
    """The routes that plan one model on all the GPUs (options, the page) on a job with roles: refused with the
    routes that answer it."""
    if problem.job.roles is not None:
        raise _refused(
            f"this job has roles (job.roles: its GPUs split between the target's forward pass and the drafter's "
            f"training), and {route} plans one model on all of them; POST /v1/solve answers with every offer and "
            "GPU count's best split, POST /v1/check with check.roles checks a split (docs/roles.md)",
            "job.roles",
        )


def export(problem: Problem, catalog: Catalog, launcher: Launcher, given: Any) -> tuple[str, str]:
    """The launch per role of the job's best split, or of ``export.roles``' split, as ``gpuplan solve (check
    --role ...) JOB --export KIND`` writes it; and its file name (the kind's suffix)."""
    if launcher.kind not in ROLE_KINDS + GRPO_KINDS:
        raise _refused(no_role_meaning(given.kind), "export.kind")
    if given.plan is not None:
        raise _refused(
            "a job with roles exports a split, not a one-model plan: drop export.plan (the best split is exported) "
            f"or give export.roles: {EXAMPLE}",
            "export.plan",
        )
    try:
        roles.refuse_grpo_export(problem, launcher.kind)
    except GpuplanError as exc:
        raise _refused(exc.reason, "export") from None
    done = _answered(problem, catalog, given.roles, "export.roles")
    try:
        text = roles.launch_text(done, launcher.kind)
    except GpuplanError as exc:  # no plan runs: nothing to export
        raise _refused(exc.reason, "export") from None
    return text, f"{problem.job.name}-{launcher.kind}.{launcher.suffix}"
