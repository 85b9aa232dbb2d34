"""The service's routes, one ``APIRouter`` per group, each route one call of the ``Service`` (a dependency).

``PAGE`` (the page at / and its files, ``/page/solve``), ``REFERENCE`` (health, info, catalogs, models,
schemas), ``PLANNING`` (solve, options, check, portfolio, export: a body read within its bounds and solved
on a solver thread, ``replies``) and ``JOBS`` (the asynchronous solves). ``ROUTERS`` lists them in the
order ``app.create_app`` includes them.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi import Query as Param
from fastapi.encoders import jsonable_encoder
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel

from .. import __version__
from ..errors import ArgumentError, GpuplanError, printable
from ..present.jsonschema import json_schema
from ..results import CheckResult, OptionsResult, PortfolioResult, SolveResult
from .bodies import CheckFields, ExportFields
from .job_fields import job_fields_data
from .replies import ErrorBody, JobView, error_reply, json_reply, read_body, solved
from .service import Query, QueryError, Service, error_payload

STATIC = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"app.js": "text/javascript", "app.css": "text/css"}

# The page loads its script and style from here and talks to this origin alone; nothing inline runs.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


async def the_service(request: Request) -> Service:
    """The app's service (``app.state.service``), which every route calls, once its query holds only the
    parameters the route takes, each once (``_query_taken``)."""
    _query_taken(request)
    service: Service = request.app.state.service
    return service


def _query_names(dependant: Any) -> set[str]:
    """The query parameters a route's dependant (FastAPI's ``Dependant``) and those it depends on take."""
    return {p.alias for p in dependant.query_params}.union(*(_query_names(d) for d in dependant.dependencies))


def _query_taken(request: Request) -> None:
    """A query parameter a POST route does not take, or one given twice, is refused (422) as a body's unknown
    field is: '?catalgo=x' was dropped without a word and the body's catalog planned on, and of '?catalog=a&catalog=b'
    one was kept."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or request.method != "POST":  # a GET reads nothing a parameter could change
        return
    taken = sorted(_query_names(dependant))
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name not in taken:
            takes = f"takes {', '.join(taken)}" if taken else "takes none"
            raise QueryError(f"not one of this route's: it {takes} (check the spelling)", field=name)
        if name in seen:
            raise QueryError("given twice; give it once", field=name)
        seen.add(name)


Served = Annotated[Service, Depends(the_service)]


def _body_spec(schema: dict, what: str) -> dict:
    return {
        "requestBody": {
            "required": True,
            "description": what,
            "content": {"application/json": {"schema": schema}, "application/yaml": {"schema": {"type": "string"}}},
        }
    }


def _with(key: str, model: type[BaseModel], what: str) -> dict:
    return {
        "type": "object",
        "description": f"A job document (GET /v1/schema/job) with '{key}:' beside 'job:'; {what}",
        "properties": {key: model.model_json_schema(), "job": {"$ref": "/v1/schema/job#/properties/job"}},
        "required": ["job", key],
    }


JOB_BODY = _body_spec({"$ref": "/v1/schema/job"}, "A job file's content (problems/*.yaml), as JSON or YAML.")
PORTFOLIO_BODY = _body_spec(
    {"$ref": "/v1/schema/portfolio"},
    "A portfolio file's content (problems/portfolio-*.yaml); 'file:' entries name bundled job files.",
)
CHECK_BODY = _body_spec(_with("check", CheckFields, "the flags of gpuplan check."), "A job and the layout to check.")


def export_body() -> dict:
    """``POST /v1/export``'s body as OpenAPI states it: its ``export.kind`` names the exports registry's kinds
    as they are now (``registry_bodies`` states them again for each app)."""
    return _body_spec(
        _with("export", ExportFields, "the launcher kind and the plan (default: the best)."), "A job and its export."
    )


EXPORT_BODY = export_body()
ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "Bad input: the message gpuplan prints, and the field"},
    413: {"model": ErrorBody, "description": "The body is larger than the service reads"},
    503: {"model": ErrorBody, "description": "Too many requests wait for a solver, or the server stops; retry"},
    401: {"model": ErrorBody, "description": "No token, or a wrong one: Authorization: Bearer TOKEN"},
    403: {"model": ErrorBody, "description": "An Origin other than the server's own or one it allows"},
    415: {"model": ErrorBody, "description": "A body that is not JSON or YAML by its Content-Type"},
    421: {"model": ErrorBody, "description": "A Host other than the server's address (DNS rebinding)"},
}


@functools.cache
def _static() -> tuple[str, dict[str, bytes]]:
    """The page and its files, read once."""
    index = (STATIC / "index.html").read_text(encoding="utf-8")
    return index, {name: (STATIC / name).read_bytes() for name in STATIC_FILES}


