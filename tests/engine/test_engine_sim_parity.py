"""The simulator's decisions are the engine's: the same trace through ``sim.Simulation`` (its
step times replaced by the engine's measured ones) gives the same batches, step by step — the
same requests, tokens, start positions and block ids, through chunked prefill, prefix hits and
preemption."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from engine_support import VOCAB, llama_config, spec_of  # noqa: E402
from ridgeline.analytic.pricing import Pricing  # noqa: E402
from ridgeline.engine.llm import LLM  # noqa: E402
from ridgeline.engine.sampling import SamplingParams  # noqa: E402
from ridgeline.serving.executor import ScheduledBatch, StepResult  # noqa: E402
from ridgeline.sim.loop import SimConfig, Simulation  # noqa: E402
from ridgeline.sim.workload import RequestSpec  # noqa: E402
from ridgeline.specs import get_accelerator  # noqa: E402

pytestmark = pytest.mark.torch


class Replay:
    """The simulator's executor with each step's time set to the engine's measured time."""

    def __init__(self, inner: Any, times: list[float]) -> None:
        self.inner, self.times, self.batches = inner, times, []

    def execute(self, batch: ScheduledBatch) -> StepResult:
        result = self.inner.execute(batch)
        self.batches.append(batch)
        return StepResult(result.sampled, self.times[len(self.batches) - 1])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _view(batch: ScheduledBatch) -> list[tuple[Any, ...]]:
    return [
        (r.request_id, r.token_ids, r.start_position, r.block_ids, r.sample) for r in batch.requests
    ]


def test_simulator_makes_the_engines_batches_step_by_step() -> None:
    torch.set_num_threads(1)
    config = llama_config(2)
    spec = spec_of(config, "tiny-llama")
    llm = LLM(
        spec,
        block_size=4,
        max_num_batched_tokens=12,
        num_blocks=9,
        init_std=0.15,
        paged_kernel=False,
    )
    g = torch.Generator().manual_seed(3)
    shared = torch.randint(0, VOCAB, (8,), generator=g).tolist()
    prompts = [shared + [1, 2], list(range(5, 21)), shared + [3], [7, 7, 7], shared + [9, 9, 9]]
    arrivals = [0.0, 1e-6, 2e-6, 3e-6, 0.5]  # distinct: ties at an idle instant are order-free
    outs = llm.generate(prompts, SamplingParams(max_output_tokens=7), arrivals_s=arrivals)
    assert sum(o.num_preemptions for o in outs) > 0 and sum(o.num_cached_tokens for o in outs) > 0

    trace = [
        RequestSpec(o.request_id, a, list(o.prompt_token_ids), list(o.token_ids))
        for o, a in zip(outs, arrivals, strict=True)
    ]
    cfg = SimConfig(
        model=spec,
        pricing=Pricing.ideal(get_accelerator("xeon-spr")),
        scheduler=llm.scheduler.config,
        block_size=4,
        prefix_caching=True,
        num_blocks=llm.num_blocks,
        fast_forward=False,
    )
    sim = Simulation(cfg, trace)
    inst = sim.instances[0]
    measured = [b.step for b in llm.stats.batches]
    assert measured == list(range(1, len(measured) + 1))
    replay = Replay(inst.executor, llm.stats.step_times)
    inst.executor = replay  # type: ignore[assignment]
    sim.run()
    assert len(replay.batches) == len(llm.stats.batches)
    for ours, theirs in zip(llm.stats.batches, replay.batches, strict=True):
        assert _view(ours) == _view(theirs), ours.step
