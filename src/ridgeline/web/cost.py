"""What an explorer request will cost, estimated before any work starts.

Each analytic view's time grows with the model's layers, and two of them with more:

- ``compare`` searches each accelerator's smallest deployment stage by stage, and each candidate
  sums the weights over every layer: about layers × min(layers, chips needed) steps per
  accelerator (``analytic.deploy.auto_deployment``);
- ``schedule`` compiles every op of every layer into tiles, whose count grows with the hidden
  size (``analytic.dataflow.compile_schedule``).

The rates below were measured on a 2-core AMD EPYC (Zen 1) under load, with Llama-shaped configs
of 32 to 1,000 layers and hidden sizes of 4,096 to 131,072; the estimate errs high. A request
estimated past ``ESTIMATE_LIMIT_S`` is refused at once (a 422 that says what to run instead);
one that passes the estimate but runs past its deadline anyway is killed (``web.pool``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.analytic import kv_bytes
from ridgeline.analytic.deploy import min_chips
from ridgeline.specs import ModelSpec, accelerator_names, get_accelerator
from ridgeline.web.schemas import CompareBody, FlashBody, PlanBody, ScheduleBody

ESTIMATE_LIMIT_S = 5.0
LAYER_VIEWS_S_PER_LAYER = 1e-3  # roofline, kv, questions, flash: ~0.8 s at 1,000 layers (kv)
COMPARE_STEPS_PER_S = 15_000.0  # layer × candidate-stage steps of the deployment search
SCHEDULE_BASE_S = 0.26  # a 4,096-hidden step of few layers
SCHEDULE_S_PER_LAYER = 1.2e-3  # ... and per layer, at a hidden size of 4,096
SCHEDULE_REFERENCE_HIDDEN = 4_096  # compile time grows about linearly with the hidden size
# a plan: about four simulations per layout simulated, each of rate x seconds requests (at
# least 100), the disaggregated ones the slowest at ~1.5 ms per request of 4,000/500 tokens
PLAN_S_PER_REQUEST = 1.5e-3
PLAN_PROBES_PER_LAYOUT = 4
PLAN_REFERENCE_ISL, PLAN_REFERENCE_OSL = 4_000, 500  # longer requests cost about in proportion


@dataclass(frozen=True, slots=True)
class Estimate:
    """Predicted seconds of one request, and what drives them (for the refusal message)."""

    seconds: float
    driver: str


def _compare_s(body: CompareBody, model: ModelSpec) -> Estimate:
    layers = model.num_layers
    kv = kv_bytes(model, body.batch, body.context, body.kv_dtype)
    known = [n for n in body.accelerators if n in accelerator_names()]  # others: a 422 later
    stages = sum(min(layers, min_chips(model, get_accelerator(n), kv)) + 1 for n in known)
    return Estimate(
        layers * stages / COMPARE_STEPS_PER_S, f"{layers} layers × {stages} pipeline stages"
    )


def _schedule_s(model: ModelSpec) -> Estimate:
    scale = model.hidden_size / SCHEDULE_REFERENCE_HIDDEN
    seconds = scale * (SCHEDULE_BASE_S + SCHEDULE_S_PER_LAYER * model.num_layers)
    return Estimate(seconds, f"{model.num_layers} layers of hidden size {model.hidden_size:,}")


def _plan_s(body: PlanBody) -> Estimate:
    per_probe = min(1_000.0, max(100.0, body.rate_rps * body.seconds))
    probes = len(body.accelerators) * (body.simulated + 1) * PLAN_PROBES_PER_LAYOUT
    return Estimate(
        probes * per_probe * PLAN_S_PER_REQUEST,
        f"{probes} simulations of up to {per_probe:.0f} requests",
    )


def estimate(kind: str, body: object, model: ModelSpec) -> Estimate:
    """Predicted seconds of ``kind`` (a key of ``web.tasks.TASKS``) for ``body`` on ``model``."""
    if kind == "compare":
        assert isinstance(body, CompareBody)
        return _compare_s(body, model)
    if kind == "schedule":
        assert isinstance(body, ScheduleBody)
        return _schedule_s(model)
    if kind == "plan":
        assert isinstance(body, PlanBody)
        return _plan_s(body)
    views = len(body.accelerators) if isinstance(body, FlashBody) else 1
    seconds = views * LAYER_VIEWS_S_PER_LAYER * model.num_layers
    return Estimate(seconds, f"{model.num_layers} layers")
