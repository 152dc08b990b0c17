"""Real processes for end-to-end tests: a uvicorn server in a thread on a free port,
`python -m server` and `python -m trainer` subprocesses on the same store."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import uvicorn

from server.app import create_app
from server.settings import Settings
from tests.trainer.sidecar_store import BACKBONE, TOKEN, sidecar_env

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


def step_of(run_dir: Path) -> int:
    """The training step a run dir's progress.json records; 0 before the first one."""
    try:
        return int(json.loads((run_dir / "progress.json").read_text())["step"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0


def server_env(root: Path, port: int, **extra: str) -> dict[str, str]:
    """Environment of a `python -m server` subprocess on the tiny store at `root`."""
    return {
        "NMT_STORE_DIR": str(root), "NMT_BUILTIN_ARTIFACTS": "false", "NMT_BACKBONE": BACKBONE,
        "NMT_ADMIN_TOKEN": TOKEN, "NMT_HOST": "127.0.0.1", "NMT_PORT": str(port),
        "NMT_POLL_INTERVAL_S": "0.05", "NMT_ENGINE__SLOTS_PER_BANK": "4",
        "NMT_DECODING__BEAM_SIZE": "1", "NMT_DECODING__MAX_LENGTH": "8",
        "NMT_LOG_LEVEL": "info", "OMP_NUM_THREADS": "1",
    } | extra


def start_server(root: Path, log: Path, port: int, **env: str) -> subprocess.Popen[bytes]:
    """`python -m server` on the tiny store at `root`, listening on 127.0.0.1:`port`;
    output appended to `log`. Wait for it with `wait_for(lambda: ready(url), ...)`."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "server"], cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)} | server_env(root, port, **env),
            stdout=out, stderr=subprocess.STDOUT)


def answers(url: str, path: str = "/health/live") -> int | None:
    """The status of GET `url + path`, or None when nothing answers."""
    try:
        return httpx.get(url + path, timeout=5).status_code
    except httpx.TransportError:
        return None


def stop(process: subprocess.Popen[bytes], *, timeout: float = 60) -> int:
    """SIGTERM, then wait; returns the exit code."""
    if process.poll() is None:
        process.terminate()
    return process.wait(timeout)
