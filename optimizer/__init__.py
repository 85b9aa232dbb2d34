"""gpuplan: which GPUs to rent for a training job, how many, how sharded, at what cost and time.

Public API (the CLI is a thin client of it)::

    from optimizer import load_job, load_catalog, check, plan, options, capacity
    problem = load_job("problems/llama-70b-within-5-days.yaml")
    answer = plan(problem)            # SolveResult: status, best, frontier, runners_up
    verdict = check(problem, "B200", 16, zero=3)
"""

from .capacity import capacity
from .check import check
from .errors import CatalogError, GpuplanError, JobError, UnitError
from .loading import apply_overrides, load_catalog, load_job, load_portfolio
from .results import (CapacityResult, CheckResult, Option, OptionsResult, Plan, PortfolioResult, RunnerUp,
                      SolveResult)
from .schema import Catalog, JobSpec, Portfolio, Problem, Strategy
from .solver.plan import options, plan
from .solver.portfolio import portfolio

__version__ = "0.1.0"

__all__ = [
    "CapacityResult",
    "Catalog",
    "CatalogError",
    "CheckResult",
    "GpuplanError",
    "JobError",
    "JobSpec",
    "Option",
    "OptionsResult",
    "Plan",
    "Portfolio",
    "PortfolioResult",
    "Problem",
    "RunnerUp",
    "SolveResult",
    "Strategy",
    "UnitError",
    "apply_overrides",
    "capacity",
    "check",
    "load_catalog",
    "load_job",
    "load_portfolio",
    "options",
    "plan",
    "portfolio",
]
