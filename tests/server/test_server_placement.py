"""CPU placement (`front_cpus`, Linux): the engine thread and its OpenMP team on CPUs of
their own, the event loop and everything it starts on the others."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
import torch
from conftest import build_store, make_settings, where_things_run
from fastapi.testclient import TestClient

from server.app import create_app
from server.execution.placement import plan_placement, this_threads_cpus

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="CPU masks of single threads are Linux's")


def test_no_placement_by_default() -> None:
    assert plan_placement(0) is None


@linux_only
def test_the_last_cpus_go_to_the_front(cpus: list[int]) -> None:
    placement = plan_placement(1)
    assert placement is not None
    assert placement.front == {cpus[-1]} and placement.engine == set(cpus[:-1])


@linux_only
def test_a_split_that_leaves_the_engine_nothing_is_ignored_and_said(
        cpus: list[int], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="server.execution.placement"):
        assert plan_placement(len(cpus)) is None
    assert f"front_cpus={len(cpus)} ignored" in caplog.text


@linux_only
def test_the_engine_and_the_front_run_on_their_own_cpus(
        tmp_path: Path, cpus: list[int], torch_threads: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    settings = make_settings(build_store(tmp_path / "store", domains=()),
                             engine={"front_cpus": 1})
    with TestClient(create_app(settings)) as client:
        found = where_things_run(client, this_threads_cpus)
        engine_threads = client.app.state.engine_thread.call(  # type: ignore[attr-defined]
            torch.get_num_threads)
        answer = client.post("/translate", json={"text": "the patient"})
    assert answer.status_code == 200, answer.text
    assert found.engine == set(cpus[:-1]) and engine_threads == len(cpus) - 1
    assert found.worker_pid != os.getpid()  # the text worker process, not the fallback
    assert found.front == found.large == found.worker == {cpus[-1]}
