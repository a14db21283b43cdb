"""``ridgeline serve`` facing a network: the API key, the body limit, strict bodies and the
OpenAI error shape on every path, text that is not Unicode, a slow tokenisation that does not
hold the event loop, a client that leaves a non-streaming request, bounded stats, and the
settings checked before anything is built. (The refusals themselves are cases of the
bad-input corpus: ``bad_inputs.SERVE_CASES``.)"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from ridgeline.engine.llm import EngineStats  # noqa: E402
from ridgeline.errors import ConfigError, RidgelineError  # noqa: E402
from ridgeline.serve.app import Access, create_app  # noqa: E402
from ridgeline.serve.server import (  # noqa: E402
    ServeSettings,
    check_api_key,
    check_settings,
    exposure_warning,
)
from ridgeline.serve.text import TextCodec  # noqa: E402
from serve_support import make_tokenizer, running, serve_llm, tiny_llm  # noqa: E402

pytestmark = pytest.mark.torch
KEY = "sk-ridgeline-test-0123"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: Any) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def served(tokenizer: Path) -> Iterator[Any]:
    torch.set_num_threads(1)
    s = serve_llm(tiny_llm(tokenizer))
    s.engine.start()
    yield s
    s.engine.stop()


def _client(served: Any, access: Access) -> TestClient:
    app = create_app(dataclasses.replace(served, access=access))
    return TestClient(app, raise_server_exceptions=False)


def test_the_key_guards_every_route_but_health(served: Any) -> None:
    c = _client(served, Access(api_key=KEY))
    assert c.get("/health").status_code == 200
    body = {"prompt": [1, 2, 3], "max_tokens": 2}
    for method, path in (
        ("GET", "/v1/models"),
        ("GET", "/metrics"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/no/such/route"),
    ):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            r = c.request(method, path, json=body, headers=headers)
            assert r.status_code == 401, (path, headers, r.text)
            assert r.json()["error"]["code"] == "invalid_api_key"
            assert r.headers["www-authenticate"].startswith("Bearer")
    ok = {"Authorization": f"Bearer {KEY}"}
    assert c.get("/v1/models", headers=ok).json()["data"][0]["id"] == "tiny-llama"
    r = c.post("/v1/completions", json=body, headers=ok)
    assert r.status_code == 200 and len(r.json()["choices"][0]["token_ids"]) == 2
    assert c.get("/no/such/route", headers=ok).status_code == 404


def test_only_the_openai_routes_exist_and_none_reads_a_path(served: Any) -> None:
    """No route takes a file name: ``model`` is compared with the served name, never opened."""
    app = create_app(served)
    paths = {r.path for r in app.routes}  # type: ignore[attr-defined]
    assert paths == {"/health", "/v1/models", "/metrics", "/v1/completions", "/v1/chat/completions"}
    c = _client(served, Access())
    r = c.post("/v1/completions", json={"model": "/etc/passwd", "prompt": [1]})
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"
    assert "root:" not in r.text


def test_the_body_limit_is_configurable_with_or_without_a_length(served: Any) -> None:
    c = _client(served, Access(max_body_bytes=1000))
    small = {"prompt": list(range(1, 50)), "max_tokens": 1}
    assert c.post("/v1/completions", json=small).status_code == 200
    big = b'{"prompt": [' + b"1, " * 600 + b"1]}"
    r = c.post("/v1/completions", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "1,000 bytes" in r.json()["error"]["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield big[:500]
        yield big[500:]

    r = c.post("/v1/completions", content=chunks())
    assert r.status_code == 413 and r.json()["error"]["type"] == "invalid_request_error"


def test_fields_the_engine_cannot_honour_are_served_at_their_neutral_values(served: Any) -> None:
    """What clients send by default (a zero penalty, no bias, text output, no tools) is served;
    any other value is a 400 naming the field (corpus: ``bad_inputs.SERVE_FIELDS``), where it
    used to be ignored without a word."""
    c = _client(served, Access())
    neutral = {
        "presence_penalty": 0,
        "frequency_penalty": 0.0,
        "repetition_penalty": 1.0,
        "logit_bias": {},
        "best_of": 1,
        "min_p": 0,
        "min_tokens": 0,
        "logprobs": None,
        "user": "someone",
        "stop": [],
    }
    r = c.post("/v1/completions", json={"prompt": [1, 2], "max_tokens": 2, "suffix": "", **neutral})
    assert r.status_code == 200, r.text
    chat = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
        "top_logprobs": 0,
        "tools": [],
        "tool_choice": "none",
        "response_format": {"type": "text"},
        **neutral,
    }
    r = c.post("/v1/chat/completions", json=chat)
    assert r.status_code == 200, r.text
    r = c.post("/v1/completions", json={"prompt": [1, 2], "presence_penalty": 0.5})
    assert r.status_code == 400 and r.json()["error"]["param"] == "presence_penalty"


def test_a_client_that_leaves_while_sending_its_body_gets_a_400_not_a_traceback() -> None:
    """Regression (found by hand: a Content-Length larger than the bytes sent): Starlette's
    ClientDisconnect escaped the body reader and uvicorn logged a traceback per request."""
    import asyncio

    from starlette.requests import Request

    from ridgeline.serve.errors import HttpError
    from ridgeline.serve.guard import read_body

    messages = iter([{"type": "http.request", "body": b'{"pro', "more_body": True}])

    async def receive() -> dict[str, Any]:
        return next(messages, {"type": "http.disconnect"})

    scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
    with pytest.raises(HttpError) as caught:
        asyncio.run(read_body(Request(scope, receive), 1000))
    assert caught.value.status == 400 and "left before" in caught.value.message


def test_an_unexpected_failure_is_a_500_in_the_openai_shape(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> str:
        raise RuntimeError("decoder exploded with a secret path /home/x")

    c = _client(served, Access())
    monkeypatch.setattr(served.codec, "decode", broken)
    r = c.post("/v1/completions", json={"prompt": [1, 2], "max_tokens": 1})
    assert r.status_code == 500
    err = r.json()["error"]
    assert err["type"] == "server_error" and "RuntimeError" in err["message"]
    assert "/home/x" not in err["message"]


def test_text_with_a_lone_surrogate_is_refused_naming_the_field(tokenizer: Path) -> None:
    """Regression: a lone surrogate reached the tokenizer, which raised TypeError (a 500)."""
    from transformers import AutoTokenizer

    codec = TextCodec(AutoTokenizer.from_pretrained(str(tokenizer)))
    with pytest.raises(ConfigError, match=r"^field prompt: not valid Unicode text .* character 2"):
        codec.encode("ab\ud800cd")
    messages = [{"role": "user", "content": "ok"}, {"role": "user", "content": "x\udfffy"}]
    with pytest.raises(ConfigError, match=r"^field messages\[1\]\.content: not valid Unicode"):
        codec.chat(messages)
    assert codec.encode("abcd") == codec.tokenizer.encode("abcd", add_special_tokens=False)


def test_a_prompt_longer_than_the_server_holds_is_refused_from_its_count(tokenizer: Path) -> None:
    from transformers import AutoTokenizer

    codec = TextCodec(AutoTokenizer.from_pretrained(str(tokenizer)))
    n = len(codec.encode("the roofline says " * 20))
    assert codec.encode("the roofline says " * 20, most_tokens=n) == codec.encode(
        "the roofline says " * 20
    )
    with pytest.raises(ConfigError, match=rf"^field prompt: {n} tokens, more than .* \({n - 1}\)"):
        codec.encode("the roofline says " * 20, most_tokens=n - 1)


class _CountingTokenizer:
    """A slow tokenizer's face (no ``backend_tokenizer``) that records what it tokenises."""

    eos_token_id = None
    chat_template = None

    def __init__(self) -> None:
        self.seen: list[int] = []

    def get_vocab(self) -> dict[str, int]:
        return {"a": 0, "ab": 1, "<|eos|>": 2}

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        self.seen.append(len(text))
        return [0] * len(text)


