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
    POST /api/simulate   GET  /api/simulate/{id}   POST /api/kv-manage   (sim, bounded)
    POST /api/plan       (plan: the cheapest deployment within targets, bounded)
    GET  /  (the page)   /static/...    /vendor/plotly.min.js     /openapi.json
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi import Path as FastApiPath
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ridgeline import analytic as an
from ridgeline.analytic import dataflow, flash
from ridgeline.analytic.deployment import check_deployment
from ridgeline.analytic.speed import quote_step
from ridgeline.errors import CapacityError, ConfigError, RidgelineError, UnknownNameError
from ridgeline.report.jsonable import plain_json as clean
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import LengthDist, Lengths, WorkloadSpec, generate
from ridgeline.sim.kv_manage import KVManageOptions, kv_manage
from ridgeline.specs import (
    Accelerator,
    ModelSpec,
    accelerator_names,
    get_accelerator,
    get_model,
    model_names,
    parse_config,
)
from ridgeline.web.cost import ESTIMATE_LIMIT_S, estimate
from ridgeline.web.guard import BodyLimit, on_invalid_body
from ridgeline.web.jobs import WORKER_MEMORY_BYTES, Jobs, plan
from ridgeline.web.pool import Outcome, Status, WorkerPool, run_async
from ridgeline.web.schemas import (
    MAX_PLAN_REQUESTS,
    MAX_SIM_SECONDS,
    AcceleratorList,
    AcceleratorSummary,
    CompareBody,
    CompareOut,
    FlashBody,
    FlashOut,
    JobOut,
    KvBody,
    KvManageBody,
    KvManageOut,
    KvOut,
    ModelBody,
    ModelList,
    ModelSummary,
    PlanBody,
    PlanOut,
    QuestionsOut,
    RooflineOut,
    ScheduleBody,
    ScheduleOut,
    SimulateBody,
    WorkloadBody,
)

STATIC = Path(str(resources.files("ridgeline.web").joinpath("static")))
KV_CURVE_POINTS = 96
WORKERS = 2  # analytic requests computed at once (the machines we serve from have 2+ cores)
REQUEST_TIME_LIMIT_S = 20.0  # an analytic request is answered within this, or stopped
MAX_BODY_BYTES = 1 << 20  # a config.json is a few kB; 1 MiB leaves room for hand-written ones
RETRY_AFTER_S = 5
OTHER_METHODS = ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]


UNSATISFIABLE = "unsatisfiable"  # the 422 type of a rule the schema cannot state (see schemas)


class FieldError(RidgelineError):
    """A library error attributed to one request field (``loc`` of the 422); ``kind`` is the
    error's ``type`` (``UNSATISFIABLE`` for a rule across fields, or on an uploaded config)."""

    def __init__(self, loc: tuple[str, ...], message: str, kind: str = "value_error") -> None:
        super().__init__(message)
        self.loc = loc
        self.kind = kind


BODY_FIELDS = frozenset().union(
    *(
        b.model_fields
        for b in (
            KvBody,
            CompareBody,
            ScheduleBody,
            FlashBody,
            SimulateBody,
            KvManageBody,
            PlanBody,
        )
    )
)


def error_loc(message: str) -> list[str]:
    """``["body", field]`` when the library's message names a request field (``field batch:``)."""
    m = re.search(r"field '?([A-Za-z_][\w.]*)'?", message)
    return ["body", m.group(1)] if m and m.group(1) in BODY_FIELDS else ["body"]


def _unprocessable(loc: list[str], message: str, kind: str = "value_error") -> JSONResponse:
    detail = [{"loc": loc, "msg": message, "type": kind}]
    return JSONResponse(status_code=422, content={"detail": detail})


async def _on_library_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, FieldError):
        return _unprocessable(list(exc.loc), str(exc), exc.kind)
    return _unprocessable(error_loc(str(exc)), str(exc))


