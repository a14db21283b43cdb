"""What a worker process runs: each kind of explorer task, its body model and its function.

``run_task`` returns the message the worker sends back (see ``web.pool``): a result, an error a
user caused (its field named), or an internal error. Results are plain JSON values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from ridgeline.errors import RidgelineError
from ridgeline.specs.inputs import validation_message
from ridgeline.web import app as views
from ridgeline.web import jobs
from ridgeline.web.schemas import (
    CompareBody,
    FlashBody,
    KvBody,
    PlanBody,
    ScheduleBody,
    SimulateBody,
    WorkloadBody,
)

Progress = Callable[[int], None]


def _simulate(body: SimulateBody, progress: Progress) -> dict[str, Any]:
    acc = views.catalog_accelerator(body.accelerator, ("body", "accelerator"))
    return jobs.run_simulation(body, views.resolve_model(body), acc, progress)


TASKS: dict[str, tuple[type[BaseModel], Callable[..., dict[str, Any]]]] = {
    "roofline": (WorkloadBody, views.roofline),
    "kv": (KvBody, views.kv),
    "questions": (WorkloadBody, views.questions),
    "compare": (CompareBody, views.comparison),
    "schedule": (ScheduleBody, views.schedule),
    "flash": (FlashBody, views.flash_io),
    "simulate": (SimulateBody, _simulate),
    "plan": (PlanBody, views.plan_view),
}
MEMORY_MESSAGE = "the request needs more memory than the explorer gives one request"


def run_task(kind: str, payload: Any, progress: Progress) -> tuple[Any, ...]:
    """Run one task; the outcome as the message a worker sends back."""
    body_type, fn = TASKS[kind]
    try:
        body = body_type.model_validate(payload)
        result = fn(body, progress) if kind == "simulate" else fn(body)
        return ("ok", views.clean(result))
    except views.FieldError as e:
        return ("error", list(e.loc), str(e), e.kind)
    except RidgelineError as e:
        return ("error", views.error_loc(str(e)), str(e), "value_error")
    except ValidationError as e:
        return ("error", ["body"], validation_message(e), "value_error")
    except MemoryError:
        return ("error", ["body"], MEMORY_MESSAGE, views.UNSATISFIABLE)
    except Exception as e:  # noqa: BLE001 -- a bug is reported on the request, not lost
        return ("crashed", f"internal error: {type(e).__name__}: {e}")
