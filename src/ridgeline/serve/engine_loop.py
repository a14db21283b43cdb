"""The engine's one thread: it alone touches the ``LLM``; the HTTP layer talks to it by queues.

::

    HTTP handlers (asyncio)                     engine thread
    ───────────────────────                     ─────────────────────────────────────────────
    submit(prompt, params, sink) ──inbox──▶  add_request / abort   (between steps only)
                                             LLM.step()  = schedule → execute → update
    sink(TokenEvent) ◀── call_soon_threadsafe ── new tokens of each request, finish reasons

A step never waits on HTTP: submissions and aborts queue up and are taken between steps, and
events go out through each request's ``sink`` (which must not block: the app's sink hands the
event to its event loop). The waiting queue is bounded: ``submit`` refuses (returns None) once
``max_num_seqs + max_waiting`` requests are in the system, so overload is answered with 429
instead of growing memory.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ridgeline.engine.llm import LLM
from ridgeline.engine.sampling import SamplingParams
from ridgeline.errors import RidgelineError
from ridgeline.serve.metrics import ServeMetrics
from ridgeline.serving.request import FinishReason, RequestStatus

IDLE_WAIT_S = 0.05  # how long the idle thread sleeps between looks at its inbox


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """What one step did for one request: its new tokens, and on the last event why it ended
    (``length``, ``stop``, ``abort``, or ``rejected`` with ``error`` saying why)."""

    token_ids: tuple[int, ...]
    finish_reason: FinishReason | None = None
    error: str | None = None
    num_cached_tokens: int = 0


Sink = Callable[[TokenEvent], None]


@dataclass(slots=True)
class _Live:
    """A request the engine thread is serving."""

    rid: str
    sink: Sink
    submitted_s: float
    sent: int = 0
    first_s: float | None = None
    last_s: float | None = None


@dataclass(frozen=True, slots=True)
class _Submit:
    handle: int
    prompt_ids: tuple[int, ...]
    params: SamplingParams
    sink: Sink
    submitted_s: float


@dataclass(slots=True)
class LoopState:
    """Counts the HTTP layer reads without a lock (ints: atomic reads under the GIL)."""

    in_system: int = 0  # submitted and not yet finished
    running: int = 0
    waiting: int = 0
    steps: int = 0
    error: str | None = None  # the exception that stopped the thread, if any
    cut: int = 0  # requests ended by the thread stopping, not by finishing
    closed: bool = False  # the thread is stopping: submit refuses (set under counts_lock)
    counts_lock: threading.Lock = field(default_factory=threading.Lock)


class EngineLoop:
    """Runs ``llm`` on its own thread.

    Args:
        llm: the engine (owned by this loop's thread from ``start`` on).
        max_waiting: requests allowed to wait beyond the running ones (then 429).
        metrics: Prometheus metrics to keep current (None: none).
    """

    def __init__(self, llm: LLM, max_waiting: int, metrics: ServeMetrics | None = None) -> None:
        self.llm = llm
        self.capacity = llm.config.max_num_seqs + max_waiting
        self.metrics = metrics
        self.state = LoopState()
        self._inbox: queue.SimpleQueue[_Submit | int] = queue.SimpleQueue()
        self._handles = itertools.count()
        self._live: dict[int, _Live] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ridgeline-engine", daemon=True)

    # ---- the HTTP side (any thread) ----------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        """The thread runs and takes requests (False from the moment it starts stopping)."""
        return self._thread.is_alive() and not self.state.closed

    def submit(self, prompt_ids: tuple[int, ...], params: SamplingParams, sink: Sink) -> int | None:
        """Queue a request; its handle, or None when the system is full (answer 429) or the
        thread is stopping (503).

        NOTE: the request goes into the inbox under the lock that ``_cut_all`` closes the loop
        with, so a request is either refused or in the inbox when the thread drains it: one
        submitted while the thread stopped used to land after the drain and wait forever.
        """
        with self.state.counts_lock:
            if self.state.in_system >= self.capacity or not self.alive:
                return None
            self.state.in_system += 1
            handle = next(self._handles)
            self._inbox.put(_Submit(handle, prompt_ids, params, sink, time.monotonic()))
        return handle

    def abort(self, handle: int) -> None:
        """Stop a request whose client went away (its blocks are freed before the next step)."""
        self._inbox.put(handle)

    def stop(self, timeout_s: float = 10.0) -> int:
        """Stop the thread after its current step; the number of requests it cut short
        (those still live or queued get ``abort``)."""
        self._stop.set()
        self._inbox.put(-1)  # wake it
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return self.state.cut

    # ---- the engine thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._take_inbox(block=not self.llm.scheduler.has_unfinished)
                outcome = self.llm.step()
                if outcome is not None:
                    self._publish(outcome.batch.requests, outcome.finished)
                self._refresh_counts()
        except Exception as e:  # the engine broke: tell every client, refuse new ones
            self.state.error = f"{type(e).__name__}: {e}"
            raise
        finally:
            self._cut_all()

    def _cut_all(self) -> None:
        """End every request still live or queued with ``abort`` (the thread is stopping)."""
        with self.state.counts_lock:  # from here on submit refuses: the inbox only shrinks
            self.state.closed = True
        why = self.state.error or "the server is stopping"
        for handle in list(self._live):
            self.state.cut += 1
            self._end(handle, TokenEvent((), FinishReason.ABORTED, why))
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Submit):
                self.state.cut += 1
                self._settle(item.sink, TokenEvent((), FinishReason.ABORTED, why))

    def _take_inbox(self, block: bool) -> None:
        try:
            item = self._inbox.get(timeout=IDLE_WAIT_S) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            if isinstance(item, _Submit):
                self._admit(item)
            elif item >= 0:
                self._abort(item)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _admit(self, s: _Submit) -> None:
        try:
            rid = self.llm.add_request(s.prompt_ids, s.params)
        except RidgelineError as e:
            self._settle(s.sink, TokenEvent((), FinishReason.REJECTED, str(e)))
            return
        live = _Live(rid, s.sink, s.submitted_s)
        self._live[s.handle] = live
        req = self.llm.request(rid)
        if req.status is RequestStatus.REJECTED:
            self._end(s.handle, TokenEvent((), FinishReason.REJECTED, req.reject_reason))

    def _abort(self, handle: int) -> None:
        live = self._live.get(handle)
        if live is not None:
            self.llm.abort(live.rid)
            self._end(handle, TokenEvent((), FinishReason.ABORTED))

    def _publish(self, scheduled: Any, finished: Any) -> None:
        """Send every request of the step its new tokens; end the finished ones."""
        by_rid = {live.rid: h for h, live in self._live.items()}
        now = time.monotonic()
        done = {r.request_id for r in finished}
        for sr in scheduled:
            handle = by_rid.get(sr.request_id)
            if handle is None or sr.request_id in done:
                continue
            live = self._live[handle]
            new = self.llm.request(live.rid).output_token_ids[live.sent :]
            if new:
                self._tokens(live, now, len(new))
                live.sink(TokenEvent(tuple(new)))
        for rid in done:
            handle = by_rid.get(rid)
            if handle is not None:
                self._end(handle, None, now)

    def _tokens(self, live: _Live, now: float, n: int) -> None:
        if live.first_s is None:
            live.first_s = now
            if self.metrics is not None:
                self.metrics.ttft.observe(now - live.submitted_s)
        live.sent += n
        live.last_s = now

    def _end(self, handle: int, event: TokenEvent | None, now: float | None = None) -> None:
        """Collect the request's output and send its last event (``event`` overrides)."""
        live = self._live.pop(handle)
        out = self.llm.take_output(live.rid)
        if event is None:
            new = out.token_ids[live.sent :]
            if new:
                self._tokens(live, now or time.monotonic(), len(new))
            event = TokenEvent(tuple(new), out.finish_reason, None, out.num_cached_tokens)
            self._observe_tpot(live)
        self._settle(live.sink, event)

    def _observe_tpot(self, live: _Live) -> None:
        if self.metrics is None or live.first_s is None or live.last_s is None:
            return
        if live.sent > 1:
            self.metrics.tpot.observe((live.last_s - live.first_s) / (live.sent - 1))

    def _settle(self, sink: Sink, event: TokenEvent) -> None:
        with self.state.counts_lock:
            self.state.in_system -= 1
        if self.metrics is not None:
            self.metrics.finished.labels(reason=event.finish_reason or "unknown").inc()
        sink(event)

    def _refresh_counts(self) -> None:
        sched = self.llm.scheduler
        st = self.state
        st.running, st.waiting = len(sched.running), len(sched.waiting)
        st.steps = self.llm.stats.steps
        if self.metrics is not None:
            self.metrics.refresh(self.llm, st.waiting + self._inbox.qsize())
