"""The engine-level continuous-batching benchmark's two paths
(benchmarks/speed/batching/live_engine.py) on a tiny backbone: both translate every sentence,
the live path under the same token budget, with the same best hypotheses."""

from __future__ import annotations

import pytest

from benchmarks.speed.batching import live_engine
from server.engine.engine import EngineOptions
from tests.engine.test_device_agreement import engine_with


def test_static_and_live_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = engine_with(EngineOptions(), {})
    monkeypatch.setattr(live_engine, "BUDGET", 64)  # several batches, rows joining late
    words = [f"w{i}" for i in range(50)]
    jobs = live_engine.make_jobs(engine, words, 12, (1, 9), seed=3)
    assert len(jobs) == 12
    static = live_engine.run_static(engine, jobs)
    live = live_engine.run_live(engine, jobs)
    assert [r[0].tokens for r in live] == [r[0].tokens for r in static]
    assert live_engine.tokens_of(live) == live_engine.tokens_of(static) > 0
