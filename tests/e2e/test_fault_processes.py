"""Faults injected into a real `python -m server` process: SIGTERM with requests in flight
(every one of them completes, nothing new is taken, the process exits)."""

from __future__ import annotations

import re
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.e2e.processes import answers, free_port, start_server, stop, wait_for
from tests.trainer.helpers import WORDS, build_store

IN_FLIGHT = 6


def queue_depth(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    found = re.search(r"^nmt_scheduler_queue_depth (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_sigterm_drains_requests_in_flight_then_exits(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Every sentence waits 3 s for companions (the batch budget never fills): requests are
    # surely in flight when SIGTERM arrives.
    server = start_server(root, tmp_path / "server.log", port,
                          NMT_SCHEDULER__MAX_WAIT_MS="3000", NMT_SHUTDOWN_DRAIN_S="60")
    try:
        wait_for(lambda: answers(url, "/health/ready") == 200, timeout=180,
                 what="the server to be ready")
        texts = [" ".join(words[:4]) for words in WORDS.values()] * 2
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            pending = [pool.submit(httpx.post, url + "/translate", json={"text": text},
                                   timeout=60) for text in texts[:IN_FLIGHT]]
            wait_for(lambda: queue_depth(url) >= IN_FLIGHT, timeout=30,
                     what="every request to be queued")
            server.send_signal(signal.SIGTERM)

            wait_for(lambda: answers(url, "/health/ready") == 503, timeout=2,
                     what="readiness to turn 503 at once")
            refused = httpx.post(url + "/translate", json={"text": texts[0]}, timeout=10)
            assert refused.status_code == 503 and "shutting down" in refused.text
            results = [future.result() for future in pending]

        assert [r.status_code for r in results] == [200] * IN_FLIGHT
        assert all(r.json()["translation"] for r in results)
        assert server.wait(60) == 0  # it exits by itself once drained
    finally:
        stop(server)
    log = (tmp_path / "server.log").read_text()
    assert "draining: " in log and "drained after" in log
