"""plan: the cheapest deployment that meets latency targets, on every accelerator asked, and how
sure the answer is.

A search over layouts (accelerator, weight and KV formats, tensor / pipeline parallel,
aggregated or disaggregated serving, token budget) and their number of copies: every layout
bounded analytically (``bound``, ``screen``), the best simulated with the serving simulator
through the sweep's backends (``search``), every figure with an interval from the validation's
held-out residuals (``fidelity.residuals``), the winner's engine command lines (``engine``).

Layer rule: imports ``errors``, ``specs``, ``analytic``, ``serving``, ``sim``, ``fidelity`` and
``sweep``; never the faces (``cli``, ``report``, ``web``), never torch.
"""

from ridgeline.plan.bound import Bound, Limit, Miss, Targets, Traffic
from ridgeline.plan.request import PlanRequest, load_prices
from ridgeline.plan.result import AcceleratorPlan, Candidate, Plan, Probe, RateCheck
from ridgeline.plan.search import run_plan, run_plans, traffic_of
from ridgeline.plan.space import Formats, Knobs, Layout, Serving, Split

__all__ = [
    "AcceleratorPlan",
    "Bound",
    "Candidate",
    "Formats",
    "Knobs",
    "Layout",
    "Limit",
    "Miss",
    "Plan",
    "PlanRequest",
    "Probe",
    "RateCheck",
    "Serving",
    "Split",
    "Targets",
    "Traffic",
    "load_prices",
    "run_plan",
    "run_plans",
    "traffic_of",
]
