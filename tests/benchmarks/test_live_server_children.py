"""A bench's children end with it, even when the bench is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.locations import REPO

# a "bench" that starts a long child the way benchmarks/live_server.py starts its server,
# says the child's pid, then waits to be killed
BENCH = """
import subprocess, sys, time
from benchmarks.live_server import ends_with_parent
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                         preexec_fn=ends_with_parent)
print(child.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_bench_takes_its_server_with_it() -> None:
    bench = subprocess.Popen([sys.executable, "-c", BENCH], cwd=REPO, stdout=subprocess.PIPE,
                             env=os.environ | {"PYTHONPATH": str(REPO)}, text=True)
    assert bench.stdout is not None
    child = int(bench.stdout.readline())
    try:
        assert _alive(child)
        bench.send_signal(signal.SIGKILL)  # no finally, no atexit: only the kernel acts
        bench.wait(30)
        waited = 0.0
        while _alive(child) and waited < 60:  # a bound on a hang, not a measurement
            time.sleep(0.1)
            waited += 0.1
        assert not _alive(child)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
