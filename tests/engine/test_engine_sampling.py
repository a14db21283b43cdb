"""Sampling rules, per-request seeding, and the exactness of speculative sampling."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from engine_support import Driver, Pool, Req, cache_for, llama_config, twin  # noqa: E402
from ridgeline.engine.executor import TorchExecutor  # noqa: E402
from ridgeline.engine.sampling import SamplingParams, probabilities  # noqa: E402
from ridgeline.engine.spec_decode import verify  # noqa: E402
from ridgeline.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.torch
LOGITS = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0]])


def test_greedy_is_one_hot_on_the_argmax() -> None:
    assert probabilities(LOGITS, SamplingParams()).tolist() == [[1.0, 0, 0, 0, 0]]


def test_top_k_and_top_p_keep_the_right_tokens() -> None:
    top2 = probabilities(LOGITS, SamplingParams(temperature=1.0, top_k=2))[0]
    assert (top2 > 0).tolist() == [True, True, False, False, False]
    assert top2.sum().item() == pytest.approx(1.0)
    # softmax mass: 0.53, 0.19, 0.12, 0.04, 0.07 -> the nucleus of 0.7 is the first two tokens
    nucleus = probabilities(LOGITS, SamplingParams(temperature=1.0, top_p=0.7))[0]
    assert (nucleus > 0).tolist() == [True, True, False, False, False]
    hot = probabilities(LOGITS, SamplingParams(temperature=0.01))[0]
    assert hot[0].item() == pytest.approx(1.0)


@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-40])
def test_a_tiny_temperature_samples_the_argmax_instead_of_nan(temperature: float) -> None:
    """Regression (found by the server's fuzz test): logits / 1e-300 overflow to inf and
    softmax made NaN, so torch.multinomial raised and the server's engine thread died."""
    probs = probabilities(LOGITS, SamplingParams(temperature=temperature))
    assert probs.tolist() == [[1.0, 0.0, 0.0, 0.0, 0.0]]
    tied = probabilities(torch.tensor([[3.0, 3.0, -1.0]]), SamplingParams(temperature=1e-300))
    assert tied.tolist() == [[0.5, 0.5, 0.0]]
    from ridgeline.engine.sampling import sample

    gen = torch.Generator().manual_seed(0)
    assert sample(LOGITS[0], SamplingParams(temperature=temperature, top_p=0.5), gen) == 0


@pytest.mark.parametrize("top_p", [1e-320, 5e-324, 1e-46, 1e-9])
def test_a_tiny_top_p_keeps_the_most_likely_token(top_p: float) -> None:
    """Regression (found by hand against ``ridgeline serve``): ``top_p`` 1e-320 is 0 in fp32,
    the nucleus came out empty, softmax made NaN and torch.multinomial killed the server's
    engine thread; the nucleus always holds the most likely token."""
    probs = probabilities(LOGITS, SamplingParams(temperature=1.0, top_p=top_p))
    assert probs.tolist() == [[1.0, 0.0, 0.0, 0.0, 0.0]]
    from ridgeline.engine.sampling import sample

    gen = torch.Generator().manual_seed(0)
    assert sample(LOGITS[0], SamplingParams(temperature=1.0, top_p=top_p), gen) == 0


def test_bad_params_name_the_field() -> None:
    with pytest.raises(ConfigError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ConfigError, match="temperature"):
        SamplingParams(temperature=-1.0)


def test_speculative_sampling_preserves_the_target_distribution() -> None:
    """Leviathan et al. 2023, Theorem 1: the first emitted token is distributed as p."""
    params = SamplingParams(temperature=1.0)
    target = torch.tensor([[1.0, 0.2, -0.5, 0.3], [0.0, 0.0, 0.0, 0.0]])  # [k+1, vocab]
    p = torch.softmax(target[0], -1)
    q = torch.tensor([[0.1, 0.6, 0.2, 0.1]])
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros(4)
    n = 6000
    for _ in range(n):
        draft = int(torch.multinomial(q[0], 1, generator=g))
        counts[verify(target, (draft,), q, params, g)[0]] += 1
    assert (counts / n - p).abs().max().item() < 0.025


def _sampled_run(models: tuple[Any, Any], reqs: list[Req], params: SamplingParams) -> None:
    ours, _ = models
    executor = TorchExecutor(ours, cache_for(ours, 32, 4))
    for r in reqs:
        executor.add_request(r.rid, params)
    Driver(executor, Pool(32), 4, budget=16).run(reqs)


def test_a_seeded_request_samples_the_same_tokens_whatever_its_batch() -> None:
    torch.set_num_threads(1)
    models = twin(llama_config(2), seed=2)
    params = SamplingParams(max_output_tokens=8, temperature=0.9, top_k=20, top_p=0.95, seed=7)
    alone = Req("x", [5, 6, 7, 8, 9], 8)
    _sampled_run(models, [alone], params)
    crowd = [Req("y", [1, 2, 3], 8), Req("x", [5, 6, 7, 8, 9], 8, arrival=2), Req("z", [4], 8)]
    _sampled_run(models, crowd, params)
    assert crowd[1].out == alone.out
    assert len(set(alone.out)) > 1  # it did sample, not collapse to one token
