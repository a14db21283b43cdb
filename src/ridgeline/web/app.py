"""The explorer's JSON API: FastAPI routes over the analytic library, and the page.

Every route validates its body with a model of ``schemas``, calls the library and returns the
result's ``to_dict()``. Errors a user can cause never become a 500:

- a body or path parameter that breaks its schema: FastAPI's 422, naming the field;
- a ``RidgelineError`` from the library (unknown name, malformed config.json, impossible
  workload): the same 422 shape, ``loc`` naming the field the message names.

    GET  /api/accelerators            GET  /api/models            POST /api/models/parse
    GET  /api/accelerators/{name}     GET  /api/models/{name}
    POST /api/roofline   POST /api/kv   POST /api/questions   POST /api/compare
    POST /api/schedule   POST /api/flash                       (analytic.dataflow, .flash)
    POST /api/simulate   GET  /api/simulate/{id}               (sim, bounded, with progress)
    GET  /  (the page)   /static/...    /vendor/plotly.min.js     /openapi.json
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ridgeline import analytic as an
from ridgeline.analytic import dataflow, flash
from ridgeline.analytic.speed import quote_step
from ridgeline.errors import CapacityError, RidgelineError, UnknownNameError
from ridgeline.report.jsonable import plain_json as clean
from ridgeline.specs import (
    Accelerator,
    ModelSpec,
    accelerator_names,
    get_accelerator,
    get_model,
    model_names,
    parse_config,
)
from ridgeline.web.jobs import Jobs, plan
from ridgeline.web.schemas import (
    MAX_SIM_SECONDS,
    AcceleratorList,
    AcceleratorSummary,
    CompareBody,
    CompareOut,
    FlashBody,
    FlashOut,
    JobOut,
    KvBody,
    KvOut,
    ModelBody,
    ModelList,
    ModelSummary,
    QuestionsOut,
    RooflineOut,
    ScheduleBody,
    ScheduleOut,
    SimulateBody,
    WorkloadBody,
)

STATIC = Path(str(resources.files("ridgeline.web").joinpath("static")))
KV_CURVE_POINTS = 96


class FieldError(RidgelineError):
    """A library error attributed to one request field (``loc`` of the 422)."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


BODY_FIELDS = frozenset().union(
    *(b.model_fields for b in (KvBody, CompareBody, ScheduleBody, FlashBody, SimulateBody))
)


def _error_loc(message: str) -> list[str]:
    """``["body", field]`` when the library's message names a request field (``field batch:``)."""
    m = re.search(r"field '?([A-Za-z_][\w.]*)'?", message)
    return ["body", m.group(1)] if m and m.group(1) in BODY_FIELDS else ["body"]


def _unprocessable(loc: list[str], message: str) -> JSONResponse:
    detail = [{"loc": loc, "msg": message, "type": "value_error"}]
    return JSONResponse(status_code=422, content={"detail": detail})


async def _on_library_error(request: Request, exc: Exception) -> JSONResponse:
    loc = list(exc.loc) if isinstance(exc, FieldError) else _error_loc(str(exc))
    return _unprocessable(loc, str(exc))


# pydantic prefixes the message of a ValueError raised in a validator; a user reads only ours.
_PYDANTIC_PREFIX = re.compile(r"^(Value error|Assertion failed), ")


