"""The sidecar's torch threads follow the CPUs a server on the same host yields while a job
trains (`NMT_EXECUTION__TRAINING_CPUS`) unless `NMT_TRAINER__THREADS` says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.locations import REPO
from server.execution.settings import ExecutionSettings
from trainer.jobs.settings import ServerShare, SidecarSettings, usable_cpus


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("NMT_")]:
        monkeypatch.delenv(name)


def test_by_default_the_sidecar_takes_the_cpu_the_server_yields() -> None:
    assert ServerShare().training_cpus == ExecutionSettings().training_cpus == 1
    assert SidecarSettings().trainer.threads is None
    assert SidecarSettings().torch_threads() == 1


def test_the_threads_follow_the_servers_setting_among_its_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMT_EXECUTION__TRAINING_CPUS", "2")
    monkeypatch.setenv("NMT_EXECUTION__FRONT_CPUS", "1")  # the server's: ignored here
    assert SidecarSettings().torch_threads() == min(2, usable_cpus())
    monkeypatch.setenv("NMT_EXECUTION__TRAINING_CPUS", "100000")
    assert SidecarSettings().torch_threads() == usable_cpus()
    monkeypatch.setenv("NMT_EXECUTION__TRAINING_CPUS", "0")  # a server that never yields
    assert SidecarSettings().torch_threads() == 0  # torch's default


def test_an_explicit_thread_count_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMT_EXECUTION__TRAINING_CPUS", "1")
    monkeypatch.setenv("NMT_TRAINER__THREADS", "3")
    assert SidecarSettings().torch_threads() == 3
    monkeypatch.setenv("NMT_TRAINER__THREADS", "0")
    assert SidecarSettings().torch_threads() == 0


def test_the_sidecar_process_runs_with_the_yielded_cpus_threads(tmp_path: Path) -> None:
    """`python -m trainer --once` on an empty store: it logs its torch threads and exits."""
    env = {**os.environ, "NMT_BUILTIN_ARTIFACTS": "false", "PYTHONPATH": str(REPO)}
    env.pop("OMP_NUM_THREADS", None)
    default = int(subprocess.run(  # torch's own default here (its physical cores)
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env,
        capture_output=True, text=True, timeout=300, check=True).stdout)
    if default < 2:
        pytest.skip("torch's default is one thread here: nothing to tell apart")
    found = {}
    for given in ("1", "0"):
        done = subprocess.run(
            [sys.executable, "-m", "trainer", "--once", "--store-dir", str(tmp_path / "store"),
             "--log-level", "info"], cwd=REPO, capture_output=True, text=True, timeout=300,
            env=env | {"NMT_EXECUTION__TRAINING_CPUS": given})
        assert done.returncode == 0, done.stderr[-2000:]
        found[given] = [line for line in (done.stdout + done.stderr).splitlines()
                        if "torch thread(s)" in line]
    assert len(found["1"]) == 1 and ", 1 torch thread(s)" in found["1"][0]
    assert len(found["0"]) == 1 and f", {default} torch thread(s)" in found["0"][0]
