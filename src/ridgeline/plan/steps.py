"""Step times of the instances ``plan`` considers, priced once and shared by every candidate.

One cost model per (split, formats) on an accelerator (``sim.executor.step_cost_model``, the
model the simulator and ``predict`` price steps with, under the plan's pricing value moved to
that deployment and those formats); every layout that uses the same instance reads the same
one, so its tables are built once per plan.

Three shapes of step, all through ``grouped_step_s`` (closed form) where the model offers it:

    decode_s(b, c)         b sequences holding c tokens each add one token
    mixed_s(b, c, p, q)    the same, beside one prefill chunk of p tokens on q cached ones
    prefill_s(n, tokens)   n prompts of ``tokens`` each, from nothing (disaggregated prefill)
"""

from __future__ import annotations

import math

from ridgeline.analytic import Phase, Workload
from ridgeline.analytic.binding import Verdict
from ridgeline.analytic.deploy import deployment_cost
from ridgeline.analytic.pricing import Pricing
from ridgeline.plan.space import Formats, Split
from ridgeline.sim.executor import StepCostModel, step_cost_model
from ridgeline.specs import Accelerator, ModelSpec


class StepPrices:
    """Cached step costs of one model on one accelerator (module docstring); ``pricing`` is
    the plan's (its mode and terms), on any deployment of ``acc``."""

    def __init__(self, model: ModelSpec, acc: Accelerator, pricing: Pricing) -> None:
        self.model, self.acc, self.base = model, acc, pricing
        self._costs: dict[tuple[Split, Formats], StepCostModel] = {}

    def pricing(self, split: Split, formats: Formats) -> Pricing:
        """The plan's pricing on ``split`` of this accelerator, in ``formats``."""
        return self.base.on(split.deployment(self.acc)).with_dtypes(formats.dtypes)

    def cost(self, split: Split, formats: Formats) -> StepCostModel:
        key = (split, formats)
        cost = self._costs.get(key)
        if cost is None:
            cost = step_cost_model(self.model, self.pricing(split, formats))
            self._costs[key] = cost
        return cost

    def _step(
        self,
        split: Split,
        formats: Formats,
        decode: tuple[int, int],
        new: list[int],
        prior: list[int],
    ) -> float:
        cost = self.cost(split, formats)
        b, total = decode
        t = cost.grouped_step_s(b, total, new, prior)
        if t is None:  # MoE or sliding windows: price the step sequence by sequence
            t = cost.step_time_s([1] * b + new, [total // max(b, 1)] * b + prior)
        return t

    def decode_s(self, split: Split, formats: Formats, batch: int, context: float) -> float:
        """One decode step of ``batch`` sequences holding ``context`` tokens each."""
        return self._step(split, formats, (batch, round(batch * context)), [], [])

    def mixed_s(
        self, split: Split, formats: Formats, decode: tuple[int, float], chunk: tuple[int, float]
    ) -> float:
        """A decode step of ``decode`` = (sequences, context) beside one prefill ``chunk`` =
        (new tokens, cached tokens)."""
        b, c = decode
        new, prior = chunk
        if new < 1:
            return self.decode_s(split, formats, b, c)
        return self._step(split, formats, (b, round(b * c)), [new], [round(prior)])

    def prefill_s(self, split: Split, formats: Formats, prompts: int, tokens: int) -> float:
        """One step prefilling ``prompts`` whole prompts of ``tokens`` each."""
        return self._step(split, formats, (0, 0), [tokens] * prompts, [0] * prompts)

    def prompt_alone_s(self, split: Split, formats: Formats, tokens: int, budget: int) -> float:
        """Time to prefill one prompt of ``tokens`` alone in chunks of ``budget`` (its first
        token comes with the last chunk)."""
        chunks = math.ceil(tokens / budget)
        total = 0.0
        for k in range(chunks):
            size = min(budget, tokens - k * budget)
            total += self._step(split, formats, (0, 0), [size], [k * budget])
        return total

    def binding(self, split: Split, formats: Formats, batch: int, context: float) -> Verdict:
        """What binds a decode step of ``batch`` sequences at ``context`` tokens (the analytic
        deployment's largest share: compute, memory, links or fixed latency;
        ``analytic.binding``)."""
        w = Workload(Phase.DECODE, max(1, batch), max(1, round(context)), dtypes=formats.dtypes)
        pricing = self.pricing(split, formats)
        return deployment_cost(self.model, pricing, w, microbatches=1).binding
