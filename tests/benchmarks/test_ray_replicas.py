"""The Ray Serve benchmark's summary: totals per system over rounds and the two ratios
against their targets (the live part runs in tests/server/test_server_ray.py)."""

from __future__ import annotations

import pytest

from benchmarks.speed.serve.loadstats import LevelStats
from benchmarks.speed.serve.ray_replicas import Measured, markdown, summary


def stats(sentences: int, wall_s: float, *, requests: int = 10, ok: int = 10) -> LevelStats:
    return LevelStats(concurrency=4, requests=requests, ok=ok, errors={}, sentences=sentences,
                      target_tokens=sentences * 10, wall_s=wall_s,
                      sentences_per_s=sentences / wall_s, tokens_per_s=sentences * 10 / wall_s,
                      latency_p50_s=0.1, latency_p95_s=0.2, latency_p99_s=0.3,
                      latency_mean_s=0.1)


def test_summary_sums_rounds_and_compares_the_right_systems() -> None:
    results = [Measured("uvicorn", 0, stats(100, 10.0), 1),
               Measured("ray-1", 0, stats(95, 10.0), 1),
               Measured("ray-2", 0, stats(150, 10.0, requests=12, ok=11), 2),
               Measured("uvicorn", 1, stats(100, 10.0), 1),
               Measured("ray-1", 1, stats(85, 10.0), 1),
               Measured("ray-2", 1, stats(170, 10.0), 2)]
    totals = summary(results)
    assert totals["systems"]["ray-1"]["sentences_per_s"] == pytest.approx(9.0)
    assert totals["systems"]["ray-2"]["errors"] == 1
    assert totals["scaling_2_over_1"] == pytest.approx(16.0 / 9.0)
    assert totals["scaling_met"] is True
    assert totals["proxy_over_direct"] == pytest.approx(0.9)
    assert totals["proxy_met"] is True
    text = markdown(results, totals, {"description": "d", "notes": "n"})
    assert "| ray-2 | 16.00 |" in text and "1.78x" in text


def test_a_missing_baseline_gives_no_ratio() -> None:
    totals = summary([Measured("ray-2", 0, stats(10, 1.0), 2)])
    assert totals["scaling_2_over_1"] is None and totals["scaling_met"] is None
    assert totals["proxy_over_direct"] is None
