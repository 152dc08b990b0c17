"""Queue limits (429 + Retry-After) and deadlines (504) through the HTTP stack."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import build_store, make_client
from fastapi.testclient import TestClient


@contextmanager
def engine_blocked(client: TestClient) -> Iterator[threading.Event]:
    """Occupy the engine thread until the gate opens (batches queue up behind it)."""
    gate = threading.Event()
    client.app.state.engine_thread._executor.submit(gate.wait, 30)  # type: ignore[attr-defined]
    try:
        yield gate
    finally:
        gate.set()


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_full_queue_is_429_with_retry_after(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    # static batches: the blocked engine call holds the one running batch
    with make_client(root, scheduler={"max_queue": 2, "retry_after_s": 2,
                                      "continuous": False}) as client:
        scheduler = client.app.state.scheduler  # type: ignore[attr-defined]
        responses: list[Any] = []

        def send(text: str) -> None:
            responses.append(client.post("/translate", json={"text": text, "domain": "law"}))

        with engine_blocked(client) as gate:
            first = threading.Thread(target=send, args=("First.",))
            first.start()
            registry = client.app.state.metrics.registry  # type: ignore[attr-defined]
            # the first batch left the queue and waits for the engine
            wait_for(lambda: registry.get_sample_value(
                "nmt_scheduler_batch_sentences_count") == 1.0)
            waiting = [threading.Thread(target=send, args=(t,)) for t in ("Two.", "Three.")]
            for thread in waiting:
                thread.start()
            wait_for(lambda: scheduler.depth == 2)
            rejected = client.post("/translate", json={"text": "Four.", "domain": "law"})
            gate.set()
            for thread in [first, *waiting]:
                thread.join(10)
        assert rejected.status_code == 429
        assert rejected.headers["retry-after"] == "2"
        assert rejected.json()["error"]["code"] == "queue_full"
        assert sorted(r.status_code for r in responses) == [200, 200, 200]
        again = client.post("/translate", json={"text": "Again.", "domain": "law"})
        assert again.status_code == 200


def test_deadline_is_504(tmp_path: Path) -> None:
    """The engine is held until the answer arrives, so the deadline passes whatever the
    machine's load: the answer can only be 504 (nothing here reads the clock)."""
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    with make_client(root, scheduler={"request_timeout_s": 0.3}) as client:
        with engine_blocked(client):
            response = client.post("/translate", json={"text": "Late.", "domain": "law"})
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "timeout"
        assert client.app.state.scheduler.depth == 0  # type: ignore[attr-defined]
        # the server recovers; the next request gets a deadline no load can miss (its
        # speed is not what this test checks)
        client.app.state.translator.timeout_s = 300.0  # type: ignore[attr-defined]
        assert client.post("/translate", json={"text": "On time.", "domain": "law"}
                           ).status_code == 200