def _filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", name)[:120] or "export"


def _accepted(job: Any) -> Response:
    return json_reply(job.view(), 202, {"Location": f"/v1/jobs/{job.id}"})


# --------------------------------------------------------------------------- the page

PAGE = APIRouter()


@PAGE.get("/", response_class=HTMLResponse, include_in_schema=False)
async def page() -> Response:
    return HTMLResponse(_static()[0], headers=PAGE_HEADERS)


@PAGE.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    return Response(status_code=204)


@PAGE.get("/static/{name}", include_in_schema=False)
async def static_file(name: str) -> Response:
    files = _static()[1]
    if name not in files:
        return error_reply(f"no static file {printable(name)!r}", 404)
    return Response(files[name], media_type=STATIC_FILES[name], headers=PAGE_HEADERS)


@PAGE.post("/page/solve", tags=["page"], openapi_extra=JOB_BODY, responses=ERRORS)
async def page_solve(
    request: Request, service: Served, time_limit: str | None = None, catalog: str | None = None
) -> Response:
    """A solve as the page shows it: /v1/solve's answer with the verdict, the charts and the job file."""
    raw, media = await read_body(request, service.limits)
    query = Query(time_limit=time_limit, catalog=catalog)
    return json_reply(await solved(request, service, service.page, raw, media, query))


# --------------------------------------------------------------------------- reference data

REFERENCE = APIRouter()


@REFERENCE.get("/v1/health", tags=["service"])
async def health(service: Served) -> dict:
    return {"status": "ok", "version": __version__, "waiting": service.waiting}


@REFERENCE.get("/v1/info", tags=["service"])
async def info(service: Served) -> dict:
    """Version, catalogs, export kinds, frameworks and the service's limits."""
    return service.info()


@REFERENCE.get("/v1/catalogs", tags=["reference"])
def catalogs(service: Served) -> Response:
    """The catalogs a body may name: those given to gpuplan serve --catalog, then the bundled ones."""
    return json_reply(service.catalogs())


@REFERENCE.get("/v1/catalogs/{name}", tags=["reference"], responses={404: {"model": ErrorBody}})
def catalog_listing(name: str, service: Served) -> Response:
    """A catalog's GPUs and offers: what gpuplan catalog NAME --format json prints."""
    try:
        return json_reply(service.catalog_listing(name))
    except GpuplanError as exc:
        return json_reply(error_payload(exc), 404)


@REFERENCE.get("/v1/models", tags=["reference"])
def models(service: Served) -> Response:
    """The bundled model presets: what gpuplan models --format json prints."""
    return json_reply(service.models())


@REFERENCE.get("/v1/job-fields", tags=["reference"])
def job_fields() -> Response:
    """Every job setting a gpuplan solve flag sets (its flag, choices, default, unit and help): the page's
    job controls are built from it."""
    return json_reply(job_fields_data())


@REFERENCE.get("/v1/schema/{kind}", tags=["reference"], responses={404: {"model": ErrorBody}})
async def schema(kind: str) -> Response:
    """The JSON Schema of a document kind (job, portfolio, catalog): gpuplan schema KIND."""
    try:
        return json_reply(json_schema(kind))
    except ArgumentError as exc:
        return json_reply(error_payload(exc), 404)


# --------------------------------------------------------------------------- planning

PLANNING = APIRouter(tags=["planning"])


@PLANNING.post(
    "/v1/solve",
    openapi_extra=JOB_BODY,
    responses={200: {"model": SolveResult}, 202: {"model": JobView}, **ERRORS},
)
async def solve(
    request: Request,
    service: Served,
    time_limit: str | None = Param(None, description="CP-SAT time limit: seconds or 90s, 2m (default 10)."),
    catalog: str | None = Param(None, description="A catalog by name, over the body's (gpuplan --catalog)."),
    as_job: bool = Param(False, alias="async", description="Answer 202 with a job to poll at /v1/jobs/{id}."),
) -> Response:
    """The best plan, the cost/time frontier and the runners-up: gpuplan solve JOB --format json. Past its
    time limit the answer is 200 with status feasible or unknown. A job with roles (job.roles, docs/roles.md)
    is answered with its split: every offer and GPU count's best split and the chosen one, as the CLI's JSON."""
    raw, media = await read_body(request, service.limits)
    query = Query(time_limit=time_limit, catalog=catalog)
    if as_job:  # read and checked now (bad input: 422), solved later
        await solved(request, service, service.check_request, "solve", raw, media, query)
        return _accepted(service.start_job("solve", raw, media, query))
    return json_reply(await solved(request, service, service.solve, raw, media, query))


