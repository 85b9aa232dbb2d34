"""What ``gpuplan serve`` does for each request, without HTTP: bodies -> the Python API -> the CLI's JSON.

``Service`` holds what a process keeps between requests: each catalog parsed once (by name), the candidate
tables of recent problems (the same job with another time limit costs the solver alone) and their proven
answers (the same question again costs nothing), the pool of solver threads with its bound on waiting
requests, and the jobs of ``?async=true`` requests (``store``). Every answer is the
data ``gpuplan ... --format json`` prints for the same document; every bad input a ``GpuplanError`` located
at the request body (``bodies.located``) or at a query parameter (``QueryError``).
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import yaml

from .. import __version__, api
from ..errors import ArgumentError, GpuplanError, JobError, printable
from ..inputs import units
from ..inputs.bundled import bundled_catalog_names
from ..inputs.catalog import catalog_entries, offers_for, vendor_in
from ..inputs.files import load_catalog
from ..inputs.overrides import FRAMEWORK_CHOICES
from ..inputs.question import job_name_of, saved_document
from ..inputs.requests import CheckRequest
from ..inputs.schema import Catalog, Portfolio, Problem
from ..present import render, report
from ..present.answers import answer_data, model_rows
from ..present.exports import LAUNCHERS, export, find_launcher, unknown_kind
from ..results import Plan, SolveResult
from . import bodies, roles
from .bodies import SOURCE, CheckFields, ExportFields
from .job_fields import PAGE_JOB_FIELDS, measured_words
from .store import Busy, Job, JobStore, Kept


class QueryError(GpuplanError):
    """A bad query parameter (``?time_limit=``, ``?catalog=``, ``?workers=``): ``field`` is its name."""

    def __init__(self, message: str, *, field: str, source: str | None = "query") -> None:
        super().__init__(message, source=source, field=field)

    def _compose(self) -> str:
        return f"query parameter '{printable(self.field or '')}': {self.reason}"


@dataclass(frozen=True)
class Limits:
    """The service's bounds: on what one request may ask, and on how much it takes on at once."""

    max_body_bytes: int = bodies.MAX_BODY_BYTES
    body_timeout_s: float = 30.0  # to receive a body: a client trickling bytes holds no connection longer
    solvers: int = 2  # solves at once, each in a thread of the pool (CP-SAT itself uses several)
    # threads beyond the solvers that may read a request at once: a Hub model's config.json may take the Hub's
    # deadline (hub.HUB_DEADLINE_S) to come, and waiting for it holds no solver (two such requests had held both,
    # and an ordinary solve behind them waited 7 s)
    readers: int = 8
    max_waiting: int = 32  # requests queued for a solver beyond those running; 503 past it
    max_time_limit_s: float = 120.0  # a request answered in its own response
    max_job_time_limit_s: float = 600.0  # a job (?async=true), polled at GET /v1/jobs/{id}
    max_workers: int = 8  # CP-SAT workers a portfolio may ask for
    jobs_kept: int = 64  # finished jobs are dropped oldest first past this
    tables_kept: int = 4  # candidate tables of recent problems (the README's 70B job: 34 MB)
    answers_kept: int = 256  # proven answers of recent questions


# default time limits, as the CLI's --time-limit
SOLVE_TIME_LIMIT_S = 10.0
PORTFOLIO_TIME_LIMIT_S = 60.0

# check's library parameters as the body's fields (an ArgumentError names the parameter)
_CHECK_FIELDS = {name: f"check.{name}" for name in CheckFields.model_fields}
_EXPORT_FIELDS = {"export": "export.kind", "name": "export.kind", "kind": "export.kind"}


@dataclass
class Query:
    """The query parameters a planning route takes (the CLI's --time-limit, --catalog, --workers)."""

    time_limit: str | None = None
    catalog: str | None = None
    workers: int | None = None


def error_payload(exc: GpuplanError) -> dict:
    """A 422's body: the one paragraph ``gpuplan`` prints (without its ``error:``), the field and the reason."""
    return {"detail": printable(str(exc), "\n"), "field": exc.field, "reason": exc.reason}


