"""`python -m trainer` trains below the priority it was started with: every thread of the
running sidecar, read from /proc while a job trains, carries the configured niceness."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from model_store import Store
from tests.e2e.processes import start_sidecar, step_of, stop, wait_for
from tests.trainer.sidecar_store import build_store, submit
from trainer.jobs.domain_job import run_dir_of

LEVELS = 3
LONG = {"max_epochs": 25, "eval_every": 1000}  # still training when the threads are read


def thread_niceness(pid: int) -> dict[int, int]:
    """Each thread's nice value: field 19 of /proc/PID/task/TID/stat (proc(5)), counted
    after the command name, which may hold spaces and parentheses."""
    values = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = task.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        values[int(task.name)] = int(fields[16])
    return values


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice: Linux /proc")
def test_every_thread_of_a_training_sidecar_runs_below_its_parent(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    with Store.open(root, builtin_dir=None) as store:
        run_dir = run_dir_of(store, submit(store, config=LONG).id)
    parent = os.getpriority(os.PRIO_PROCESS, 0)
    sidecar = start_sidecar(root, tmp_path / "sidecar.log", NMT_TRAINER__NICENESS=str(LEVELS))
    try:
        wait_for(lambda: step_of(run_dir) >= 2, timeout=600, what="2 training steps")
        niceness = thread_niceness(sidecar.pid)
    finally:
        assert stop(sidecar) == 0, (tmp_path / "sidecar.log").read_text()[-2000:]
    assert len(niceness) >= 1
    assert set(niceness.values()) == {min(parent + LEVELS, 19)}, niceness
