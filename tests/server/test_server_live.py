"""A real uvicorn server on 127.0.0.1 and a free port, with real HTTP clients."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from conftest import TOKEN, build_store, make_settings
from fastapi import FastAPI

from server.app import create_app


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FastAPI]]:
    root = build_store(tmp_path_factory.mktemp("live") / "store")
    # static batches: the tests count the batches concurrent clients share
    app = create_app(make_settings(root, scheduler={"max_wait_ms": 5.0, "continuous": False}))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(10)


def test_endpoints_over_real_http(live: tuple[str, FastAPI]) -> None:
    base, _ = live
    with httpx.Client(base_url=base, timeout=30) as http:
        assert http.get("/health/live").json() == {"status": "alive"}
        assert http.get("/health/ready").status_code == 200
        result = http.post("/translate", json={"text": "Click the button. Open the file."})
        assert result.status_code == 200
        assert result.json()["routing"]["domain"] == "it"
        batch = http.post("/translate/batch", json={"items": [{"text": "a", "domain": "law"},
                                                              {"text": "b"}]})
        assert len(batch.json()["results"]) == 2
        assert http.get("/domains").status_code == 200
        assert http.get("/admin/domains").status_code == 401
        admin = http.get("/admin/domains", headers={"Authorization": f"Bearer {TOKEN}"})
        assert admin.status_code == 200
        assert "nmt_api_requests_total" in http.get("/metrics").text
        assert http.get("/openapi.json").json()["info"]["title"] == "nmt-server"


def test_concurrent_clients_are_batched_together(live: tuple[str, FastAPI]) -> None:
    base, app = live
    registry = app.state.metrics.registry
    before = registry.get_sample_value("nmt_scheduler_batch_sentences_count") or 0.0
    sentences_before = registry.get_sample_value("nmt_scheduler_batch_sentences_sum") or 0.0
    statuses: list[int] = []

    def send(index: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            domain = ("medical", "law", "it", "generic")[index % 4]
            response = http.post("/translate", json={"text": f"Text number {index}.",
                                                     "domain": domain})
            statuses.append(response.status_code)

    gate = threading.Event()
    app.state.engine_thread._executor.submit(gate.wait, 30)  # requests gather in the queue
    threads = [threading.Thread(target=send, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    # every sentence is either queued or in the batch that waits for the engine
    wait_for(lambda: app.state.scheduler.depth + (registry.get_sample_value(
        "nmt_scheduler_batch_sentences_sum") or 0.0) - sentences_before >= 12)
    gate.set()
    for thread in threads:
        thread.join(30)
    assert statuses == [200] * 12
    batches = (registry.get_sample_value("nmt_scheduler_batch_sentences_count") or 0) - before
    assert batches < 12  # sentences of different clients and domains shared batches


def test_a_disconnected_client_frees_its_queue_slot(live: tuple[str, FastAPI]) -> None:
    base, app = live
    registry = app.state.metrics.registry
    computed_before = registry.get_sample_value("nmt_scheduler_batch_sentences_sum") or 0.0
    gate = threading.Event()
    app.state.engine_thread._executor.submit(gate.wait, 30)
    statuses: list[int] = []

    def first() -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            statuses.append(http.post("/translate", json={"text": "First.",
                                                          "domain": "law"}).status_code)

    blocker = threading.Thread(target=first)
    try:
        blocker.start()
        wait_for(lambda: (registry.get_sample_value("nmt_scheduler_batch_sentences_sum")
                          or 0) > computed_before)
        with pytest.raises(httpx.ReadTimeout), httpx.Client(base_url=base, timeout=0.3) as quick:
            quick.post("/translate", json={"text": "Gone. Away. Now.", "domain": "law"})
        wait_for(lambda: app.state.scheduler.depth == 0)  # freed before the engine was free
        assert not gate.is_set()
        wait_for(lambda: registry.get_sample_value(
            "nmt_api_requests_total", {"route": "/translate", "status": "499"}) == 1.0)
    finally:
        gate.set()
    blocker.join(30)
    assert statuses == [200]
    computed = (registry.get_sample_value("nmt_scheduler_batch_sentences_sum") or 0.0)
    assert computed - computed_before == 1.0  # only "First." reached the engine


def test_python_m_server_starts_and_serves(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    port = free_port()
    env = {**os.environ, "NMT_BUILTIN_ARTIFACTS": "false", "NMT_BACKBONE": "tiny",
           "NMT_DECODING__BEAM_SIZE": "1", "NMT_DECODING__MAX_LENGTH": "8",
           "NMT_ADMIN_TOKEN": TOKEN, "PYTHONPATH": str(Path.cwd())}
    command = [sys.executable, "-m", "server", "--host", "127.0.0.1", "--port", str(port),
               "--store-dir", str(root), "--log-level", "warning"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    try:
        # a loaded 2-core host may take over 5 s to answer the first request
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            def ready() -> bool:
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                try:
                    return http.get("/health/ready").status_code == 200
                except httpx.TransportError:
                    return False

            wait_for(ready, timeout=60)
            result = http.post("/translate", json={"text": "Hello.", "domain": "law"})
            assert result.status_code == 200
            assert result.json()["routing"]["module_version"] == 1
    finally:
        process.terminate()
        process.wait(20)
    # uvicorn shuts down gracefully, then re-raises the captured SIGTERM
    assert process.returncode in (0, -signal.SIGTERM)