async def _on_http_error(request: Request, exc: Exception) -> Response:
    """A body FastAPI cannot even decode (not UTF-8) is its 400; call it what it is, a 422.
    A body over the size limit is a 413 of the same shape."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:
        return _unprocessable(["body"], f"the body cannot be read as JSON: {exc.detail}")
    if exc.status_code == 413:
        detail = [{"loc": ["body"], "msg": str(exc.detail), "type": "value_error"}]
        return JSONResponse(status_code=413, content={"detail": detail})
    return await http_exception_handler(request, exc)


async def _on_busy(request: Request, exc: Exception) -> JSONResponse:
    detail = [{"loc": ["body"], "msg": str(exc), "type": "busy"}]
    headers = {"Retry-After": str(RETRY_AFTER_S)}
    return JSONResponse(status_code=429, content={"detail": detail}, headers=headers)


def resolve_model(body: ModelBody) -> ModelSpec:
    """The uploaded config.json when there is one, else the catalog model."""
    if body.config is not None:
        try:
            return parse_config(body.config, body.config_name, "config.json")
        except RidgelineError as e:
            raise FieldError(("body", "config"), str(e), UNSATISFIABLE) from None
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


def _check_split(model: ModelSpec, dep: an.Deployment) -> None:
    """A 422 naming the field when the split is impossible for the model."""
    try:
        check_deployment(model, dep)
    except ConfigError as e:
        field = "pipeline_parallel" if "pipeline_parallel" in str(e) else "tensor_parallel"
        raise FieldError(("body", field), str(e), UNSATISFIABLE) from None


def _workload(body: WorkloadBody) -> tuple[ModelSpec, Accelerator]:
    return resolve_model(body), catalog_accelerator(body.accelerator, ("body", "accelerator"))


def roofline(body: WorkloadBody) -> dict[str, Any]:
    """Prefill of ``prompt`` tokens and decode at ``context``, each priced in ``mode`` with its
    speed quote."""
    m, acc = _workload(body)
    pricing = an.Pricing.of(acc, body.mode, body.dtypes())
    out: dict[str, Any] = {"mode": pricing.mode.value, "pricing": pricing.to_dict()}
    for phase, ctx_len in ((an.Phase.PREFILL, body.prompt), (an.Phase.DECODE, body.context)):
        cost, quote = quote_step(m, pricing, pricing.workload(phase, body.batch, ctx_len))
        out |= {phase.value: cost.to_dict(), f"{phase.value}_speed": quote.to_dict()}
    return out


def kv(body: KvBody) -> dict[str, Any]:
    """KV sizing (``kv_summary``: what fits under the KV-pool rule) and the KV footprint over
    context for the page's plot."""
    m, acc = _workload(body)
    target: Accelerator | an.Deployment = acc
    if body.tensor_parallel is not None or body.pipeline_parallel is not None:
        target = an.Deployment(acc, body.tensor_parallel or 1, body.pipeline_parallel or 1)
        _check_split(m, target)
    rule = an.MemoryRule(body.memory_utilization)
    summary = an.kv_summary(m, body.batch, body.context, body.dtypes(), target, rule)
    max_context = summary.fit.max_context if summary.fit else None
    top = max(body.context, max_context or 0, 1024) * 4
    contexts, kv_bytes = an.kv_curve(m, body.batch, summary.dtypes.kv, top, KV_CURVE_POINTS)
    curve = {"context": contexts.tolist(), "kv_bytes": kv_bytes.tolist()}
    return {**summary.to_dict(), "curve": curve}


def questions(body: WorkloadBody) -> dict[str, Any]:
    """The five questions at the decode step, and what that step reads (``five_questions``)."""
    m, acc = _workload(body)
    dt = body.dtypes()
    pricing = an.Pricing.of(acc, body.mode, dt)
    w = pricing.workload(an.Phase.DECODE, body.batch, body.context)
    reads = an.decode_reads(m, acc, body.batch, body.context, dt)
    return {**an.five_questions(m, pricing, w).to_dict(), "decode_reads": reads.to_dict()}


def comparison(body: CompareBody) -> dict[str, Any]:
    """The five-architecture comparison (``compare``)."""
    m = resolve_model(body)
    catalog_accelerator(body.accelerator, ("body", "accelerator"))  # unused here, still checked
    accs = [catalog_accelerator(n, ("body", "accelerators")) for n in body.accelerators]
    cmp = an.compare(m, accs, body.batch, body.context, body.prompt, body.dtypes(), body.mode)
    return cmp.to_dict()


def schedule(body: ScheduleBody) -> dict[str, Any]:
    """One step compiled and simulated on a scratchpad accelerator (``compile_schedule``)."""
    acc = catalog_accelerator(body.accelerator, ("body", "accelerator"))
    try:
        dataflow.core_of(acc, body.dtypes())  # a chip with nothing to schedule says so here
    except RidgelineError as e:
        raise FieldError(("body", "accelerator"), str(e), UNSATISFIABLE) from None
    pricing = an.Pricing.of(acc, body.mode, body.dtypes())
    w = pricing.workload(an.Phase(body.phase), body.batch, body.context)
    eff = pricing.calibration.bandwidth_efficiency
    opts = dataflow.ScheduleOptions(
        buffers=body.buffers, keep_events=False, bandwidth_efficiency=eff
    )
    s = dataflow.compile_schedule(resolve_model(body), acc, w, options=opts)
    return {**s.to_dict(), "mode": pricing.mode.value, "pricing": pricing.to_dict()}