def clean_message(msg: str) -> str:
    """A validation message as a user should read it: ``Value error, batch must be ≥ 1`` →
    ``batch must be ≥ 1``."""
    return _PYDANTIC_PREFIX.sub("", msg)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 for a body that breaks its schema, with messages cleaned."""
    assert isinstance(exc, RequestValidationError)
    errors = [{**e, "msg": clean_message(str(e.get("msg", "")))} for e in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": jsonable_encoder(errors)})


async def _on_http_error(request: Request, exc: Exception) -> Response:
    """A body FastAPI cannot even decode (not UTF-8) is its 400; call it what it is, a 422."""
    if isinstance(exc, StarletteHTTPException) and exc.status_code == 400:
        return _unprocessable(["body"], f"the body cannot be read as JSON: {exc.detail}")
    assert isinstance(exc, StarletteHTTPException)
    return await http_exception_handler(request, exc)


def resolve_model(body: ModelBody) -> ModelSpec:
    """The uploaded config.json when there is one, else the catalog model."""
    if body.config is not None:
        try:
            return parse_config(body.config, body.config_name, "config.json")
        except RidgelineError as e:
            raise FieldError(("body", "config"), str(e)) from None
    return catalog_model(body.model, ("body", "model"))


def catalog_model(name: str, loc: tuple[str, ...]) -> ModelSpec:
    if name not in model_names():  # names only: a path would read a file on the server
        raise FieldError(loc, str(UnknownNameError("model", name, model_names())))
    return get_model(name)


def catalog_accelerator(name: str, loc: tuple[str, ...]) -> Accelerator:
    if name not in accelerator_names():
        raise FieldError(loc, str(UnknownNameError("accelerator", name, accelerator_names())))
    return get_accelerator(name)


def model_summary(m: ModelSpec) -> dict[str, Any]:
    return an.model_summary(m).to_dict()


def accelerator_summary(acc: Accelerator) -> dict[str, Any]:
    return an.accelerator_summary(acc).to_dict()


def _workload(body: WorkloadBody) -> tuple[ModelSpec, Accelerator]:
    acc = catalog_accelerator(body.accelerator, ("body", "accelerator"))
    try:
        acc.peak(body.act_dtype)
    except RidgelineError as e:
        raise FieldError(("body", "act_dtype"), str(e)) from None
    return resolve_model(body), acc


def roofline(body: WorkloadBody) -> dict[str, Any]:
    """A prefill step of ``prompt`` tokens and a decode step at ``context`` (``step_cost``)."""
    m, acc = _workload(body)
    dt = body.dtypes()
    prefill = an.Workload(an.Phase.PREFILL, body.batch, body.prompt, dtypes=dt)
    decode = an.Workload(an.Phase.DECODE, body.batch, body.context, dtypes=dt)
    (pre, pre_quote), (dec, dec_quote) = quote_step(m, acc, prefill), quote_step(m, acc, decode)
    return {
        "prefill": pre.to_dict(),
        "decode": dec.to_dict(),
        "prefill_speed": pre_quote.to_dict(),
        "decode_speed": dec_quote.to_dict(),
    }


def kv(body: KvBody) -> dict[str, Any]:
    """KV sizing (``kv_summary``) and the KV footprint over context for the page's plot."""
    m, acc = _workload(body)
    summary = an.kv_summary(m, body.batch, body.context, body.dtypes(), acc, body.reserve_fraction)
    max_context = summary.capacity.max_context if summary.capacity else None
    top = max(body.context, max_context or 0, 1024) * 4
    contexts, kv_bytes = an.kv_curve(m, body.batch, summary.dtypes.kv, top, KV_CURVE_POINTS)
    curve = {"context": contexts.tolist(), "kv_bytes": kv_bytes.tolist()}
    return {**summary.to_dict(), "curve": curve}


def questions(body: WorkloadBody) -> dict[str, Any]:
    """The five questions at the decode step, and what that step reads (``five_questions``)."""
    m, acc = _workload(body)
    dt = body.dtypes()
    w = an.Workload(an.Phase.DECODE, body.batch, body.context, dtypes=dt)
    reads = an.decode_reads(m, acc, body.batch, body.context, dt)
    return {**an.five_questions(m, acc, w).to_dict(), "decode_reads": reads.to_dict()}


def comparison(body: CompareBody) -> dict[str, Any]:
    """The five-architecture comparison (``compare``)."""
    m = resolve_model(body)
    accs = [catalog_accelerator(n, ("body", "accelerators")) for n in body.accelerators]
    return an.compare(m, accs, body.batch, body.context, body.prompt, body.dtypes()).to_dict()


def schedule(body: ScheduleBody) -> dict[str, Any]:
    """One step compiled and simulated on a scratchpad accelerator (``compile_schedule``)."""
    acc = catalog_accelerator(body.accelerator, ("body", "accelerator"))
    try:
        dataflow.core_of(acc, body.dtypes())  # a chip with nothing to schedule says so here
    except RidgelineError as e:
        raise FieldError(("body", "accelerator"), str(e)) from None
    w = an.Workload(an.Phase(body.phase), body.batch, body.context, dtypes=body.dtypes())
    opts = dataflow.ScheduleOptions(buffers=body.buffers, keep_events=False)
    return dataflow.compile_schedule(resolve_model(body), acc, w, options=opts).to_dict()


def flash_io(body: FlashBody) -> dict[str, Any]:
    """FlashAttention traffic against sequence length (``flash_for_model``)."""
    m = resolve_model(body)
    accs = tuple(catalog_accelerator(n, ("body", "accelerators")) for n in body.accelerators)
    return flash.flash_for_model(m.name, m.head_dim, m.num_heads, accs, body.context).to_dict()


def start_simulation(jobs: Jobs, body: SimulateBody) -> dict[str, Any]:
    """Queue a bounded ``simulate`` run; a model that leaves no room for KV is refused now."""
    acc = catalog_accelerator(body.accelerator, ("body", "accelerator"))
    model = resolve_model(body)
    try:
        cfg, requests = plan(body, model, acc)
    except CapacityError as e:
        raise FieldError(("body", "accelerator"), str(e)) from None
    return jobs.submit(cfg, requests).to_dict()


