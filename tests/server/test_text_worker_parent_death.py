"""A server killed outright takes its text worker process with it
(server/execution/text_worker.py: the worker watches its parent)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import build_store

from benchmarks.locations import REPO


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def children_of(parent: int) -> set[int]:
    """Live processes whose parent is `parent` (/proc's stat: pid, (name), state, ppid)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[1]) == parent and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for its reaper)."""
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                != "Z")
    except OSError:
        return False


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_a_sigkilled_server_takes_its_text_worker_with_it(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", domains=("law",), classifier=False)
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NMT_")},
           "NMT_BUILTIN_ARTIFACTS": "false", "NMT_BACKBONE": "tiny",
           "NMT_DECODING__BEAM_SIZE": "1", "NMT_DECODING__MAX_LENGTH": "8",
           "NMT_EXECUTION__START_TEXT_WORKER": "true", "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "server", "--host", "127.0.0.1", "--port", str(port),
         "--store-dir", str(root), "--log-level", "warning"],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    descendants: set[int] = set()
    try:
        deadline = time.monotonic() + 120  # a bound on a hang, not a measurement
        workers: set[int] = set()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            while not workers:
                assert server.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "no ready server with a text worker"
                try:
                    ready = http.get("/health/ready").status_code == 200
                except httpx.TransportError:
                    ready = False
                # the worker is a spawned interpreter (the resource tracker is another)
                workers = {pid for pid in children_of(server.pid)
                           if "spawn_main" in command_line(pid)} if ready else set()
                time.sleep(0.2)
        descendants = children_of(server.pid)
        assert workers <= descendants
        server.send_signal(signal.SIGKILL)  # no shutdown runs: only the worker itself acts
        server.wait(30)
        deadline = time.monotonic() + 60
        while any(alive(pid) for pid in descendants) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in descendants if alive(pid)]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(30)
        for pid in descendants:  # the test's own leftovers only, by pid
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
