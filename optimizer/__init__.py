"""gpuplan: which GPUs to rent for a training job, how many, how sharded, at what cost and time.

Public API (the CLI is a thin client of it)::

    from optimizer import load_job, load_catalog, check, plan, options, capacity, CheckRequest
    problem = load_job("problems/llama-70b-within-5-days.yaml")
    answer = plan(problem)            # SolveResult: status, best, frontier, runners_up
    split = solve_roles(load_job("problems/seed-003-drafter-roles.yaml"))  # a job with roles: RolesResult
    verdict = check(problem, CheckRequest("B200", 16, zero=3))

How the package is laid out (lowest layer first; imports only point down): ``errors``; ``inputs``
(schema, units, files, catalogs, presets, overrides); ``physics`` (pure formulas); ``results`` (the
output contract); ``planning`` (context, candidate table, calibration, plans); ``solver`` (CP-SAT);
``explain`` (sentences); ``api``; ``present`` (tables, reports, plots, exports); ``cli``.
See docs/design.md section 13.
"""

import importlib as _importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .api import capacity, check, options, plan, portfolio
    from .errors import ArgumentError, CatalogError, GpuplanError, JobError, UnitError
    from .inputs.files import load_catalog, load_job, load_portfolio
    from .inputs.overrides import apply_overrides
    from .inputs.requests import CheckRequest
    from .inputs.schema import Catalog, JobSpec, ModelSpec, Portfolio, Problem, Strategy
    from .results import (
        CapacityResult,
        CheckResult,
        MeasuredComparison,
        Option,
        OptionsResult,
        Plan,
        PortfolioResult,
        RunnerUp,
        SolveResult,
    )
    from .solver.roles import RolesResult, check_roles, solve_roles

# Where each public name lives. They load on first use, so that ``gpuplan`` starts with nothing but its
# interrupt handling in place (``launch``): a ^C in the second the solver's modules take to load is then an
# interruption like any other, not a traceback.
_WHERE = {
    **dict.fromkeys(("capacity", "check", "options", "plan", "portfolio"), ".api"),
    **dict.fromkeys(("ArgumentError", "CatalogError", "GpuplanError", "JobError", "UnitError"), ".errors"),
    **dict.fromkeys(("load_catalog", "load_job", "load_portfolio"), ".inputs.files"),
    "apply_overrides": ".inputs.overrides",
    **dict.fromkeys(("RolesResult", "check_roles", "solve_roles"), ".solver.roles"),
    "CheckRequest": ".inputs.requests",
    **dict.fromkeys(("Catalog", "JobSpec", "ModelSpec", "Portfolio", "Problem", "Strategy"), ".inputs.schema"),
    **dict.fromkeys(
        (
            "CapacityResult",
            "CheckResult",
            "MeasuredComparison",
            "Option",
            "OptionsResult",
            "Plan",
            "PortfolioResult",
            "RunnerUp",
            "SolveResult",
        ),
        ".results",
    ),
}


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "CapacityResult",
    "Catalog",
    "CatalogError",
    "CheckRequest",
    "CheckResult",
    "GpuplanError",
    "JobError",
    "JobSpec",
    "MeasuredComparison",
    "ModelSpec",
    "Option",
    "OptionsResult",
    "Plan",
    "Portfolio",
    "PortfolioResult",
    "Problem",
    "RolesResult",
    "RunnerUp",
    "SolveResult",
    "Strategy",
    "UnitError",
    "apply_overrides",
    "capacity",
    "check",
    "check_roles",
    "load_catalog",
    "load_job",
    "load_portfolio",
    "options",
    "plan",
    "portfolio",
    "solve_roles",
]