@PLANNING.post("/v1/options", openapi_extra=JOB_BODY, responses={200: {"model": OptionsResult}, **ERRORS})
async def options(request: Request, service: Served, catalog: str | None = None) -> Response:
    """Every hardware row with its best strategy, hours, cost and what rejected it: gpuplan options JOB."""
    raw, media = await read_body(request, service.limits)
    query = Query(catalog=catalog)
    return json_reply(await solved(request, service, service.options, raw, media, query))


@PLANNING.post("/v1/check", openapi_extra=CHECK_BODY, responses={200: {"model": CheckResult}, **ERRORS})
async def check(request: Request, service: Served, catalog: str | None = None) -> Response:
    """The verdict on a hand-picked layout (the body's check: mapping holds gpuplan check's flags: sku, gpus,
    nodes, tp, pp, zero, micro_batch, ...): gpuplan check JOB --format json. A job with roles takes each role's
    GPUs instead, check: {roles: {target: 3xRTX-PRO-6000, drafter: 1xRTX-PRO-6000}} (gpuplan check --role)."""
    raw, media = await read_body(request, service.limits)
    query = Query(catalog=catalog)
    return json_reply(await solved(request, service, service.check, raw, media, query))


@PLANNING.post(
    "/v1/portfolio",
    openapi_extra=PORTFOLIO_BODY,
    responses={200: {"model": PortfolioResult}, 202: {"model": JobView}, **ERRORS},
)
async def portfolio(
    request: Request,
    service: Served,
    time_limit: str | None = Param(None, description="Time limit for the whole solve (default 60 s)."),
    workers: int | None = Param(None, description="CP-SAT workers (default 2; 1 is deterministic)."),
    catalog: str | None = None,
    as_job: bool = Param(False, alias="async", description="Answer 202 with a job to poll at /v1/jobs/{id}."),
) -> Response:
    """Many jobs on shared pools within one budget: gpuplan portfolio FILE --format json."""
    raw, media = await read_body(request, service.limits)
    query = Query(time_limit=time_limit, catalog=catalog, workers=workers)
    if as_job:  # read and checked now (bad input: 422), solved later
        await solved(request, service, service.check_request, "portfolio", raw, media, query)
        return _accepted(service.start_job("portfolio", raw, media, query))
    return json_reply(await solved(request, service, service.portfolio, raw, media, query))


@PLANNING.post(
    "/v1/export",
    openapi_extra=EXPORT_BODY,
    responses={200: {"content": {"text/plain": {}}, "description": "The launcher config"}, **ERRORS},
)
async def export(
    request: Request, service: Served, time_limit: str | None = None, catalog: str | None = None
) -> Response:
    """A plan's launcher config (skypilot, kubernetes, deepspeed, ...): gpuplan solve JOB --export KIND. A job
    with roles: the best split's (export.roles: a given split's) launch per role, kubernetes, slurm or skypilot."""
    raw, media = await read_body(request, service.limits)
    query = Query(time_limit=time_limit, catalog=catalog)
    text, name = await solved(request, service, service.export, raw, media, query)
    disposition = f'inline; filename="{_filename(name)}"'
    return Response(text, media_type="text/plain; charset=utf-8", headers={"Content-Disposition": disposition})


# --------------------------------------------------------------------------- jobs

JOBS = APIRouter(tags=["jobs"])


@JOBS.get("/v1/jobs")
async def jobs(service: Served) -> Response:
    """The jobs this process keeps, without their answers."""
    return json_reply({"jobs": [job.view(with_result=False) for job in service.jobs.all()]})


@JOBS.get("/v1/jobs/{job_id}", responses={200: {"model": JobView}, 404: {"model": ErrorBody}})
async def job(job_id: str, service: Served) -> Response:
    """A job's status (queued, running, done, failed), progress lines, and its answer once done."""
    found = service.jobs.get(job_id)
    if found is None:
        kept = service.limits.jobs_kept
        detail = f"no job {printable(job_id)!r} here (jobs are kept while the server runs, the newest {kept})"
        return error_reply(detail, 404, detail)
    return json_reply(found.view())


ROUTERS = (PAGE, REFERENCE, PLANNING, JOBS)


def registry_bodies(openapi: dict[str, Any]) -> dict[str, Any]:
    """An app's OpenAPI document with ``POST /v1/export``'s body stated from the exports registry as it is when
    the document is written (a launcher registered since this module loaded included)."""
    openapi["paths"]["/v1/export"]["post"].update(jsonable_encoder(export_body(), exclude_none=True))  # as FastAPI
    return openapi
