"""A live `python -m server` subprocess on 127.0.0.1 and a free port.

The child gets a clean NMT_* environment (the caller's NMT_ variables are dropped, the
benchmark's are set), logs to a file, and is stopped with SIGINT (uvicorn's graceful
shutdown), then killed if it does not exit in time. A bench killed outright (SIGKILL, a
timeout) runs no `finally`: on Linux its children are then killed by the kernel
(`ends_with_parent`), so that no server keeps a CPU busy for a bench that is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx

from benchmarks.locations import REPO

PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ServerFailed(RuntimeError):
    """The server exited or did not become ready; the message carries its log's tail."""


def batching_environment(*, static: bool) -> dict[str, str]:
    """The server's batching, always explicit: continuous (the default) or static."""
    return {"NMT_SCHEDULER__CONTINUOUS": "false" if static else "true"}


def ends_with_parent() -> None:
    """A `preexec_fn`: the kernel sends the child SIGKILL when the thread that started it
    ends (Linux; elsewhere nothing). Start children from the bench's main thread, whose
    end is the bench's."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() == 1:  # the parent ended before the request took effect
        os._exit(1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_environment(port: int, settings: Mapping[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("NMT_")}
    env |= {"NMT_HOST": "127.0.0.1", "NMT_PORT": str(port), "NMT_LOG_LEVEL": "warning"}
    env |= dict(settings)
    return env


def _tail(log: Path, lines: int = 40) -> str:
    if not log.is_file():
        return "(no log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def wait_ready(base_url: str, process: subprocess.Popen[bytes], log: Path, *,
               timeout_s: float) -> None:
    """Poll /health/ready until 200; fail early when the process exits."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    with httpx.Client(base_url=base_url, timeout=5.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ServerFailed(f"the server exited with {process.returncode}:\n"
                                   f"{_tail(log)}")
            try:
                answer = client.get("/health/ready")
                if answer.status_code == 200:
                    return
                last = f"{answer.status_code} {answer.text[:500]}"
            except httpx.TransportError as error:
                last = type(error).__name__
            time.sleep(0.2)
    raise ServerFailed(f"not ready after {timeout_s:g} s (last: {last}):\n{_tail(log)}")


def stop(process: subprocess.Popen[bytes], *, timeout_s: float = 30.0) -> int:
    """SIGINT, then SIGKILL after `timeout_s`; the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)
    return process.returncode


@contextlib.contextmanager
def live_server(settings: Mapping[str, str], log: Path, *,
                ready_timeout_s: float = 300.0) -> Iterator[str]:
    """Start the server with these NMT_* settings, yield its base URL once ready."""
    port = free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "server"], cwd=REPO,
                                   env=server_environment(port, settings), stdout=sink,
                                   stderr=subprocess.STDOUT, preexec_fn=ends_with_parent)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base_url, process, log, timeout_s=ready_timeout_s)
        yield base_url
    finally:
        stop(process)