class Service:
    """The planner behind the routes: catalogs and candidate tables kept between requests, a bounded pool of
    solver threads, and the jobs answered later."""

    def __init__(self, catalogs: Sequence[str] = (), limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._lock = threading.Lock()
        self._catalogs: dict[str, Catalog] = {}
        self._refs: dict[str, str] = {}  # catalog name -> how the CLI names it (a bundled name, or the path given)
        self._own: list[str] = []  # the catalogs given to gpuplan serve that are not bundled ones
        self.default_catalog = "default"
        bundled = bundled_catalog_names()
        for i, given in enumerate(catalogs):
            try:
                cat = load_catalog(given)
            except GpuplanError as exc:  # the name itself is wrong: the flag's error; inside the file: the file's
                raise (exc if exc.source else ArgumentError(exc.reason, field="catalog")) from None
            name = cat.name
            if given == name and name in bundled:  # a bundled catalog by its name
                self._catalogs[name], self._refs[name] = cat, name
            elif name in bundled or name in self._own:
                raise ArgumentError(
                    f"catalog {given!r} is named {name!r}, as {'a bundled one' if name in bundled else 'another'} is: "
                    "requests select catalogs by name, so give it its own (the file's 'name:')",
                    field="catalog",
                )
            else:
                self._catalogs[name], self._refs[name] = cat, given
                self._own.append(name)
            if i == 0:
                self.default_catalog = name  # for bodies that name none, as for a job file without 'catalog:'
        self._tables = Kept(self.limits.tables_kept)
        self._answers = Kept(self.limits.answers_kept)
        self._pool = ThreadPoolExecutor(self.limits.solvers + self.limits.readers, thread_name_prefix="gpuplan-solve")
        self._solving = threading.Semaphore(self.limits.solvers)  # held from a request's read to its end
        self._local = threading.local()
        self._waiting = 0
        self.jobs = JobStore(self.limits.jobs_kept)
        self._models: list[dict] | None = None

    # ------------------------------------------------------------------ the pool

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Run ``fn`` on a solver thread; ``Busy`` when more than ``max_waiting`` already wait for one."""
        with self._lock:
            if self._waiting >= self.limits.solvers + self.limits.max_waiting:
                raise Busy(f"{self._waiting} requests are running or waiting for a solver; try again shortly")
            self._waiting += 1

        def run() -> Any:
            self._local.pooled, self._local.solving = True, False
            try:
                return fn(*args, **kwargs)
            finally:
                if self._local.solving:
                    self._solving.release()
                self._local.pooled = self._local.solving = False

        try:
            future = self._pool.submit(run)
        except BaseException:
            self._release()
            raise
        future.add_done_callback(lambda _: self._release())
        return future

    def _begin_solving(self) -> None:
        """On a pool thread, once its request is read (its models expanded, a Hub's answer included): wait for
        one of the ``solvers`` places, kept until the request ends (``submit``'s ``run``)."""
        if getattr(self._local, "pooled", False) and not self._local.solving:
            self._solving.acquire()
            self._local.solving = True

    def _release(self) -> None:
        with self._lock:
            self._waiting -= 1

    @property
    def waiting(self) -> int:
        return self._waiting

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ catalogs, models

    def offered(self) -> list[str]:
        """The catalogs a body may name: the ones given to ``gpuplan serve``, then the bundled ones."""
        return self._own + bundled_catalog_names()

    def catalog(self, name: str) -> Catalog:
        """A catalog by name, parsed once per process."""
        with self._lock:
            if name in self._catalogs:
                return self._catalogs[name]
        cat = load_catalog(name)  # a bundled name (bodies.check_catalog has checked it)
        with self._lock:
            self._refs.setdefault(name, name)
            return self._catalogs.setdefault(name, cat)

    def catalogs(self) -> dict:
        rows = []
        for name in self.offered():
            cat = self.catalog(name)
            rows.append(
                {
                    "name": name,
                    "description": cat.description,
                    "offers": len(cat.offers),
                    "gpus": sorted({o.sku for o in cat.offers}),
                    "default": name == self.default_catalog,
                    "bundled": name not in self._own,
                }
            )
        return {"default": self.default_catalog, "catalogs": rows}

    def catalog_listing(self, name: str) -> dict:
        """What ``gpuplan catalog NAME -f json`` prints."""
        if name not in self.offered():
            raise JobError(f"unknown catalog {name!r}; this service offers {', '.join(self.offered())}", field="name")
        cat = self.catalog(name)
        return {"catalog": cat.name, "description": cat.description, "rows": render.catalog_rows(catalog_entries(cat))}

    def models(self) -> dict:
        """What ``gpuplan models -f json`` prints (presets read once)."""
        if self._models is None:
            self._models = model_rows()
        return {"models": self._models}

    def info(self) -> dict:
        limits = self.limits
        return {
            "version": __version__,
            "default_catalog": self.default_catalog,
            "kept": self.cache_counts(),
            "catalogs": self.offered(),
            "export_kinds": list(LAUNCHERS),
            "frameworks": list(FRAMEWORK_CHOICES),
            "limits": {
                "max_body_bytes": limits.max_body_bytes,
                "solvers": limits.solvers,
                "max_waiting": limits.max_waiting,
                "max_time_limit_s": limits.max_time_limit_s,
                "max_job_time_limit_s": limits.max_job_time_limit_s,
            },
        }

    # ------------------------------------------------------------------ requests

    def _time_limit(self, given: str | None, default: float, cap: float) -> float:
        if given is None:
            return min(default, cap)
        try:
            value = units.check_range(units.parse_time_limit_s(given), "time_limit", given)
        except GpuplanError as exc:
            raise QueryError(exc.reason, field="time_limit") from None
        if not value > 0:
            raise QueryError(f"must be a positive number of seconds (got {given!r})", field="time_limit")
        if value > cap:
            raise QueryError(
                f"at most {cap:g} s here (got {given!r}); a longer solve runs as a job: add async=true",
                field="time_limit",
            )
        return value

    def _catalog_for(self, query: Query, named: str | None) -> tuple[str, Catalog]:
        if query.catalog is not None and query.catalog not in self.offered():
            raise QueryError(
                f"unknown catalog {query.catalog!r}; this service offers {', '.join(self.offered())}", field="catalog"
            )
        name = query.catalog or named or self.default_catalog
        return name, self.catalog(name)

    def _job(self, raw: bytes, content_type: str | None, query: Query, extra: str | None = None):
        data = bodies.read_document(raw, content_type)
        problem, options = bodies.job_problem(data, self.offered(), extra)
        name, cat = self._catalog_for(query, problem.catalog)
        self._begin_solving()
        return data, problem, options, name, cat

    def table(self, problem: Problem, catalog: Catalog, name: str) -> api.CandidateTable:
        """The problem's candidate table, kept for the ``tables_kept`` most recent problems: the same question
        again (the page re-asking, a script polling) costs the solver alone."""
        key = (name, problem.model_dump_json())
        table = self._tables.get(key)
        if table is None:
            table = api.candidate_table(problem, catalog)
            self._tables.put(key, table)
        return table

    def answer(self, problem: Problem, catalog: Catalog, name: str, time_limit_s: float) -> SolveResult:
        """``api.plan`` of the problem; a proven answer (optimal, or infeasible) is kept for the same problem and
        time limit, since solving again could only give it again. One the time limit cut short (feasible,
        unknown) is not: another try may do better."""
        key = (name, problem.model_dump_json(), time_limit_s)
        kept = self._answers.get(key)
        if kept is not None:
            return kept.model_copy(deep=True)
        result = api.plan(problem, catalog=catalog, time_limit_s=time_limit_s, table=self.table(problem, catalog, name))
        if result.status in ("optimal", "infeasible"):
            self._answers.put(key, result.model_copy(deep=True))
        return result

    def cache_counts(self) -> dict:
        return {"tables": self._tables.counts(), "answers": self._answers.counts(), "catalogs": len(self._catalogs)}

    def _plan(
        self, raw: bytes, content_type: str | None, query: Query, cap: float
    ) -> tuple[Any, Problem, str, SolveResult, float]:
        limit = self._time_limit(query.time_limit, SOLVE_TIME_LIMIT_S, cap)
        data, problem, _, name, cat = self._job(raw, content_type, query)
        roles.one_model_refused(problem, "the page")
        return data, problem, name, self.answer(problem, cat, name, limit), limit

    def solve(self, raw: bytes, content_type: str | None = None, query: Query | None = None, **job: Any) -> dict:
        """``gpuplan solve JOB -f json``; a job with roles answers its split (``roles.solve``)."""
        query = query or Query()
        try:
            limit = self._time_limit(query.time_limit, SOLVE_TIME_LIMIT_S, self._cap(job))
            _, problem, _, name, cat = self._job(raw, content_type, query)
            if problem.job.roles is not None:  # GPUs split between roles (docs/roles.md)
                return roles.solve(problem, cat)
            return answer_data(self.answer(problem, cat, name, limit))
        except GpuplanError as exc:
            raise bodies.located(exc) from None

    def options(self, raw: bytes, content_type: str | None = None, query: Query | None = None) -> dict:
        """``gpuplan options JOB -f json``."""
        try:
            _, problem, _, name, cat = self._job(raw, content_type, query or Query())
            roles.one_model_refused(problem, "POST /v1/options")
            return answer_data(api.options(problem, catalog=cat, table=self.table(problem, cat, name)))
        except GpuplanError as exc:
            raise bodies.located(exc) from None

    def check(self, raw: bytes, content_type: str | None = None, query: Query | None = None) -> dict:
        """``gpuplan check JOB --sku ... --gpus ... -f json``, the flags as the body's ``check:`` mapping."""
        try:
            _, problem, given, _, cat = self._job(raw, content_type, query or Query(), extra="check")
            fields = bodies.route_fields(CheckFields, given, "check")
            if fields.roles is not None:  # a job with roles: each role's GPUs (docs/roles.md)
                return roles.check(problem, cat, fields.roles, _set_fields(fields, "roles"))
            _one_model_check(problem, fields)
            if fields.framework is not None and fields.framework not in FRAMEWORK_CHOICES:
                raise JobError(
                    f"must be one of {', '.join(FRAMEWORK_CHOICES)} (got {fields.framework!r})",
                    source=SOURCE,
                    field="check.framework",
                )
            layout = fields.model_dump(exclude={"sku", "gpus", "roles", "spot", "compare"})
            assert fields.sku is not None and fields.gpus is not None  # _one_model_check
            request = CheckRequest(fields.sku, fields.gpus, compare=fields.compare, spot=fields.spot, **layout)
            try:
                offers_for(cat, request.sku)
            except GpuplanError as exc:
                raise JobError(exc.reason, source=SOURCE, field="check.sku") from None
            result = api.check(problem, request, catalog=cat)
            return render.check_data(result)
        except GpuplanError as exc:
            raise bodies.located(exc, _CHECK_FIELDS) from None

    def portfolio(
        self,
        raw: bytes,
        content_type: str | None = None,
        query: Query | None = None,
        progress: Callable[[str], None] | None = None,
        **job: Any,
    ) -> dict:
        """``gpuplan portfolio FILE -f json``; the time limit counts from when a solver takes the request."""
        started = time.perf_counter()
        try:
            pf, cat, limit, workers = self._portfolio_request(raw, content_type, query or Query(), self._cap(job))
            result = api.portfolio(
                pf, catalog=cat, time_limit_s=limit, workers=workers, progress=progress, started=started
            )
            return answer_data(result)
        except GpuplanError as exc:
            raise bodies.located(exc) from None

    def _portfolio_request(
        self, raw: bytes, content_type: str | None, query: Query, cap: float
    ) -> tuple[Portfolio, Catalog, float, int]:
        limit = self._time_limit(query.time_limit, PORTFOLIO_TIME_LIMIT_S, cap)
        workers = 2 if query.workers is None else query.workers
        if not 1 <= workers <= self.limits.max_workers:
            raise QueryError(f"from 1 to {self.limits.max_workers} CP-SAT workers (got {workers})", field="workers")
        pf = bodies.portfolio_document(bodies.read_document(raw, content_type), self.offered())
        _, cat = self._catalog_for(query, pf.catalog)
        self._begin_solving()
        return pf, cat, limit, workers

    def check_request(self, kind: str, raw: bytes, content_type: str | None, query: Query) -> None:
        """A job's request read and checked before it is queued: bad input is a 422 at once, not a failed job."""
        cap = self.limits.max_job_time_limit_s
        try:
            if kind == "portfolio":
                self._portfolio_request(raw, content_type, query, cap)
            else:
                self._time_limit(query.time_limit, SOLVE_TIME_LIMIT_S, cap)
                self._job(raw, content_type, query)
        except GpuplanError as exc:
            raise bodies.located(exc) from None

    def export(self, raw: bytes, content_type: str | None = None, query: Query | None = None) -> tuple[str, str]:
        """The launcher config of a plan (the body's ``export.plan``, else the job's best plan), as
        ``gpuplan solve JOB --export KIND`` writes it; and a file name for it."""
        query = query or Query()
        try:
            _, problem, given, name, cat = self._job(raw, content_type, query, extra="export")
            fields = bodies.route_fields(ExportFields, given, "export")
            kind = fields.kind.lower()
            launcher = find_launcher(kind)
            if launcher is None:  # before any solve: export() would say the same after it
                raise JobError(unknown_kind(fields.kind), source=SOURCE, field="export.kind")
            if problem.job.roles is not None:  # a launch per role (docs/roles.md)
                return roles.export(problem, cat, launcher, fields)
            if fields.roles is not None:
                roles.with_roles(problem, "export.roles")
            if fields.plan is not None:
                plan = bodies.plan_of(fields.plan)
            else:
                limit = self._time_limit(query.time_limit, SOLVE_TIME_LIMIT_S, self.limits.max_time_limit_s)
                answer = self.answer(problem, cat, name, limit)
                if answer.best is None:
                    raise JobError(
                        "no plan satisfies the constraints, so there is nothing to export; POST /v1/solve says "
                        "what binds",
                        source=SOURCE,
                        field="export",
                    )
                plan = answer.best
            # as gpuplan solve --export KIND writes it, with the MoE dispatcher the plan's time assumed and the
            # vendor the catalog gives the plan's SKU
            text = export(
                plan,
                kind,
                job=problem.job,
                moe_dispatcher=problem.assumptions.moe_dispatcher,
                vendor=vendor_in(cat, plan.sku),
            )
            return text, f"{problem.job.name}-{launcher.kind}.{launcher.suffix}"
        except GpuplanError as exc:
            raise bodies.located(exc, _EXPORT_FIELDS) from None

    def page(self, raw: bytes, content_type: str | None = None, query: Query | None = None) -> dict:
        """A solve as the page shows it: the answer (``/v1/solve``'s JSON), the one-line verdict, the frontier
        and memory charts (``present.report``'s inline SVG), and the job file and command that ask it again."""
        query = query or Query()
        try:
            data, problem, name, result, limit = self._plan(raw, content_type, query, self.limits.max_time_limit_s)
        except GpuplanError as exc:
            raise bodies.located(exc) from None
        # the question as it was answered: the catalog used (a query's ?catalog= over the body's), as --save writes it
        document = saved_document(data, catalog=self._refs.get(name, name))
        flags = "" if limit == SOLVE_TIME_LIMIT_S else f" --time-limit {limit:g}"
        best = result.best
        own = best.strategy.framework if best is not None else None  # the plan's framework, if it has an export
        plans = {"best": best, **{f"frontier[{i}]": p for i, p in enumerate(result.frontier)}}
        plans |= {f"runners_up[{i}]": p for i, p in enumerate(result.runners_up)}
        return {
            "answer": answer_data(result),
            "headline": render.headline(result),
            "frontier_svg": report.frontier_svg(result, 720, 330),
            "memory_svg": report.memory_svg(best, 720, 70) if best is not None else "",
            "labels": {key: _label(p) for key, p in plans.items() if p is not None},
            "job_yaml": yaml.safe_dump(document, sort_keys=False, allow_unicode=True),
            "command": f"gpuplan solve job.yaml{flags}",
            "flags_command": flags_command(document, self._refs.get(name, name), flags),
            "export_kinds": list(LAUNCHERS),
            "default_export": own if own in LAUNCHERS else "skypilot",
        }

    # ------------------------------------------------------------------ jobs

    def _cap(self, job: dict) -> float:
        return self.limits.max_job_time_limit_s if job.get("as_job") else self.limits.max_time_limit_s

    def start_job(self, kind: str, raw: bytes, content_type: str | None, query: Query) -> Job:
        """Queue a solve or portfolio to answer later; its state at ``GET /v1/jobs/{id}``."""
        job = self.jobs.add(kind)

        def work() -> None:
            job.status, job.started = "running", time.time()
            job.progress.append("solving")
            try:
                if kind == "portfolio":
                    job.result = self.portfolio(raw, content_type, query, progress=job.progress.append, as_job=True)
                else:
                    job.result = self.solve(raw, content_type, query, as_job=True)
                job.status = "done"
                job.progress.append("done")
            except GpuplanError as exc:
                job.error, job.status = error_payload(exc), "failed"
            except Exception as exc:  # noqa: BLE001 - reported in the job, as the CLI reports a bug
                job.error = {"detail": f"internal error: {exc.__class__.__name__}: {exc}", "field": None, "reason": ""}
                job.status = "failed"
            finally:
                job.finished = time.time()

        try:
            self.submit(work)
        except Busy:
            self.jobs.drop(job)
            raise
        return job


# what a question without a job file can say in flags (gpuplan solve --model ... --deadline ...), beside the job
# fields of inputs.question.JOB_FLAGS
_CONSTRAINT_FLAGS = ("deadline", "budget", "max_nodes", "max_gpus", "deadline_quantile")
# the constraints whose flag has another name than the field (--headroom: constraints.memory_headroom)
_CONSTRAINT_FIELDS = {"memory_headroom": "--headroom"}


def flags_command(document: dict, catalog: str, extra: str = "") -> str | None:
    """The question as ``gpuplan solve`` flags alone, with no job file, where the document says nothing the
    flags cannot (a model by name, the job fields of ``JOB_FLAGS``, framework, compile, measurements, objective,
    deadline, budget, node and GPU caps, GPU types and memory, headroom, spot); else None, and the job file
    says it."""
    job, constraints = document.get("job"), document.get("constraints") or {}
    if set(document) - {"catalog", "objective", "job", "constraints"} or not isinstance(job, dict):
        return None
    if not isinstance(job.get("model"), str) or set(job) - {*PAGE_JOB_FIELDS, "name", "measured"}:
        return None
    measured = measured_words(job.get("measured"))
    if measured is None:  # a measurement --measured cannot write
        return None
    named = job_name_of(job["model"])  # the CLI names a job without a file after its model
    if job.get("name", named) != named:
        return None
    gpu = constraints.get("gpu") if isinstance(constraints, dict) else None
    if not isinstance(constraints, dict) or set(constraints) - {*_CONSTRAINT_FLAGS, *_CONSTRAINT_FIELDS, "gpu", "spot"}:
        return None
    if gpu is not None and not (
        isinstance(gpu, dict) and set(gpu) <= {"types", "min_memory"} and isinstance(gpu.get("types", []), list)
    ):
        return None
    words = ["gpuplan", "solve"]
    for key in PAGE_JOB_FIELDS:
        if key in job:
            flag, value = f"--{key.replace('_', '-')}", job[key]
            # a switch (--master-weights/--no-master-weights) takes no value: its flag or its --no- flag
            words += [flag if value else f"--no-{flag[2:]}"] if isinstance(value, bool) else [flag, str(value)]
    words += measured
    if "objective" in document:
        words += ["--objective", str(document["objective"])]
    for key in _CONSTRAINT_FLAGS:
        if key in constraints:
            words += [f"--{key.replace('_', '-')}", str(constraints[key])]
    for key, flag in _CONSTRAINT_FIELDS.items():
        if key in constraints:
            words += [flag, str(constraints[key])]
    if gpu and gpu.get("types"):
        words += ["--gpu-types", ",".join(map(str, gpu["types"]))]
    if gpu and "min_memory" in gpu:
        words += ["--min-memory", str(gpu["min_memory"])]
    if constraints.get("spot") in ("only", "never"):
        words.append("--spot" if constraints["spot"] == "only" else "--no-spot")
    if catalog != "default":
        words += ["--catalog", catalog]
    return " ".join(shlex.quote(word) for word in words) + extra


def _set_fields(fields: CheckFields, *but: str) -> set[str]:
    """The ``check:`` fields the body set to other than their defaults, but ``but``."""
    defaults = {name: info.default for name, info in CheckFields.model_fields.items()}
    return {name for name in fields.model_fields_set - set(but) if getattr(fields, name) != defaults[name]}


def _one_model_check(problem: Problem, fields: CheckFields) -> None:
    """``check:`` without ``roles``: a GPU and a count, on a job without roles."""
    if problem.job.roles is not None:
        raise JobError(
            "this job has roles (job.roles), so check takes each role's GPUs in place of sku and gpus: "
            f"check: {{roles: {roles.EXAMPLE}}} (docs/roles.md)",
            source=SOURCE,
            field="check.roles",
        )
    for name in ("sku", "gpus"):
        if getattr(fields, name) is None:
            raise JobError(
                f"check needs a GPU and a count ({name} missing): check: {{sku: B200, gpus: 8}}",
                source=SOURCE,
                field=f"check.{name}",
            )


def _label(plan: Plan) -> dict:
    return {"label": plan.label(), "strategy": render.strategy_text(plan)}
