"""Every case of the bad-input corpus (``bad_inputs``) is refused cleanly:

- a loader raises ``RidgelineError`` with one line that names the file, line or field;
- a CLI command exits 2 with exactly one line on stderr (``error: ...``), nothing on stdout and
  no traceback;
- an API endpoint answers a 4xx whose detail names the field;
- ``ridgeline serve`` answers a 4xx in OpenAI's error shape whose ``param`` names the field.

No case may pass silently (exit 0, a 2xx) or hang.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing

from bad_inputs import (
    API_CASES,
    BIG,
    CLI_CASES,
    FILE_CASES,
    SERVE_CASES,
    SERVE_KEY,
    ApiCase,
    CliCase,
    FileCase,
    ServeCase,
)
from ridgeline.cli import app
from ridgeline.errors import RidgelineError
from ridgeline.lab.store import ResultsStore
from ridgeline.quiz.sheet import read_answer_sheet
from ridgeline.quiz.store import AttemptStore
from ridgeline.sim import load_trace
from ridgeline.specs import get_accelerator, get_model
from ridgeline.sweep import load_spec, read_store
from ridgeline.sweep.workload import read_trace

LOADERS: dict[str, Callable[[str], Any]] = {
    "config": get_model,
    "chip": get_accelerator,
    "trace": load_trace,
    "sweep_trace": read_trace,
    "spec": load_spec,
    "sheet": read_answer_sheet,
    "store": read_store,
    "lab_db": lambda p: ResultsStore(p).records(),
    "quiz_db": lambda p: AttemptStore(p).status("me", "q"),
}


def _write(tmp_path: Path, name: str, content: bytes | None) -> Path:
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    return path


@pytest.mark.parametrize("case", FILE_CASES, ids=lambda c: c.id)
def test_a_loader_refuses_in_one_line(case: FileCase, tmp_path: Path) -> None:
    path = _write(tmp_path, case.name, case.content)
    where = str(path) if case.content is not None else str(path)
    with pytest.raises(RidgelineError) as caught:
        LOADERS[case.loader](where)
    message = str(caught.value)
    assert "\n" not in message and case.needle in message, message
    assert len(message) < 600, message


@pytest.fixture(scope="module")
def cli() -> Iterator[typer.testing.CliRunner]:
    """A runner over one command tree (Typer rebuilds it per invocation, ~1 s on this machine)."""
    command = typer.main.get_command(app)
    patch = pytest.MonkeyPatch()
    patch.setattr(typer.testing, "_get_command", lambda _: command)
    yield typer.testing.CliRunner()
    patch.undo()


def _needs_torch(case: CliCase) -> bool:
    engine = case.args[0] in ("generate", "bench", "serve", "engine") or case.args[:2] in (
        ("lab", "sweep"),
        ("lab", "profile"),
        ("lab", "kv"),
        ("lab", "calibrate"),
        ("lab", "serve-check"),
    )
    return engine and importlib.util.find_spec("torch") is None


@pytest.mark.slow
@pytest.mark.parametrize("case", CLI_CASES, ids=lambda c: c.id)
def test_a_command_refuses_in_one_line(
    case: CliCase, tmp_path: Path, cli: typer.testing.CliRunner
) -> None:
    if _needs_torch(case):
        pytest.skip("the engine and the lab need torch")
    for name, content in case.files.items():
        _write(tmp_path, name, content)
    args = [a.replace("{tmp}", str(tmp_path)) for a in case.args]
    env = {k: v.replace("{tmp}", str(tmp_path)) for k, v in case.env.items()}
    result = cli.invoke(app, args, env=env)
    err = result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 2, (result.exit_code, result.stdout[-300:], err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert case.needle in err, err
    assert "Traceback" not in err and result.stdout == ""


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    pytest.importorskip("fastapi", reason="the explorer needs the 'web' extra")
    pytest.importorskip("httpx", reason="TestClient needs httpx")
    from fastapi.testclient import TestClient

    from ridgeline.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("case", API_CASES, ids=lambda c: c.id)
def test_an_endpoint_refuses_with_the_field(case: ApiCase, client: Any) -> None:
    if case.raw is not None:
        headers = {"content-type": "application/json"}
        r = client.request(case.method, case.path, content=case.raw, headers=headers)
    else:
        r = client.request(case.method, case.path, json=case.body)
    assert r.status_code == case.status, (r.status_code, r.text[:300])
    detail = r.json()["detail"]
    assert isinstance(detail, list) and detail, detail
    text = " ".join(f"{d.get('loc')} {d.get('msg')}" for d in detail)
    assert case.needle in text, text


def test_big_config_answers_where_it_is_cheap(client: Any) -> None:
    """A model at the size bounds (1,000 layers, hidden 131,072) is refused only where its work
    is over budget (``EXPENSIVE``); the KV view answers it, with the right numbers."""
    r = client.post("/api/kv", json={"config": BIG})
    assert r.status_code == 200, r.text[:300]
    head_dim = BIG["hidden_size"] // BIG["num_attention_heads"]
    per_token = 2 * BIG["num_hidden_layers"] * BIG["num_key_value_heads"] * head_dim * 2  # bf16
    assert r.json()["kv_bytes_per_token"] == per_token == 32_768_000


@pytest.fixture(scope="module")
def serve_clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, Any]]:
    """Two faces of one tiny served engine (a byte-level tokenizer with a chat template): open,
    and keyed with ``SERVE_KEY``."""
    pytest.importorskip("torch")
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    import dataclasses

    from fastapi.testclient import TestClient

    from ridgeline.serve.app import Access, create_app
    from serve_support import make_tokenizer, serve_llm, tiny_llm

    served = serve_llm(tiny_llm(make_tokenizer(tmp_path_factory.mktemp("tok"))))
    served.engine.start()
    keyed = dataclasses.replace(served, access=Access(api_key=SERVE_KEY))
    yield {
        k: TestClient(create_app(s), raise_server_exceptions=False)
        for k, s in ((False, served), (True, keyed))
    }
    assert served.engine.state.in_system == 0 and served.engine.llm.scheduler.kv.pool.num_used == 0
    served.engine.stop()


@pytest.mark.torch
@pytest.mark.parametrize("case", SERVE_CASES, ids=lambda c: c.id)
def test_the_server_refuses_in_the_openai_error_shape(case: ServeCase, serve_clients: dict) -> None:
    client = serve_clients[case.keyed]
    headers = dict(case.headers)
    if case.raw is not None:
        r = client.request(
            case.method,
            case.path,
            content=case.raw,
            headers={"content-type": "application/json", **headers},
        )
    else:
        r = client.request(case.method, case.path, json=case.body, headers=headers)
    assert r.status_code == case.status, (r.status_code, r.text[:300])
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    err = body["error"]
    assert err["param"] == case.param, err
    assert case.needle in err["message"] and "\n" not in err["message"], err
    assert len(err["message"]) < 400, err
