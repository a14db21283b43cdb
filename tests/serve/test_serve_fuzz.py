"""Hypothesis writes request bodies for ``ridgeline serve``: valid ones, ones a field off,
junk JSON, JSON Python accepts and the standard does not (``NaN``), and bytes that are no JSON
at all. Whatever arrives: never a 5xx, every error in OpenAI's shape, the server healthy, and
once each answer is in, no request in the system and no KV block held.

Bounded and deterministic: ``derandomize`` (examples from a fixed seed, the same in CI every
run), ``MAX_EXAMPLES`` bodies, ``max_tokens`` at most 24 on a 2-layer model, and a deadline on
the whole test rather than on each example.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from ridgeline.serve.app import create_app  # noqa: E402
from serve_support import VOCAB, make_tokenizer, serve_llm, tiny_llm  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]
MAX_EXAMPLES = 300
TIME_BOUND_S = 300  # the whole test, on a loaded 2-core machine (~30 s quiet)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["ab\ud800cd", "\udfff", "NaN", "", "5", "yes"]),
)
junk = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)
good_ids = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=24)
VALID = {  # a body the server serves: each field within its range
    "max_tokens": st.integers(1, 24),
    "temperature": st.floats(0, 2) | st.sampled_from([5e-324, 1e-300, 1e-40]),
    # below fp32's smallest subnormal (1e-320 is 0 there) as well as ordinary nuclei
    "top_p": st.floats(0.05, 1) | st.sampled_from([5e-324, 1e-320, 1e-46]),
    "top_k": st.integers(0, 50),
    "seed": st.integers(0, 2**32 - 1),
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    "ignore_eos": st.booleans(),
    "n": st.just(1),
    "model": st.just("tiny-llama"),
}
WRONG = {  # a field of the wrong type or out of range, or a field the engine cannot honour
    "max_tokens": st.integers(-2, 0) | st.integers(600, 10**6) | junk,
    "max_completion_tokens": junk,
    "temperature": st.floats(-1e3, -1e-9) | st.floats(2.01, 1e3) | junk,
    "top_p": st.floats(-1, 0) | st.floats(1.01, 5) | junk,
    "top_k": st.integers(-5, -1) | junk,
    "seed": st.integers(-5, -1) | st.integers(2**32, 2**70) | junk,
    "stream": junk,
    "stream_options": junk,
    "ignore_eos": junk,
    "n": st.integers(2, 5) | junk,
    "stop": st.text(min_size=1, max_size=3) | junk,
    "model": st.text(max_size=8) | junk,
    "logprobs": st.integers(1, 5) | junk,
    "prompt": junk
    | st.lists(st.integers(-5, VOCAB + 5), max_size=30)
    | st.lists(good_ids, min_size=2, max_size=3),
    "messages": junk
    | st.lists(st.fixed_dictionaries({"role": st.text(max_size=6), "content": junk})),
}
prompts = st.one_of(
    good_ids, st.text(min_size=1, max_size=40), st.lists(good_ids, min_size=1, max_size=1)
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "assistant"]), "content": st.text(max_size=30)}
    ),
    min_size=1,
    max_size=3,
)


@st.composite
def requests(draw: Any) -> tuple[str, bytes]:
    """(path, body bytes): a valid body of either endpoint, one a field off, junk JSON
    (``NaN`` and lone surrogates included), or bytes."""
    chat = draw(st.booleans())
    path = "/v1/chat/completions" if chat else "/v1/completions"
    kind = draw(st.sampled_from(["valid", "valid", "one-off", "one-off", "junk", "bytes"]))
    if kind == "bytes":
        return path, draw(st.binary(max_size=64))
    body = draw(
        st.fixed_dictionaries(
            {"messages": messages} if chat else {"prompt": prompts}, optional=VALID
        )
    )
    if kind == "one-off":
        name = draw(st.sampled_from(sorted(WRONG)))
        body[name] = draw(WRONG[name])
    text = json.dumps(draw(junk) if kind == "junk" else body, ensure_ascii=draw(st.booleans()))
    return path, text.encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, TestClient]]:
    torch.set_num_threads(1)
    served = serve_llm(tiny_llm(make_tokenizer(Path(tmp_path_factory.mktemp("tok")))))
    served.engine.start()
    yield served, TestClient(create_app(served), raise_server_exceptions=False)
    served.engine.stop()


def _settled(served: Any, timeout_s: float = 10.0) -> bool:
    """No request in the system and every KV block free (a streamed answer's last event may
    still be on its way to the engine thread's books)."""
    pool, deadline = served.engine.llm.scheduler.kv.pool, time.monotonic() + timeout_s
    while served.engine.state.in_system or pool.num_used:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_no_body_breaks_the_server(server: tuple[Any, TestClient]) -> None:
    served, client = server
    start, seen = time.monotonic(), {"ok": 0, "refused": 0}

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(requests())
    def one(request: tuple[str, bytes]) -> None:
        path, raw = request
        r = client.post(path, content=raw, headers={"content-type": "application/json"})
        assert r.status_code < 500, (r.status_code, raw[:200], r.text[:300])
        if r.status_code == 200:
            seen["ok"] += 1
        else:
            seen["refused"] += 1
            err = r.json()["error"]
            assert set(err) == {"message", "type", "param", "code"} and err["message"], err
        assert _settled(served), (raw[:200], served.engine.state.in_system)
        assert client.get("/health").status_code == 200
        assert time.monotonic() - start < TIME_BOUND_S

    one()
    assert seen["ok"] >= 40 and seen["refused"] >= 40, seen  # both sides were exercised
    assert served.engine.alive and _settled(served)
