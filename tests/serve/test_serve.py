"""``ridgeline serve`` driven by the official ``openai`` client: the same greedy tokens as
``LLM.generate``, streaming and not, text and chat through a tokenizer built offline; every bad
body a 400 naming its field; a client that leaves frees its blocks; the metrics count."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from ridgeline.engine.sampling import SamplingParams  # noqa: E402
from serve_support import VOCAB, running, serve_llm, tiny_llm  # noqa: E402

pytestmark = pytest.mark.torch
PROMPTS = [[5, 9, 200, 31, 7], list(range(40, 77)), [300, 2, 2, 2, 19, 88, 101, 13, 64]]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: Any) -> Path:
    from serve_support import make_tokenizer

    return make_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def server(tokenizer: Path) -> Any:
    torch.set_num_threads(1)
    served = serve_llm(tiny_llm(tokenizer))
    with running(served) as url:
        yield served, url


def _client(url: str) -> Any:
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=60)


def _reference(prompts: list[Any], n: int, tokenizer: Path | None = None) -> list[list[int]]:
    """``LLM.generate`` on an engine built the same way (same seed, same weights)."""
    llm = tiny_llm(tokenizer)
    outs = llm.generate(prompts, SamplingParams(max_output_tokens=n, eos_token_id=None))
    return [list(o.token_ids) for o in outs]


def _ids(choice: Any) -> list[int]:
    return list(choice.model_extra["token_ids"])


def test_completions_match_generate_streaming_and_not(server: Any) -> None:
    served, url = server
    client = _client(url)
    expected = _reference(PROMPTS, 12)
    for prompt, want in zip(PROMPTS, expected, strict=True):
        r = client.completions.create(
            model="tiny-llama",
            prompt=prompt,
            max_tokens=12,
            temperature=0,
            extra_body={"ignore_eos": True},
        )
        assert _ids(r.choices[0]) == want and r.choices[0].finish_reason == "length"
        assert r.usage.prompt_tokens == len(prompt) and r.usage.completion_tokens == 12
        chunks = list(
            client.completions.create(
                model="tiny-llama",
                prompt=prompt,
                max_tokens=12,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
                extra_body={"ignore_eos": True},
            )
        )
        streamed = [t for c in chunks if c.choices for t in _ids(c.choices[0])]
        assert streamed == want
        assert "".join(c.choices[0].text for c in chunks if c.choices) == r.choices[0].text
        assert chunks[-1].usage.completion_tokens == 12
        assert len([c for c in chunks if c.choices]) > 1  # tokens arrive step by step


def test_text_and_chat_go_through_the_tokenizer(server: Any, tokenizer: Path) -> None:
    served, url = server
    client = _client(url)
    text = "the roofline says"
    want = _reference([text], 10, tokenizer)[0]
    r = client.completions.create(
        model="tiny-llama",
        prompt=text,
        max_tokens=10,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert _ids(r.choices[0]) == want
    assert r.choices[0].text == served.codec.decode(want)
    messages = [{"role": "user", "content": "where does decode time go?"}]
    chat_ids = served.codec.chat(messages)
    want = _reference([chat_ids], 8, tokenizer)[0]
    c = client.chat.completions.create(
        model="tiny-llama",
        messages=messages,
        max_tokens=8,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert _ids(c.choices[0]) == want and c.choices[0].message.content == served.codec.decode(want)
    stream = client.chat.completions.create(
        model="tiny-llama",
        messages=messages,
        max_tokens=8,
        temperature=0,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    parts = [ch.choices[0] for ch in stream]
    assert parts[0].delta.role == "assistant"
    assert "".join(p.delta.content or "" for p in parts) == c.choices[0].message.content


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"prompt": [1, 2], "temperature": -1}, "temperature"),
        ({"prompt": [1, 2], "n": 2}, "n"),
        ({"prompt": [1, 2], "stop": ["x"]}, "stop"),
        ({"prompt": [1, VOCAB + 5]}, "prompt"),
        ({"prompt": [1, 2], "max_tokens": 100_000}, "max_tokens"),
        ({"prompt": [[1], [2]]}, "prompt"),
        ({"max_tokens": 3}, "prompt"),
        ({"prompt": "text", "max_tokens": "many"}, "max_tokens"),
    ],
)
def test_every_bad_body_is_a_400_naming_its_field(server: Any, body: dict, field: str) -> None:
    _, url = server
    r = httpx.post(f"{url}/completions", json=body, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == field and f"field {field}" in err["message"]


def test_models_health_metrics_and_unknown_model(server: Any) -> None:
    served, url = server
    assert httpx.get(f"{url}/models").json()["data"][0]["id"] == "tiny-llama"
    base = url.removesuffix("/v1")
    assert httpx.get(f"{base}/health").json() == {"status": "ok"}
    r = httpx.post(f"{url}/completions", json={"model": "gpt-9", "prompt": [1]})
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"
    before = served.metrics.ttft.collect()[0].samples
    httpx.post(f"{url}/completions", json={"prompt": [3, 4], "max_tokens": 2}, timeout=30)
    text = httpx.get(f"{base}/metrics").text
    for name in (
        "ridgeline_requests_running",
        "ridgeline_requests_waiting",
        "ridgeline_kv_blocks_used",
        "ridgeline_prefix_cache_hit_rate",
        "ridgeline_time_to_first_token_seconds_bucket",
        "ridgeline_time_per_output_token_seconds_bucket",
    ):
        assert name in text
    count = {s.name: s.value for s in served.metrics.ttft.collect()[0].samples}
    old = {s.name: s.value for s in before}
    assert count["ridgeline_time_to_first_token_seconds_count"] == (
        old["ridgeline_time_to_first_token_seconds_count"] + 1
    )


def test_a_client_that_leaves_mid_stream_frees_its_blocks() -> None:
    # a model slow enough (8 layers, hidden 256) that 450 tokens take seconds
    served = serve_llm(tiny_llm(None, hidden=256, layers=8))
    pool = served.engine.llm.scheduler.kv.pool
    body = {"prompt": list(range(1, 30)), "max_tokens": 450, "stream": True, "ignore_eos": True}
    with running(served) as url:
        with httpx.stream("POST", f"{url}/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data:"):
                    break  # one chunk arrived: the request holds blocks now
            assert pool.num_used > 0 and served.engine.state.in_system == 1
        deadline = time.monotonic() + 20
        while (served.engine.state.in_system or pool.num_used) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served.engine.state.in_system == 0 and pool.num_used == 0
        assert served.metrics.finished.labels(reason="abort")._value.get() == 1
