"""The step cost of a deployment of many chips (tensor and pipeline parallelism).

Per-op FLOPs and bytes are one chip's share after the Megatron-LM split (``analytic.deploy``),
summed over the stages (a lone microbatch visits them one after another; NOTE: no microbatching
inside a step, so a deep pipeline idles in its bubble; ``analytic``'s
``deployment_cost(..., microbatches=1)`` gives the same time, which a test checks), plus the
pass's all-reduces, logits gather and stage sends, an affine term in the step's sequences and
tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ridgeline.analytic.collectives import LinkTerms
from ridgeline.analytic.deploy import check_deployment, chip_op_costs, pass_links
from ridgeline.analytic.pricing import Pricing
from ridgeline.sim.executor import HostCost, StepCostModel
from ridgeline.specs import ModelSpec


class DeploymentStepCost(StepCostModel):
    """``StepCostModel`` of a replica deployed on many chips.

    Per-op FLOPs and bytes are one chip's share after the tensor-parallel split, summed over the
    stages (a lone microbatch visits them one after another); the links add an affine term in
    the step's sequences and tokens.
    """

    def __init__(self, model: ModelSpec, pricing: Pricing, host: HostCost | None = None) -> None:
        check_deployment(model, pricing.deployment)
        self.deployment = pricing.deployment  # read by _terms while the base builds its tables
        super().__init__(model, pricing, host)
        # link times by (sequences, tokens): a run asks for the same few shapes step after step
        self._links: dict[tuple[float, float], float] = {}

    def _terms(self, shape: object) -> tuple[np.ndarray, ...]:
        dep = self.deployment
        costs = chip_op_costs(
            self.model,
            dep.tensor_parallel,
            shape,  # type: ignore[arg-type]
            self.dtypes,
            dep.expert_parallel,
        )
        kv = np.array([c.kv_bytes for c in costs])
        compute = self._ideal_compute_s([c.flops for c in costs], tuple(c.kind for c in costs))
        return (
            compute,
            np.array([c.bytes for c in costs]) - kv,
            kv,
            np.array([c.gemm_rows for c in costs]),
        )

    def link_s(self, num_seqs: float, num_tokens: float) -> float:
        """Link time of one step of ``num_seqs`` sequences adding ``num_tokens`` tokens."""
        key = (num_seqs, num_tokens)
        t = self._links.get(key)
        if t is None:
            links = pass_links(
                self.model, self.deployment, num_seqs, num_tokens, self.dtypes, self.calibration
            )
            t = self._links[key] = links.time_s
        return t

    def link_terms(self, num_seqs: float, num_tokens: float) -> LinkTerms:
        """``link_s`` split by calibration term (``analytic.collectives.LinkTerms``)."""
        return pass_links(self.model, self.deployment, num_seqs, num_tokens, self.dtypes).terms

    def step_time_s(self, new: Sequence[int], prior: Sequence[int]) -> float:
        return super().step_time_s(new, prior) + self.link_s(len(new), float(sum(new)))

    def decode_run_s(self, prior: Sequence[int], k: int) -> np.ndarray:
        batch = float(len(prior))
        return super().decode_run_s(prior, k) + self.link_s(batch, batch)

    def grouped_step_s(
        self, batch: int, total: int, new: Sequence[int], prior: Sequence[int]
    ) -> float | None:
        t = super().grouped_step_s(batch, total, new, prior)
        if t is None:
            return None
        return t + self.link_s(batch + len(new), float(batch + sum(new)))

    def decode_segments_s(self, segments: Sequence[tuple[int, int, int]]) -> list[float] | None:
        times = super().decode_segments_s(segments)
        if times is None:
            return None
        links: list[float] = []
        for b, _, k in segments:
            links += [self.link_s(float(b), float(b))] * k
        return [t + link for t, link in zip(times, links, strict=True)]
