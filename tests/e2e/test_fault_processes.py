"""Faults injected into real processes: `python -m server` restarted on a store with a
corrupt module (ready; only that domain is down; a re-upload heals it), killed with -9 in
the middle of an upload, a publisher killed with -9 between its rename and its registry
row (nothing half-written is visible after the restart), and SIGTERM with requests in
flight (every one of them completes, nothing new is taken, the process exits)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from model_store import pack_artifact_dir
from tests.e2e.processes import REPO, answers, free_port, start_server, stop, wait_for
from tests.trainer.sidecar_store import WORDS, admin_headers, build_store

IN_FLIGHT = 6


def queue_depth(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    found = re.search(r"^nmt_scheduler_queue_depth (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


@pytest.mark.slow
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


# A publisher that is killed (-9) between renaming its version directory into place and
# inserting the registry row: the worst moment of a publication.
PUBLISH_AND_HANG = """
import sys, time
from pathlib import Path
from model_store import Store
root, source = Path(sys.argv[1]), Path(sys.argv[2])
def hang(step, key):
    if step == "renamed":
        print("RENAMED", key, flush=True)
        time.sleep(600)
with Store.open(root, builtin_dir=None) as store:
    manifest = store.record("module", "law", 1).manifest
    files = {path: source / path for path in manifest.files}
    store.publish("module", "law", files, config=manifest.config,
                  backbone_fingerprint=manifest.backbone_fingerprint, hook=hang)
"""


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def translate(url: str, domain: str) -> httpx.Response:
    return httpx.post(url + "/translate", json={"text": "the council decision", "domain": domain},
                      timeout=60)


def law_versions(url: str) -> list[int]:
    listed = httpx.get(url + "/admin/domains", headers=admin_headers(), timeout=10).json()
    return [v["version"] for d in listed["domains"] if d["name"] == "law" for v in d["versions"]]


def slow_upload(url: str) -> None:
    """A module upload whose body trickles in; the server dies before it ends."""
    def body() -> Iterator[bytes]:
        for _ in range(600):
            yield b"\x1f\x8b" + bytes(4094)
            time.sleep(0.1)

    with contextlib.suppress(httpx.TransportError):
        httpx.post(url + "/admin/domains/law/versions?activate=true", content=body(),
                   headers={**admin_headers(), "content-type": "application/gzip"},
                   timeout=120)


@pytest.mark.slow
def test_a_corrupt_module_and_kill_9_mid_upload_and_mid_publish_stay_local(
        tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    law = root / "modules" / "law" / "v1"
    good = pack_artifact_dir(law)  # what the operator will re-upload
    pristine = tmp_path / "pristine-law"
    shutil.copytree(law, pristine)
    flip_a_byte(law / "module.safetensors")
    log = tmp_path / "server.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    # 1. Restart with a corrupt module: ready, the other domains serve, law answers 503.
    first = start_server(root, log, port)
    try:
        wait_for(lambda: answers(url, "/health/ready") == 200, timeout=180,
                 what="the server to be ready despite a corrupt module")
        assert httpx.get(url + "/health/ready").json()["checks"]["broken"] == ["law"]
        refused = translate(url, "law")
        assert refused.status_code == 503 and "domain 'law' is unavailable" in refused.text
        for domain in ("medical", "it", "generic"):
            assert translate(url, domain).status_code == 200, domain

        # 2. kill -9 while an upload streams in.
        uploader = threading.Thread(target=slow_upload, args=(url,))
        uploader.start()
        time.sleep(1.5)
        first.kill()
        first.wait(30)
        uploader.join(60)
    finally:
        stop(first)

    # 3. kill -9 a publisher between its rename and its registry row.
    publisher = subprocess.Popen(
        [sys.executable, "-c", PUBLISH_AND_HANG, str(root), str(pristine)], cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE)
    assert publisher.stdout is not None
    assert publisher.stdout.readline().startswith(b"RENAMED modules/law/v2")
    publisher.kill()
    publisher.wait(30)
    assert (root / "modules" / "law" / "v2").is_dir()  # on disk, but without a registry row

    # 4. Restart: nothing half-written is visible; a good re-upload heals law.
    second = start_server(root, log, port)
    try:
        wait_for(lambda: answers(url, "/health/ready") == 200, timeout=180,
                 what="the restarted server to be ready")
        assert law_versions(url) == [1]
        assert translate(url, "law").status_code == 503
        with sqlite3.connect(root / "registry.sqlite") as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

        uploaded = httpx.post(url + "/admin/domains/law/versions?activate=true", content=good,
                              headers={**admin_headers(), "content-type": "application/gzip"},
                              timeout=60)
        assert uploaded.status_code == 201, uploaded.text
        healed = translate(url, "law")
        assert healed.status_code == 200, healed.text
        assert healed.json()["routing"]["module_version"] == uploaded.json()["version"] == 3
        assert "broken" not in httpx.get(url + "/health/ready").json()["checks"]
    finally:
        stop(second)
