"""The engine yields CPUs while a training job runs (`training_cpus`, Linux), and takes them
back once none does."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import torch
from conftest import build_store, make_settings
from fastapi.testclient import TestClient

from model_store import Store
from server.app import create_app
from server.execution.training_share import training_now, yielded_mask

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="CPU masks of single threads are Linux's")


def test_the_last_cpus_are_yielded_and_never_all() -> None:
    assert yielded_mask(frozenset({0, 1, 2, 3}), 1) == {0, 1, 2}
    assert yielded_mask(frozenset({4, 6}), 1) == {4}
    assert yielded_mask(frozenset({0, 1}), 2) is None  # the engine keeps a CPU
    assert yielded_mask(frozenset({0, 1}), 0) is None  # off


def test_only_a_live_workers_running_job_counts(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", builtin_dir=None) as store:
        registry = store.registry
        registry.create_domain_job("new", config={}, data_location="jobs/j", job_id="j")
        assert not training_now(registry)  # queued: nothing trains yet
        registry.claim_next_job("w1")
        assert training_now(registry)
        registry.update_job("j", state="evaluating")
        assert training_now(registry)
        registry.update_job("j", heartbeat_at=datetime.now(UTC) - timedelta(hours=1))
        assert not training_now(registry)  # its worker died: nothing to yield to
        registry.update_job("j", state="published", heartbeat_at=datetime.now(UTC))
        assert not training_now(registry)


def _until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 30  # a bound on a hang, not a measurement
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


@linux_only
def test_the_engine_gives_way_while_a_job_trains_and_takes_its_cpus_back(
        tmp_path: Path, cpus: list[int], torch_threads: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    root = build_store(tmp_path / "store", domains=())
    settings = make_settings(root, execution={"training_cpus": 1})
    with TestClient(create_app(settings)) as client, \
            Store.open(root, builtin_dir=None) as store:
        state = client.app.state  # type: ignore[attr-defined]
        engine = state.engine_thread

        def where() -> tuple[frozenset[int], int]:
            return (engine.call(lambda: frozenset(os.sched_getaffinity(0))),
                    engine.call(torch.get_num_threads))

        assert client.post("/translate", json={"text": "the patient"}).status_code == 200
        before = where()
        assert not state.training_share.yielding
        store.registry.create_domain_job("new", config={}, data_location="jobs/j",
                                         job_id="j")
        store.registry.claim_next_job("sidecar")
        assert _until(lambda: state.training_share.yielding)
        during = where()
        answer = client.post("/translate", json={"text": "the patient"})
        store.registry.update_job("j", state="published")
        assert _until(lambda: not state.training_share.yielding)
        after = where()
    assert answer.status_code == 200, answer.text  # it serves meanwhile, on fewer CPUs
    assert during == (before[0] - {max(before[0])}, max(1, before[1] - 1))
    assert cpus[-1] not in during[0]
    assert after == before


@linux_only
def test_zero_never_yields(tmp_path: Path, cpus: list[int]) -> None:
    root = build_store(tmp_path / "store", domains=())
    settings = make_settings(root, execution={"training_cpus": 0})
    with TestClient(create_app(settings)) as client, \
            Store.open(root, builtin_dir=None) as store:
        state = client.app.state  # type: ignore[attr-defined]
        store.registry.create_domain_job("new", config={}, data_location="jobs/j",
                                         job_id="j")
        store.registry.claim_next_job("sidecar")
        assert training_now(store.registry)
        time.sleep(0.3)  # several polls (0.05 s) pass
        cpus_now = state.engine_thread.call(lambda: frozenset(os.sched_getaffinity(0)))
        assert not state.training_share.yielding
    assert cpus_now == set(cpus)