def test_a_text_far_too_long_is_refused_before_tokenising() -> None:
    """A 10 MB prompt took 72 s to tokenise only to be refused; a text longer than the tokens
    allowed could span is refused from its length (4 × most_tokens × the longest entry)."""
    tok = _CountingTokenizer()
    codec = TextCodec(tok)
    assert codec.longest_token_chars == len("<|eos|>") == 7
    bound = 4 * 100 * 7
    with pytest.raises(ConfigError, match=r"^field prompt: 2,800 tokens, more than"):
        codec.encode("a" * bound, most_tokens=100)  # tokenised: the count refuses it
    assert tok.seen == [bound]
    with pytest.raises(ConfigError, match=r"^field prompt: 2,801 characters, more than 100 tok"):
        codec.encode("a" * (bound + 1), most_tokens=100)
    assert tok.seen == [bound]  # not tokenised
    assert codec.encode("a" * 100, most_tokens=100) == [0] * 100


@pytest.mark.slow
def test_a_slow_tokenisation_does_not_hold_the_event_loop(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a 10 MB prompt was tokenised on the event loop and /health waited 72 s.
    Here the tokenizer takes 3 s; /health answers meanwhile."""
    real = served.codec.encode

    def slow(prompt: str, most_tokens: int | None = None) -> list[int]:
        time.sleep(3.0)
        return real(prompt, most_tokens)  # type: ignore[no-any-return]

    monkeypatch.setattr(served.codec, "encode", slow)
    with running(served, start_engine=False) as url:
        base = url.removesuffix("/v1")
        body = {"prompt": "the roofline says", "max_tokens": 2}
        slow_request = threading.Thread(
            target=lambda: httpx.post(f"{url}/completions", json=body, timeout=30)
        )
        slow_request.start()
        time.sleep(0.5)  # the request is in the tokenizer now
        start = time.perf_counter()
        assert httpx.get(f"{base}/health", timeout=10).status_code == 200
        waited = time.perf_counter() - start
        assert slow_request.is_alive()  # still tokenising: /health did not wait for it
        slow_request.join(30)
    assert waited < 1.0, waited


@pytest.mark.slow
def test_a_client_that_leaves_a_non_streaming_request_frees_its_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: the disconnect check ran only when no token came for 0.25 s, so a request
    producing tokens every step ran to its end after its client had gone. Each step takes at
    least 5 ms here, so the 450 tokens outlast the client's 0.4 s on any machine (on a quiet
    one the engine made them all in under 0.4 s and the client never left)."""
    served = serve_llm(tiny_llm(None, hidden=256, layers=8))
    pool, engine = served.engine.llm.scheduler.kv.pool, served.engine
    step = engine.llm.step

    def slow_step() -> Any:
        time.sleep(0.005)
        return step()

    monkeypatch.setattr(engine.llm, "step", slow_step)
    body = {"prompt": list(range(1, 30)), "max_tokens": 450, "ignore_eos": True}
    with running(served) as url:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{url}/completions", json=body, timeout=0.4)
        deadline = time.monotonic() + 20
        while (engine.state.in_system or pool.num_used) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.state.in_system == 0 and pool.num_used == 0
        assert served.metrics.finished.labels(reason="abort")._value.get() == 1
        assert engine.llm.stats.tokens < 450  # stopped early, not run to the end


def test_engine_stats_keep_a_bounded_window_and_running_totals() -> None:
    """Regression: ``batches`` and ``step_times`` grew by one entry a step for the server's
    life."""
    llm = tiny_llm(None)
    llm.stats = EngineStats(window=8)
    from ridgeline.engine.sampling import SamplingParams

    llm.generate([[1, 2, 3]], SamplingParams(max_output_tokens=40, eos_token_id=None))
    st = llm.stats
    assert st.steps == 40 and st.tokens == 40
    assert 8 <= len(st.batches) == len(st.step_times) < 16
    assert st.busy_s >= sum(st.step_times)
    batches, times = st.recent(35)
    assert len(batches) == len(times) == 5 and times == st.step_times[-5:]
    with pytest.raises(ConfigError, match="window"):
        st.recent(10)


@pytest.mark.parametrize(
    ("host", "key", "warns"),
    [
        ("0.0.0.0", None, True),
        ("::", None, True),
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
        ("0.0.0.0", KEY, False),
    ],
)
def test_listening_beyond_loopback_without_a_key_warns(
    host: str, key: str | None, warns: bool
) -> None:
    warning = exposure_warning(host, 8000, key)
    assert (warning is not None) == warns
    if warning:
        assert "no API key" in warning and "RIDGELINE_API_KEY" in warning


def test_serve_prints_the_exposure_warning_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the warning came out wrapped over two lines at the console's width. (Nothing
    is built or bound here: the settings check and the server are stand-ins.)"""
    import typer.testing

    import ridgeline.serve.server as server
    from ridgeline.cli import app

    monkeypatch.setattr(server, "check_settings", lambda settings: None)
    monkeypatch.setattr(server, "serve", lambda settings: 0)
    monkeypatch.delenv("RIDGELINE_API_KEY", raising=False)
    result = typer.testing.CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("warning: listening on 0.0.0.0:8000") and "--api-key" in lines[0]
    assert lines[1].startswith("ridgeline serve:") and len(lines) == 2


@pytest.mark.parametrize("key", ["", "two words", "tab\tkey", "naïve"])
def test_an_api_key_that_cannot_travel_in_a_header_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match="RIDGELINE_API_KEY"):
        check_api_key(key)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"threads": -2}, "threads"),
        ({"threads": 0}, "threads"),
        ({"drain_s": -5.0}, "drain_s"),
        ({"drain_s": float("nan")}, "drain_s"),
        ({"max_waiting": -1}, "max_waiting"),
        ({"engine": {"kv_budget_bytes": -1.0}}, "kv_budget_bytes"),
        ({"engine": {"kernels": "fast"}}, "kernels"),
        # regression: a pool too small for one block was found after the model's build
        ({"engine": {"kv_budget_bytes": 1.0}}, "holds no block"),
        ({"engine": {"kv_budget_bytes": 2.0**20, "block_size": 4096}}, "holds no block"),
        ({"tokenizer": "/no/such/dir"}, "--tokenizer"),
        ({"access": Access(max_body_bytes=0)}, "max_body_bytes"),
        ({"access": Access(api_key="")}, "RIDGELINE_API_KEY"),
    ],
)
def test_settings_are_checked_before_anything_is_built(change: dict, needle: str) -> None:
    settings = dataclasses.replace(ServeSettings("gpt2", threads=1), port=_free_port(), **change)
    with pytest.raises(RidgelineError, match=needle):
        check_settings(settings)


def test_a_port_in_use_is_refused_before_the_engine_is_built() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"option --port: cannot listen on 127.0.0.1:{port}"):
            check_settings(ServeSettings("gpt2", port=port, threads=1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "change", [{"temperature": 1e-300}, {"temperature": 1.0, "top_p": 1e-320}], ids=str
)
def test_a_tiny_temperature_or_top_p_is_served_and_the_engine_lives(
    served: Any, change: dict
) -> None:
    """Regression (temperature: found by the fuzz test; top_p: by hand): temperature 1e-300,
    or top_p 1e-320 (0 in fp32: an empty nucleus), made NaN probabilities and the exception
    killed the engine thread; every later request was a 503. Both sample the argmax."""
    c = _client(served, Access())
    body = {"prompt": [5, 9, 200], "max_tokens": 4, "ignore_eos": True}
    r = c.post("/v1/completions", json={**body, **change})
    greedy = c.post("/v1/completions", json={**body, "temperature": 0})
    assert r.status_code == 200 and served.engine.alive
    assert r.json()["choices"][0]["token_ids"] == greedy.json()["choices"][0]["token_ids"]


def test_stopping_the_engine_counts_the_requests_it_cut_short() -> None:
    """What ``serve`` turns into its exit status: 0 after a clean drain, 1 when the drain's
    deadline cut requests short."""
    from ridgeline.engine.sampling import SamplingParams

    served = serve_llm(tiny_llm(None, hidden=256, layers=8))
    engine, events = served.engine, []
    engine.start()
    handle = engine.submit(
        (1, 2, 3), SamplingParams(max_output_tokens=400, eos_token_id=None), events.append
    )
    assert handle is not None
    deadline = time.monotonic() + 30
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.stop() == 1
    assert events[-1].finish_reason == "abort" and engine.state.in_system == 0
    idle = serve_llm(tiny_llm(None))
    idle.engine.start()
    assert idle.engine.stop() == 0


def test_a_request_submitted_while_the_engine_stops_is_refused_not_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression (found by hand: a request killed the engine thread, and the next one hung
    until the drain's deadline): a submit between the stopping thread's drain of its inbox and
    its end was accepted and never answered. Now it is refused (503) or answered."""
    from ridgeline.engine.sampling import SamplingParams
    from ridgeline.serve.engine_loop import EngineLoop

    served = serve_llm(tiny_llm(None))
    engine, events, late = served.engine, [], []
    drain = EngineLoop._cut_all

    def drain_then_submit(self: EngineLoop) -> None:
        drain(self)  # the inbox is empty now; the thread has not ended yet
        late.append(self.submit((1, 2), SamplingParams(max_output_tokens=2), events.append))

    monkeypatch.setattr(EngineLoop, "_cut_all", drain_then_submit)
    engine.start()
    engine.stop()
    assert late == [None] and not engine.alive and engine.state.in_system == 0
