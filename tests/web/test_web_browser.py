"""The explorer's page in a real browser: headless Chromium driven by Playwright against the
page served by uvicorn on 127.0.0.1.

The browser is one already on the machine (``$RIDGELINE_CHROMIUM``, a Chromium on the PATH, or
the one ``playwright install chromium`` downloaded); without one the tests are skipped, saying
why and how to provide one. No test installs anything.
Screenshots go to ``$RIDGELINE_SCREENSHOTS`` when set (``docs/explorer`` holds the committed ones),
else to a temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # a server, a browser

pytest.importorskip("fastapi", reason="the explorer needs the 'web' extra")
pytest.importorskip("uvicorn", reason="the explorer needs the 'web' extra")
pytest.importorskip("playwright", reason="the browser test needs the 'web-test' extra")

import uvicorn  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

from ridgeline.web.app import create_app  # noqa: E402

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Flags this machine's closed network needs (no background connections, no QUIC, no GPU).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
GPT2_PARAMS = "124,439,808"
WAIT_MS = 20_000


def find_chromium() -> Path | None:
    """A Chromium already on this machine: ``$RIDGELINE_CHROMIUM``, one on the PATH, or the one
    ``playwright install chromium`` downloads. The tests never install one."""
    named = os.environ.get("RIDGELINE_CHROMIUM")
    candidates = [Path(named)] if named else []
    candidates += [Path(w) for n in CHROMIUM_NAMES if (w := shutil.which(n))]
    # where ``playwright install chromium`` puts it (Playwright's docs, "Managing browser binaries")
    store = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache" / "ms-playwright"
    candidates += sorted(Path(store).glob("chromium-*/chrome-linux*/chrome"), reverse=True)
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


NO_BROWSER = (
    "no Chromium on this machine (tried $RIDGELINE_CHROMIUM, {names} on the PATH and "
    "playwright's own); install one (apt-get install chromium, or playwright install chromium) "
    "or point RIDGELINE_CHROMIUM at it"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    port = _free_port()
    config = uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = find_chromium()
    if chromium is None:
        pytest.skip(NO_BROWSER.format(names=", ".join(CHROMIUM_NAMES)))
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("RIDGELINE_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def decode_x(page: Page) -> float:
    js = "document.getElementById('roofline-plot').data.find(t => t.name === 'decode').x[0]"
    return float(page.evaluate(js))


def wait_text(page: Page, selector: str, text: str) -> None:
    page.wait_for_function(
        "([s, t]) => (document.querySelector(s)?.textContent ?? '').includes(t)",
        arg=[selector, text],
        timeout=WAIT_MS,
    )


def test_batch_slider_moves_the_decode_point_and_flips_the_bound(
    page: Page, base_url: str, shots: Path
) -> None:
    page.goto(f"{base_url}#model=llama-3.1-8b&hw=h100-sxm&batch=1&context=128&prompt=512")
    wait_text(page, "#decode-bound", "memory-bound")
    x1, ai1 = decode_x(page), page.text_content("#decode-ai")

    page.focus("#batch-range")  # the keyboard alone drives the slider
    page.keyboard.press("ArrowRight")
    page.wait_for_function("location.hash.includes('batch=2&')", timeout=WAIT_MS)
    page.wait_for_function(f"document.getElementById('decode-ai').textContent !== '{ai1}'")
    assert decode_x(page) > x1

    page.keyboard.press("End")  # batch 4096
    wait_text(page, "#decode-bound", "compute-bound")
    assert page.input_value("#batch") == "4096" and "batch=4096" in page.url
    assert decode_x(page) > 100 * x1
    assert "compute" in page.get_attribute("#decode-bound", "class")
    rows = page.locator("#ops-table tbody tr")
    assert rows.count() == 11 and "mlp.up_gate" in rows.nth(6).text_content()

    page.focus("#batch-range")
    for _ in range(6):  # back to batch 64 for a picture with both bounds in view
        page.keyboard.press("ArrowLeft")
    wait_text(page, "#decode-bound", "memory-bound")
    page.wait_for_timeout(400)  # let the comparison catch up before the picture
    page.screenshot(path=shots / "explorer-1280x800.png")


def test_every_control_is_labelled_and_the_narrow_page_does_not_overflow(
    page: Page, base_url: str, shots: Path
) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(base_url)
    wait_text(page, "#decode-bound", "-bound")
    unlabelled = page.evaluate(
        "[...document.querySelectorAll('input, select, button')]"
        ".filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')"
        " && !e.textContent.trim()).map(e => e.id)"
    )
    assert unlabelled == []
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.screenshot(path=shots / "explorer-narrow.png")


def test_upload_a_config_shows_its_parameter_count_and_the_link_keeps_it(
    page: Page, base_url: str, tmp_path: Path, browser: Any
) -> None:
    cfg = json.loads(resources.files("ridgeline.data").joinpath("models", "gpt2.json").read_text())
    path = tmp_path / "my-gpt2.json"
    path.write_text(json.dumps(cfg))
    page.goto(base_url)
    wait_text(page, "#model-name", "llama-3.1-8b")
    page.set_input_files("#config-file", str(path))
    wait_text(page, "#model-params", GPT2_PARAMS)
    wait_text(page, "#status", "my-gpt2 on h100-sxm")
    assert page.input_value("#model") == "__uploaded__"
    assert "config=" in page.url

    shared = browser.new_page()  # the shareable URL carries the uploaded config
    try:
        shared.goto(page.url)
        wait_text(shared, "#model-params", GPT2_PARAMS)
    finally:
        shared.close()


def test_a_broken_config_is_reported_not_applied(page: Page, base_url: str, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    page.goto(base_url)
    wait_text(page, "#model-name", "llama-3.1-8b")
    page.set_input_files("#config-file", str(path))
    wait_text(page, "#status", "is missing")
    assert page.input_value("#model") == "llama-3.1-8b"


def test_simulate_panel_runs_a_bounded_simulation_and_the_schedule_is_shown(
    page: Page, base_url: str, shots: Path
) -> None:
    page.goto(f"{base_url}#model=llama-3.1-8b&hw=h100-sxm&batch=8&context=2048&sched=ibm-spyre")
    wait_text(page, "#sched-summary", "compiled")
    assert "ibm-spyre" in page.text_content("#sched-summary")
    page.fill("#sim-requests", "80")
    page.fill("#sim-rate", "20")
    page.press("#sim-output", "Enter")  # the form submits from the keyboard
    wait_text(page, "#sim-summary", "80 done")
    assert page.evaluate("document.getElementById('sim-progress').value") == 1
    traces = page.evaluate("document.getElementById('sim-latency-plot').data.length")
    assert traces == 2
    wait_text(page, "#compare-binds", "binds")
    page.wait_for_timeout(300)
    text = page.inner_text("body")  # every view rendered from fields the API really has
    assert "undefined" not in text and "NaN" not in text
    page.screenshot(path=shots / "explorer-full.png", full_page=True)  # make screenshots
    page.fill("#sim-requests", "5000")
    page.click("#sim-run")
    wait_text(page, "#sim-summary", "more than the explorer runs")
    summary = page.text_content("#sim-summary") or ""
    assert summary.startswith("Not simulated: num_requests: 5,000 requests")  # no "Value error,"
    stale = page.evaluate("(document.getElementById('sim-latency-plot').data || []).length")
    assert stale == 0  # the refused run left no plot of the earlier one
    page.locator("#simulate-card").screenshot(path=shots / "explorer-simulate.png")


def test_a_chromium_named_by_the_environment_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "my-chromium"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("RIDGELINE_CHROMIUM", str(fake))
    assert find_chromium() == fake


def test_without_a_chromium_the_browser_tests_skip_and_install_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # regression: the set-up ran 'apt-get install -y chromium' as root; now it only looks
    monkeypatch.delenv("RIDGELINE_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on the PATH
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "none"))  # nor playwright's
    assert find_chromium() is None
    assert not (tmp_path / "none").exists()