def _add_catalog(app: FastAPI) -> None:
    @app.get("/api/accelerators", response_model=AcceleratorList, tags=["catalog"])
    def list_accelerators() -> Any:
        """Every catalog accelerator: device level, capacity, bandwidth, peaks, ridge point."""
        return clean(
            {"accelerators": [accelerator_summary(get_accelerator(n)) for n in accelerator_names()]}
        )

    @app.get("/api/accelerators/{name}", response_model=AcceleratorSummary, tags=["catalog"])
    def show_accelerator(name: str) -> Any:
        """One catalog accelerator, with its memory levels fastest first."""
        return clean(accelerator_summary(catalog_accelerator(name, ("path", "name"))))

    @app.get("/api/models", response_model=ModelList, tags=["catalog"])
    def list_models() -> Any:
        """Every shipped model config: shapes, parameter counts, KV bytes per token (bf16)."""
        return clean({"models": [model_summary(get_model(n)) for n in model_names()]})

    @app.get("/api/models/{name}", response_model=ModelSummary, tags=["catalog"])
    def show_model(name: str) -> Any:
        """One shipped model config."""
        return clean(model_summary(catalog_model(name, ("path", "name"))))

    @app.post("/api/models/parse", response_model=ModelSummary, tags=["catalog"])
    def parse_model(body: ModelBody) -> Any:
        """Parse an uploaded config.json (``parse_config``) and count its parameters."""
        return clean(model_summary(resolve_model(body)))


def _add_analytic(app: FastAPI) -> None:
    @app.post("/api/roofline", response_model=RooflineOut, tags=["analytic"])
    def post_roofline(body: WorkloadBody) -> Any:
        """Prefill and decode steps on the roofline: per-op FLOPs and bytes, intensity, bound."""
        return clean(roofline(body))

    @app.post("/api/kv", response_model=KvOut, tags=["analytic"])
    def post_kv(body: KvBody) -> Any:
        """KV cache size, crossover with the weights, what fits the device, techniques."""
        return clean(kv(body))

    @app.post("/api/questions", response_model=QuestionsOut, tags=["analytic"])
    def post_questions(body: WorkloadBody) -> Any:
        """The five questions for the accelerator at the decode step."""
        return clean(questions(body))

    @app.post("/api/compare", response_model=CompareOut, tags=["analytic"])
    def post_compare(body: CompareBody) -> Any:
        """Five architectures side by side: the five questions, prefill and decode."""
        return clean(comparison(body))

    @app.post("/api/schedule", response_model=ScheduleOut, tags=["tiling"])
    def post_schedule(body: ScheduleBody) -> Any:
        """One step compiled for a scratchpad accelerator: per-op tiles, loads, time vs roofline."""
        return clean(schedule(body))

    @app.post("/api/flash", response_model=FlashOut, tags=["tiling"])
    def post_flash(body: FlashBody) -> Any:
        """FlashAttention HBM traffic against sequence length on each per-core scratchpad."""
        return clean(flash_io(body))


def _add_simulate(app: FastAPI, jobs: Jobs) -> None:
    @app.post("/api/simulate", response_model=JobOut, status_code=202, tags=["simulate"])
    def post_simulate(body: SimulateBody) -> Any:
        """Start a bounded serving simulation; poll ``/api/simulate/{id}`` for its progress."""
        return clean(start_simulation(jobs, body))

    @app.get("/api/simulate/{job_id}", response_model=JobOut, tags=["simulate"])
    def get_simulation(job_id: str) -> Any:
        """A simulation's progress (requests done of total) and, once done, its result."""
        job = jobs.get(job_id)
        if job is None:
            raise FieldError(("path", "job_id"), f"no simulation '{job_id}' (finished jobs expire)")
        return clean(job.to_dict())


def _add_page(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        return FileResponse(plotly_bundle(), media_type="text/javascript")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")


def plotly_bundle() -> Path:
    """plotly.js as bundled inside the installed ``plotly`` Python package."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:
        raise RidgelineError("the explorer needs plotly: pip install 'ridgeline[web]'")
    return Path(spec.origin).parent / "package_data" / "plotly.min.js"


def create_app(sim_time_limit_s: float = MAX_SIM_SECONDS) -> FastAPI:
    """The explorer: JSON API under ``/api``, OpenAPI at ``/openapi.json``, the page at ``/``.

    Args:
        sim_time_limit_s: wall time after which a simulation job is stopped.
    """
    jobs = Jobs(sim_time_limit_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        jobs.start()
        yield
        jobs.shutdown()

    app = FastAPI(
        lifespan=lifespan,
        title="ridgeline explorer",
        version="1",
        description="Where the time and memory of LLM inference go: the analytic views as JSON.",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN; the page loads nothing remote
        redoc_url=None,
    )
    app.add_exception_handler(RidgelineError, _on_library_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    _add_catalog(app)
    _add_analytic(app)
    _add_simulate(app, jobs)
    _add_page(app)
    return app