def flash_io(body: FlashBody) -> dict[str, Any]:
    """FlashAttention traffic against sequence length (``flash_for_model``)."""
    m = resolve_model(body)
    accs = tuple(catalog_accelerator(n, ("body", "accelerators")) for n in body.accelerators)
    return flash.flash_for_model(m.name, m.head_dim, m.num_heads, accs, body.context).to_dict()


def kv_management(body: KvManageBody) -> dict[str, Any]:
    """The KV cache under each architecture's orchestrator (``sim.kv_manage``)."""
    accs = [catalog_accelerator(n, ("body", "accelerators")).name for n in body.accelerators]
    spec = WorkloadSpec(
        num_requests=body.num_requests,
        rate_per_s=body.rate_per_s,
        prompt=Lengths(LengthDist.LOGNORMAL, body.prompt_len),
        output=Lengths(LengthDist.LOGNORMAL, body.output_len),
        num_prefixes=body.prefixes,
        prefix_len=body.prefix_len if body.prefixes else 0,
    )
    sched = SchedulerConfig(max_num_batched_tokens=512, max_model_len=body.max_model_len)
    label = f"{body.num_requests} requests at {body.rate_per_s}/s"
    opts = KVManageOptions(sched, mode=body.mode)
    try:
        return kv_manage(resolve_model(body), generate(spec), opts, accs, label).to_dict()
    except ConfigError as e:  # lengths against max_model_len: a rule the schema cannot state
        raise FieldError(("body", "max_model_len"), str(e), UNSATISFIABLE) from None


def plan_view(body: PlanBody) -> dict[str, Any]:
    """A bounded ``ridgeline plan`` (``plan.run_plan``), its simulations in this process."""
    from ridgeline.plan import PlanRequest, Targets, run_plan
    from ridgeline.plan.request import WorkloadChoice
    from ridgeline.sweep.backends import LocalBackend

    accs = tuple(catalog_accelerator(n, ("body", "accelerators")) for n in body.accelerators)
    choice = WorkloadChoice(
        body.isl, body.osl, duration_s=body.seconds, max_requests=MAX_PLAN_REQUESTS
    )
    workload = choice.spec()
    req = PlanRequest(
        model=resolve_model(body),
        workload=workload,
        rate_rps=body.rate_rps,
        targets=Targets(body.ttft_s, body.tpot_s, body.percentile),
        accelerators=accs,
        max_chips=body.max_chips,
        weight_dtypes=None if body.weight_dtypes is None else tuple(body.weight_dtypes),
        simulated=body.simulated,
    )
    try:
        return run_plan(req, LocalBackend(1)).to_dict()
    except ConfigError as e:  # a format the chip lacks, a split the model refuses: across fields
        raise FieldError(("body", "weight_dtypes"), str(e), UNSATISFIABLE) from None


def start_simulation(jobs: Jobs, body: SimulateBody) -> dict[str, Any]:
    """Queue a bounded ``simulate`` run; a model that leaves no room for KV is refused now."""
    acc = catalog_accelerator(body.accelerator, ("body", "accelerator"))
    model = resolve_model(body)
    _check_split(model, an.Deployment(acc, body.tensor_parallel, body.pipeline_parallel))
    try:
        plan(body, model, acc)
    except CapacityError as e:
        raise FieldError(("body", "accelerator"), str(e), UNSATISFIABLE) from None
    return jobs.submit(body).to_dict()


@cache
def accelerator_list() -> dict[str, Any]:
    """``GET /api/accelerators``, computed once (the catalog does not change while serving)."""
    return clean(
        {"accelerators": [accelerator_summary(get_accelerator(n)) for n in accelerator_names()]}
    )


@cache
def model_list() -> dict[str, Any]:
    """``GET /api/models``, computed once."""
    return clean({"models": [model_summary(get_model(n)) for n in model_names()]})


class TooBusy(RidgelineError):
    """No worker came free within the request's deadline (a 429 with ``Retry-After``)."""


BUSY_RESPONSES: dict[int | str, dict[str, Any]] = {
    429: {"description": "no worker came free within the request's deadline; retry later"},
    413: {"description": "the body is larger than the explorer reads"},
}


