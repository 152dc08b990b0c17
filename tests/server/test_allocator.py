"""server/execution/allocator.py: the blocks a decoding step frees serve the next step instead of
being returned to the kernel and faulted in again.

The allocator check runs in processes of their own: the setting is process-wide, and page
faults are counted for the whole process."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import build_store, make_settings
from fastapi.testclient import TestClient

import server.app
import server.execution.layout

ROOT = Path(__file__).resolve().parents[2]
glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="mallopt is glibc's; elsewhere nothing changes")

# what decoding steps do to memory, on a thread of its own (the engine's is not the main
# thread): each step's tensors of 1-24 MB allocated, written, then freed
STEPS = """
import resource, threading, torch
def steps():
    for rounds in range(2):  # the first one warms up, the second is counted
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for i in range(100):
            size = (1 + (i * 7) % 24) << 20
            logits = torch.empty(size // 4).fill_(1.0)
            cache = torch.empty(size // 8).fill_(2.0)
            del logits, cache
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
worker = threading.Thread(target=steps)
worker.start()
worker.join()
"""


def page_faults(setup: str) -> int:
    """Minor page faults of STEPS in a fresh interpreter, after `setup`."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "server")])}
    done = subprocess.run([sys.executable, "-c", setup + STEPS], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.split()[-1])


@glibc_only
def test_freed_blocks_are_reused_instead_of_faulted_in_again() -> None:
    plain = page_faults("")
    kept = page_faults("from server.execution.allocator import keep_freed_memory\n"
                       "assert keep_freed_memory()\n")
    assert kept * 4 < plain, (kept, plain)  # measured: 0 against 156,189


@pytest.mark.parametrize("keep", [True, False])
def test_the_server_applies_it_at_start_unless_told_not_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: bool) -> None:
    """The wiring: the lifespan calls it before it builds the engine (recorded here, not
    applied: the setting would last for the rest of this test process)."""
    calls: list[bool] = []
    monkeypatch.setattr(server.execution.layout, "keep_freed_memory",
                        lambda: calls.append(True) or True)
    settings = make_settings(build_store(tmp_path / "store"),
                             engine={"keep_freed_memory": keep})
    with TestClient(server.app.create_app(settings)) as http:
        assert http.get("/health/ready").status_code == 200
    assert calls == ([True] if keep else [])
