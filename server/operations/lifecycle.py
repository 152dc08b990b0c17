"""Graceful shutdown: on SIGTERM the server drains before it exits.

1. At once: readiness answers 503 (`draining`) and every new request except the health
   probes and `/metrics` gets 503 `not_ready` with `Retry-After` (no new work). The
   listener stays open, so probes and late clients get an answer rather than a refused
   connection.
2. Requests already in flight run to their end (their own deadline bounds them), for at
   most `NMT_SHUTDOWN_DRAIN_S`. A request's deadline grows with the work queued before it
   (up to 600 s), so the bound is what ends the drain on a busy server: once it passes,
   document jobs go back to their queue (the next start resumes them), batch jobs fail
   (their clients send them again), and every sentence still waiting or running in a
   scheduler is answered 503 `not_ready` with `Retry-After` (`Draining`), so that its
   client hears why rather than seeing its connection cut.
3. Then (once those answers are out, or `AFTER_DRAIN_S` later) uvicorn shuts down as usual
   (listener closed, requests still running get `AFTER_DRAIN_S` more, lifespan shutdown)
   and the process exits with status 0. A second SIGTERM or SIGINT exits without waiting
   for the drain.

The Kubernetes manifest agrees with it: a preStop sleep lets the endpoints controller take
the pod out of its Service first, and terminationGracePeriodSeconds covers the sleep plus
the drain bound (tests/deploy checks this).
"""

from __future__ import annotations

import json
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from server.settings import Settings

log = logging.getLogger(__name__)
EXEMPT = frozenset({"/health/live", "/health/ready", "/metrics"})  # probes, not work
RETRY_AFTER_S = 5
AFTER_DRAIN_S = 5  # uvicorn's own grace for requests still running after the drain bound


class Lifecycle:
    """Whether the server drains, and how many requests are in flight."""

    def __init__(self) -> None:
        self.draining_since: float | None = None
        self.in_flight = 0
        # run once when the drain bound passes with work left (the lifespan's: stop the
        # jobs, answer what waits in the schedulers)
        self.at_bound: list[Callable[[], Awaitable[None]]] = []
        self.bound_passed = False

    async def pass_bound(self) -> None:
        if self.bound_passed:
            return
        self.bound_passed = True
        log.warning("drain bound passed with %d request(s) in flight: answering what still "
                    "waits with 503", self.in_flight)
        for action in self.at_bound:
            try:
                await action()
            except Exception:  # the process exits anyway
                log.exception("answering the remaining work failed")

    @property
    def draining(self) -> bool:
        return self.draining_since is not None

    def begin_drain(self) -> None:
        if self.draining_since is None:
            self.draining_since = time.monotonic()
            log.warning("draining: %d request(s) in flight; new requests get 503",
                        self.in_flight)


class DrainMiddleware:
    """Counts requests in flight and refuses new work once the server drains (pure ASGI)."""

    def __init__(self, app: ASGIApp, lifecycle: Lifecycle) -> None:
        self.app = app
        self.lifecycle = lifecycle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT:
            await self.app(scope, receive, send)
            return
        if self.lifecycle.draining:
            await _refuse(send)
            return
        self.lifecycle.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.lifecycle.in_flight -= 1


async def _refuse(send: Send) -> None:
    body = json.dumps({"error": {"code": "not_ready", "message": (
        "the server is shutting down and takes no new work; retry on another replica")}}
    ).encode()
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_S).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class DrainingServer(uvicorn.Server):
    """uvicorn's server with step 1-2 above in front of its own shutdown (step 3)."""

    def __init__(self, config: uvicorn.Config, lifecycle: Lifecycle, *,
                 drain_s: float) -> None:
        super().__init__(config)
        self.lifecycle = lifecycle
        self.drain_s = drain_s

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.lifecycle.draining or sig not in (signal.SIGTERM, signal.SIGINT):
            super().handle_exit(sig, frame)  # a second signal: exit now
            return
        self.lifecycle.begin_drain()  # on_tick sets should_exit once drained

    async def on_tick(self, counter: int) -> bool:
        started = self.lifecycle.draining_since
        if started is not None and not self.should_exit:
            waited = time.monotonic() - started
            if self.lifecycle.in_flight and waited >= self.drain_s:
                await self.lifecycle.pass_bound()  # once: their answers go out meanwhile
            if self.lifecycle.in_flight == 0 or waited >= self.drain_s + AFTER_DRAIN_S:
                log.warning("drained after %.1f s (%d request(s) still in flight); exiting",
                            waited, self.lifecycle.in_flight)
                self.should_exit = True
        return await super().on_tick(counter)


def serve(app: FastAPI, settings: Settings) -> None:
    """Run `app` with uvicorn until SIGTERM/SIGINT, draining first (see the module doc)."""
    config = uvicorn.Config(app, host=settings.host, port=settings.port,
                            log_level=settings.log_level,
                            timeout_graceful_shutdown=AFTER_DRAIN_S)
    DrainingServer(config, app.state.lifecycle, drain_s=settings.shutdown_drain_s).run()