class Compute:
    """Runs a request's view in a worker process (``web.pool``) within its deadline, after
    checking its estimated cost (``web.cost``)."""

    def __init__(self, pool: WorkerPool, time_limit_s: float) -> None:
        self.pool = pool
        self.time_limit_s = time_limit_s

    def start(self) -> None:
        """Take requests again after a shutdown (an app's lifespan may run more than once)."""
        if self.pool.closed:
            self.pool = WorkerPool(self.pool.size, self.pool.max_bytes)

    async def __call__(self, request: Request, kind: str, body: ModelBody) -> Any:
        guess = estimate(kind, body, resolve_model(body))
        if guess.seconds > ESTIMATE_LIMIT_S:
            where = ("body", "config") if body.config is not None else ("body",)
            raise FieldError(
                where,
                f"about {guess.seconds:.0f} s of work ({guess.driver}) is more than the explorer "
                f"does for one request ({ESTIMATE_LIMIT_S:g} s); the CLI runs it",
                UNSATISFIABLE,
            )
        payload = body.model_dump(mode="json")
        outcome = await run_async(
            self.pool, kind, payload, self.time_limit_s, request.is_disconnected
        )
        return _answer(outcome, self.time_limit_s)


def _answer(outcome: Outcome, time_limit_s: float) -> Any:
    """A task's result, or the error its outcome calls for."""
    if outcome.status is Status.OK:
        return outcome.result
    if outcome.status is Status.ERROR:
        raise FieldError(outcome.loc, outcome.message, outcome.kind)
    if outcome.status is Status.BUSY:
        raise TooBusy(f"every worker stayed busy for {time_limit_s:g} s: retry later")
    if outcome.status is Status.DEADLINE:
        raise FieldError(
            ("body",),
            f"stopped after {time_limit_s:g} s: ask for less, or use the CLI",
            UNSATISFIABLE,
        )
    if outcome.status is Status.CANCELLED:
        raise TooBusy("the request was cancelled (the explorer is stopping)")
    raise RuntimeError(outcome.message)  # a bug in the library: a 500 with its message


AcceleratorPath = Annotated[
    str,
    FastApiPath(
        description="a catalog accelerator", json_schema_extra={"enum": accelerator_names()}
    ),
]
ModelPath = Annotated[
    str, FastApiPath(description="a catalog model", json_schema_extra={"enum": model_names()})
]


def _add_catalog(app: FastAPI) -> None:
    @app.get("/api/accelerators", response_model=AcceleratorList, tags=["catalog"])
    def list_accelerators() -> Any:
        """Every catalog accelerator: device level, capacity, bandwidth, peaks, ridge point."""
        return accelerator_list()

    @app.get("/api/accelerators/{name}", response_model=AcceleratorSummary, tags=["catalog"])
    def show_accelerator(name: AcceleratorPath) -> Any:
        """One catalog accelerator, with its memory levels fastest first."""
        catalog_accelerator(name, ("path", "name"))
        return next(a for a in accelerator_list()["accelerators"] if a["name"] == name)

    @app.get("/api/models", response_model=ModelList, tags=["catalog"])
    def list_models() -> Any:
        """Every shipped model config: shapes, parameter counts, KV bytes per token (bf16)."""
        return model_list()

    # NOTE: before /api/models/{name}, which also matches this path: a method it does not
    # take is then answered with this route's Allow header
    @app.post("/api/models/parse", response_model=ModelSummary, tags=["catalog"])
    def parse_model(body: ModelBody) -> Any:
        """Parse an uploaded config.json (``parse_config``) and count its parameters."""
        return clean(model_summary(resolve_model(body)))

    @app.api_route("/api/models/parse", methods=OTHER_METHODS, include_in_schema=False)
    def parse_model_other_methods() -> Response:
        """Not a model named "parse": any method but POST is a 405 (``/api/models/{name}``
        would otherwise answer a GET with an unknown model)."""
        return Response(status_code=405, headers={"Allow": "POST"})

    @app.get("/api/models/{name}", response_model=ModelSummary, tags=["catalog"])
    def show_model(name: ModelPath) -> Any:
        """One shipped model config."""
        catalog_model(name, ("path", "name"))
        return next(m for m in model_list()["models"] if m["name"] == name)


