"""Fault injection in a running app: the engine raising, a stuck engine call, the
scheduler's batching loop crashing, and a drain for shutdown. The faults are injected into
the real engine and scheduler of a real app (the wrapped calls still do the real work),
with continuous batching (the default: a live step fails or sticks, the join loop crashes)
and with static batches (a batch's engine call, the batch forming)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import make_settings
from fastapi.testclient import TestClient

from server.app import create_app
from server.engine.live import LiveDecoder

TEXT = {"text": "The patient takes one tablet a day.", "domain": "medical"}


@pytest.fixture(params=["continuous", "static"])
def client(store_root: Path, request: pytest.FixtureRequest) -> Iterator[TestClient]:
    # A 500 is an answer to check here, not an exception to re-raise in the test.
    # 2 s: short enough for the stuck-call test, long enough that a heartbeat a loaded
    # 2-core host delays does not fail liveness in the tests that expect it alive
    app = create_app(make_settings(store_root, liveness_stall_s=2.0,
                                   scheduler={"continuous": request.param == "continuous"}))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def engine_call(client: TestClient, monkeypatch: pytest.MonkeyPatch,
                wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Wrap what the engine thread runs for the scheduler: a live step (continuous
    batching) or a static batch's `Engine.translate`."""
    if client.app.state.settings.scheduler.continuous:  # type: ignore[attr-defined]
        monkeypatch.setattr(LiveDecoder, "step", wrapper(LiveDecoder.step))  # self in args
    else:
        engine = client.app.state.runtime.engine  # type: ignore[attr-defined]
        monkeypatch.setattr(engine, "translate", wrapper(engine.translate))


def wait_until(predicate: Callable[[], bool], *, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def live(client: TestClient) -> Any:
    return client.get("/health/live")


def test_an_engine_error_fails_its_batch_only(client: TestClient,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def failing_once(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            return real(*args)
        return call

    engine_call(client, monkeypatch, failing_once)

    failed = client.post("/translate", json=TEXT)
    assert failed.status_code == 500
    assert failed.json()["error"]["code"] == "internal"
    assert "CUDA" not in failed.text  # details go to the log, not to the client
    assert client.post("/translate", json=TEXT).status_code == 200
    assert live(client).status_code == 200


def test_a_stuck_engine_call_fails_liveness_until_it_returns(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def stuck(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            release.wait(60)
            return real(*args)
        return call

    engine_call(client, monkeypatch, stuck)
    assert live(client).status_code == 200
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(client.post, "/translate", json=TEXT)
        # a heartbeat a loaded host delays past the bound may answer 503 for a moment
        # before the call starts: wait for the engine thread's own reason
        wait_until(lambda: "engine thread: one call has run for" in live(client).text)
        answer = live(client)
        assert answer.status_code == 503
        error = answer.json()["error"]
        assert error["code"] == "not_alive"
        assert "engine thread: one call has run for" in error["message"]
        release.set()
        assert pending.result(60).status_code == 200
    assert live(client).status_code == 200


def test_a_crashed_batching_loop_fails_liveness_and_waiting_requests(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler = client.app.state.scheduler  # type: ignore[attr-defined]

    def broken() -> list[Any]:
        raise KeyError("a bug in batch forming")

    continuous = client.app.state.settings.scheduler.continuous  # type: ignore[attr-defined]
    monkeypatch.setattr(scheduler, "_take_joiners" if continuous else "_take_batch", broken)

    started = time.monotonic()
    response = client.post("/translate", json=TEXT)
    assert response.status_code == 503, response.text
    assert "the batching loop crashed" in response.json()["error"]["message"]
    assert time.monotonic() - started < 25  # at once, not at the 30 s deadline
    error = live(client).json()["error"]
    assert error["code"] == "not_alive" and "scheduler: the batching loop crashed" in \
        error["message"]
    assert client.post("/translate", json=TEXT).status_code == 503  # refused at submit


def test_a_silent_batching_loop_fails_liveness(client: TestClient) -> None:
    scheduler = client.app.state.scheduler  # type: ignore[attr-defined]
    scheduler.heartbeat -= 10  # as if the loop had not run for 10 s with the engine idle

    error = live(client).json()["error"]

    assert "scheduler: no heartbeat for" in error["message"]
    wait_until(lambda: live(client).status_code == 200, timeout=5)  # the idle loop beats


def test_draining_refuses_new_work_and_turns_readiness_off(client: TestClient) -> None:
    lifecycle = client.app.state.lifecycle  # type: ignore[attr-defined]
    assert client.get("/health/ready").status_code == 200

    lifecycle.begin_drain()

    ready = client.get("/health/ready")
    assert ready.status_code == 503 and "draining" in ready.json()["checks"]
    refused = client.post("/translate", json=TEXT)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
    assert refused.json()["error"]["code"] == "not_ready"
    assert live(client).status_code == 200
    assert client.get("/metrics").status_code == 200
