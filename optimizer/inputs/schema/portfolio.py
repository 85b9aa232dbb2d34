"""A portfolio file: jobs sharing pools of GPUs over a horizon, with windows, releases, deadlines and
``after:`` dependencies (``Pool``, ``PoolWindow``, ``PortfolioJob``, ``Portfolio``)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from ...errors import JobError
from .. import units
from .assumptions import Assumptions, GpuFilter
from .base import _Model
from .job import JobSpec
from .types import (
    Name,
    Seconds,
    Usd,
)


class PoolWindow(_Model):
    start_s: Seconds = Field(alias="from", ge=0, description="Offset from the portfolio start, e.g. 0d.")
    end_s: Seconds = Field(alias="to", gt=0, description="Offset from the portfolio start, e.g. 14d.")
    gpus: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> PoolWindow:
        if self.end_s <= self.start_s:
            raise ValueError("a window's 'to' must be after its 'from'")
        return self


class Pool(_Model):
    """GPUs of one offer available at once, optionally different inside time windows."""

    offer: Name = Field(description="Offer name, offer alias or SKU name/alias (as check --sku).")
    gpus: int = Field(ge=0, description="GPUs available concurrently outside any window.")
    windows: list[PoolWindow] = Field(default_factory=list)

    @model_validator(mode="after")
    def _windows_apart(self) -> Pool:
        ordered = sorted(self.windows, key=lambda w: w.start_s)
        for a, b in zip(ordered, ordered[1:]):
            if b.start_s < a.end_s:
                raise ValueError(
                    f"two windows overlap (from {units.fmt_duration(a.start_s)} to {units.fmt_duration(a.end_s)}, "
                    f"and from {units.fmt_duration(b.start_s)}); each time has one supply: make them not overlap"
                )
        return self


class PortfolioJob(_Model):
    name: Name
    file: str | None = Field(None, description="A job file (relative to the portfolio file).")
    job: JobSpec | None = None
    assumptions: Assumptions | None = None
    gpu: GpuFilter | None = None
    deadline_s: Seconds | None = Field(None, alias="deadline", gt=0, description="From the portfolio start.")
    release_s: Seconds = Field(0.0, alias="release", ge=0, description="Earliest start, from the portfolio start.")
    weight: float = Field(1.0, alias="priority", gt=0)
    required: bool = True
    after: list[Name] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _not_both_sources(cls, data: Any) -> Any:
        # before the inline job is validated on its own: a partial 'job:' beside 'file:' reads as an
        # override, and 'job.model: required field is missing' would point at the wrong fix
        if isinstance(data, dict) and data.get("file") is not None and data.get("job") is not None:
            raise ValueError(
                "give either 'file:' (a job file) or an inline 'job:', not both: to change a job file's fields, "
                "copy it and edit the copy, or write the whole job inline"
            )
        return data

    @model_validator(mode="after")
    def _one_source(self) -> PortfolioJob:
        if (self.file is None) == (self.job is None):
            raise ValueError("give either 'file:' (a job file) or an inline 'job:', not both or neither")
        if self.deadline_s is not None and self.deadline_s <= self.release_s:
            raise ValueError(
                f"job {self.name!r}: its deadline ({self.deadline_s / 3600:g}h from the portfolio start) is not after "
                f"its release ({self.release_s / 3600:g}h); both count from the portfolio start: move the deadline "
                "later or the release earlier"
            )
        return self


class Portfolio(_Model):
    catalog: str | None = None
    start: dt.date | None = None

    @field_validator("start", mode="before")
    @classmethod
    def _a_day(cls, value: Any) -> Any:
        if isinstance(value, dt.datetime) and value.timetz().replace(tzinfo=None) != dt.time():
            raise ValueError(
                "the portfolio's start is a day (its calendar counts from that midnight), not a time of day: "
                "write the date alone (2027-01-04) and give jobs a release (release: 10h) to start them later"
            )
        return value

    horizon_s: Seconds = Field(alias="horizon", gt=0)
    budget_usd: Usd | None = Field(None, alias="budget", gt=0)
    objective: Literal["cost", "makespan", "weighted_lateness"] = "cost"
    spot: Literal["allow", "never", "only"] = Field(
        "allow", description="Spot capacity for every job: allow (default), never or only."
    )
    time_step_s: Seconds = Field(3600.0, alias="time_step", gt=0, description="Schedule granularity (1h).")
    pools: list[Pool] = Field(default_factory=list)
    jobs: list[PortfolioJob] = Field(min_length=1)
    source_path: str | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _names_and_dependencies(self) -> Portfolio:
        names = [j.name for j in self.jobs]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"job names must be unique; repeated: {', '.join(dup)}")
        for job in self.jobs:
            for dep in job.after:
                if dep not in names:
                    raise ValueError(f"job {job.name!r} is 'after' unknown job {dep!r}")
                if dep == job.name:
                    raise ValueError(f"job {job.name!r} cannot come after itself")
        cycle = _after_cycle(self.jobs)
        if cycle:
            first = names.index(cycle[0])
            raise JobError(
                f"the 'after:' dependencies form a cycle ({' -> '.join(cycle)}), so none of these jobs could "
                "ever start; remove one of them from another's 'after:'",
                field=f"jobs[{first}].after",
            )
        return self

    @model_validator(mode="after")
    def _time_steps(self) -> Portfolio:
        """The horizon holds at least one time step and at most ``units.MAX_TIME_STEPS`` of them."""
        steps = self.horizon_s / self.time_step_s
        if steps < 1:
            raise JobError(
                f"time_step ({units.fmt_duration(self.time_step_s)}) is longer than the horizon "
                f"({units.fmt_duration(self.horizon_s)}), which leaves no step to schedule in; use a time_step "
                "of at most the horizon (1h is the default)",
                field="time_step",
            )
        if steps > units.MAX_TIME_STEPS:
            coarsest = units.fmt_duration(self.horizon_s / units.MAX_TIME_STEPS)
            raise JobError(
                f"horizon / time_step is {steps:,.0f} time steps, more than the {units.MAX_TIME_STEPS:,} the "
                f"scheduler takes (each step is a point it reasons about); use a time_step of at least {coarsest} "
                "(1h is the default)",
                field="time_step",
            )
        return self

    @model_validator(mode="after")
    def _calendar_holds_the_horizon(self) -> Portfolio:
        """Every date in the schedule (start + horizon) is one the calendar has (year 9999 at most)."""
        if self.start is not None:
            last = dt.datetime.combine(dt.date.max, dt.time())
            if self.horizon_s > (last - dt.datetime.combine(self.start, dt.time())).total_seconds():
                raise JobError(
                    f"start {self.start.isoformat()} plus the horizon ({units.fmt_duration(self.horizon_s)}) runs "
                    f"past {dt.date.max.isoformat()}, the last date there is; give a start date that leaves room "
                    "for the horizon",
                    field="start",
                )
        return self


def _after_cycle(jobs: list[PortfolioJob]) -> list[str]:
    """A cycle of ``after:`` dependencies as job names (first repeated last), or [] when there is none."""
    after = {job.name: job.after for job in jobs}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in after:
        if state.get(root):
            continue
        path, stack = [root], [iter(after[root])]
        state[root] = 1
        while stack:
            dep = next(stack[-1], None)
            if dep is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            elif not state.get(dep) and dep in after:
                state[dep] = 1
                path.append(dep)
                stack.append(iter(after[dep]))
    return []