def _add_api(app: FastAPI, compute: Compute) -> None:
    extra: dict[str, Any] = {"responses": BUSY_RESPONSES}

    @app.post("/api/roofline", response_model=RooflineOut, tags=["analytic"], **extra)
    async def post_roofline(body: WorkloadBody, request: Request) -> Any:
        """Prefill and decode steps on the roofline: per-op FLOPs and bytes, intensity, bound."""
        return await compute(request, "roofline", body)

    @app.post("/api/kv", response_model=KvOut, tags=["analytic"], **extra)
    async def post_kv(body: KvBody, request: Request) -> Any:
        """KV cache size, crossover with the weights, what fits the device, techniques."""
        return await compute(request, "kv", body)

    @app.post("/api/questions", response_model=QuestionsOut, tags=["analytic"], **extra)
    async def post_questions(body: WorkloadBody, request: Request) -> Any:
        """The five questions for the accelerator at the decode step."""
        return await compute(request, "questions", body)

    @app.post("/api/compare", response_model=CompareOut, tags=["analytic"], **extra)
    async def post_compare(body: CompareBody, request: Request) -> Any:
        """Five architectures side by side: the five questions, prefill and decode."""
        return await compute(request, "compare", body)

    @app.post("/api/schedule", response_model=ScheduleOut, tags=["tiling"], **extra)
    async def post_schedule(body: ScheduleBody, request: Request) -> Any:
        """One step compiled for a scratchpad accelerator: per-op tiles, loads, time vs roofline."""
        return await compute(request, "schedule", body)

    @app.post("/api/plan", response_model=PlanOut, tags=["plan"], **extra)
    async def post_plan(body: PlanBody, request: Request) -> Any:
        """The cheapest deployment that meets TTFT and TPOT targets on a few accelerators:
        winners with intervals, the Pareto front, the winner's engine command lines."""
        return await compute(request, "plan", body)

    @app.post("/api/flash", response_model=FlashOut, tags=["tiling"], **extra)
    async def post_flash(body: FlashBody, request: Request) -> Any:
        """FlashAttention HBM traffic against sequence length on each per-core scratchpad."""
        return await compute(request, "flash", body)


def _add_simulate(app: FastAPI, jobs: Jobs) -> None:
    @app.post("/api/kv-manage", response_model=KvManageOut, tags=["simulate"])
    def post_kv_manage(body: KvManageBody) -> Any:
        """Who manages the KV cache on each architecture; the seven techniques' effects."""
        return clean(kv_management(body))

    @app.post(
        "/api/simulate",
        response_model=JobOut,
        status_code=202,
        tags=["simulate"],
        responses={413: BUSY_RESPONSES[413]},
    )
    def post_simulate(body: SimulateBody) -> Any:
        """Start a bounded serving simulation; poll ``/api/simulate/{id}`` for its progress."""
        return clean(start_simulation(jobs, body))

    @app.get(
        "/api/simulate/{job_id}",
        response_model=JobOut,
        tags=["simulate"],
        responses={404: {"description": "no such simulation (finished jobs expire)"}},
    )
    def get_simulation(job_id: str) -> Any:
        """A simulation's progress (requests done of total) and, once done, its result."""
        job = jobs.get(job_id)
        if job is None:
            detail = [
                {
                    "loc": ["path", "job_id"],
                    "msg": f"no simulation {job_id!r} (finished jobs expire)",
                    "type": "not_found",
                }
            ]
            return JSONResponse(status_code=404, content={"detail": detail})
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


def create_app(
    sim_time_limit_s: float = MAX_SIM_SECONDS,
    request_time_limit_s: float = REQUEST_TIME_LIMIT_S,
    workers: int = WORKERS,
) -> FastAPI:
    """The explorer: JSON API under ``/api``, OpenAPI at ``/openapi.json``, the page at ``/``.

    Args:
        sim_time_limit_s: wall time after which a simulation job is stopped.
        request_time_limit_s: wall time within which an analytic request is answered (waiting
            for a worker included) or stopped.
        workers: worker processes for analytic requests (simulation jobs have their own).
    """
    jobs = Jobs(sim_time_limit_s)
    compute = Compute(WorkerPool(workers, WORKER_MEMORY_BYTES), request_time_limit_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        jobs.start()
        compute.start()
        yield
        compute.pool.close()
        jobs.shutdown()

    app = FastAPI(
        lifespan=lifespan,
        title="ridgeline explorer",
        version="1",
        description="Where the time and memory of LLM inference go: the analytic views as JSON.",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN; the page loads nothing remote
        redoc_url=None,
    )
    app.add_exception_handler(TooBusy, _on_busy)
    app.add_exception_handler(RidgelineError, _on_library_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(RequestValidationError, on_invalid_body)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    _add_catalog(app)
    _add_api(app, compute)
    _add_simulate(app, jobs)
    _add_page(app)
    return app
