"""Real processes for end-to-end tests: a uvicorn server in a thread on a free port, and
`python -m trainer` subprocesses on the same store."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import uvicorn

from server.app import create_app
from server.settings import Settings
from tests.trainer.helpers import sidecar_env

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(predicate: Callable[[], bool], *, timeout: float, what: str,
             interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(interval)


@contextlib.contextmanager
def live_server(settings: Settings) -> Iterator[str]:
    """The app served by uvicorn on 127.0.0.1; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=120, what="the server to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def start_sidecar(root: Path, log: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    """`python -m trainer` on `root` with the test settings; output appended to `log`."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "trainer", "--store-dir", str(root), "--log-level", "info",
             *args],
            cwd=REPO, env=os.environ | {"PYTHONPATH": str(REPO)} | sidecar_env(root, **env),
            stdout=out, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes], *, timeout: float = 60) -> int:
    """SIGTERM, then wait; returns the exit code."""
    if process.poll() is None:
        process.terminate()
    return process.wait(timeout)
