"""SIGTERM on a server whose queued work outlasts the drain bound (`NMT_SHUTDOWN_DRAIN_S`):
once the bound passes, every request still waiting is answered 503 with Retry-After (not
cut off), and the process exits with status 0 instead of serving the queue to its end."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.e2e.processes import answers, free_port, start_server, stop, wait_for
from tests.e2e.test_fault_processes import queue_depth
from tests.trainer.sidecar_store import WORDS, build_store

WAITING = 4


@pytest.mark.slow
def test_work_left_at_the_drain_bound_is_answered_503_and_the_server_exits(
        tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Every sentence waits 120 s for companions (the batch never fills) under a deadline
    # of 300 s: without the bound the drain would wait minutes for them.
    server = start_server(root, tmp_path / "server.log", port,
                          NMT_SCHEDULER__MAX_WAIT_MS="120000",
                          NMT_SCHEDULER__REQUEST_TIMEOUT_S="300", NMT_SHUTDOWN_DRAIN_S="1")
    try:
        wait_for(lambda: answers(url, "/health/ready") == 200, timeout=180,
                 what="the server to be ready")
        texts = [" ".join(words[:4]) for words in WORDS.values()]
        with ThreadPoolExecutor(WAITING) as pool:
            pending = [pool.submit(httpx.post, url + "/translate", json={"text": text},
                                   timeout=300) for text in (texts * WAITING)[:WAITING]]
            wait_for(lambda: queue_depth(url) >= WAITING, timeout=30,
                     what="every request to be queued")
            server.send_signal(signal.SIGTERM)
            results = [future.result() for future in pending]
        assert server.wait(60) == 0  # well before the sentences' own wait would end
    finally:
        stop(server)
    assert [r.status_code for r in results] == [503] * WAITING
    for result in results:
        assert result.json()["error"]["code"] == "not_ready"
        assert "NMT_SHUTDOWN_DRAIN_S" in result.json()["error"]["message"]
        assert int(result.headers["retry-after"]) > 0
    log = (tmp_path / "server.log").read_text()
    assert "drain bound passed with 4 request(s) in flight" in log
