"""The retrieval bench's pieces that decide what a long run reuses and chooses: the work
folder (a killed run continues, a changed setting recomputes), the dev grid and its
per-domain floor, and the reports (the calibrated gates' too)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.quality.gate_calibration import markdown as gate_markdown
from benchmarks.quality.memory_retrieval import grid_of, label_of, pick
from benchmarks.quality.memory_retrieval_report import CONFIGURATIONS, markdown
from benchmarks.quality.work_cache import WorkCache, fingerprint
from server.core.memory_settings import RetrievalSettings


def test_a_part_is_computed_once_and_reused_by_a_later_run(tmp_path: Path) -> None:
    calls: list[int] = []

    def compute() -> dict[str, Any]:
        calls.append(1)
        return {"hyps": ["un", "deux"], "seconds": 1.5}

    first = WorkCache(tmp_path / "work")
    assert first.get_or_compute("test-it-adapter", {"beam": 4}, compute)["hyps"] == ["un",
                                                                                     "deux"]
    later = WorkCache(tmp_path / "work")  # a new process over the same folder
    assert later.get_or_compute("test-it-adapter", {"beam": 4}, compute)["hyps"] == ["un",
                                                                                     "deux"]
    assert len(calls) == 1 and later.reused == 1 and later.computed == 0
    assert not list((tmp_path / "work").glob("*.tmp"))  # written whole, then renamed


def test_a_changed_setting_is_measured_again(tmp_path: Path) -> None:
    cache = WorkCache(tmp_path)
    cache.get_or_compute("dev-ted", {"gate": 2.0}, lambda: {"bleu": 1.0})
    again = cache.get_or_compute("dev-ted", {"gate": 1.0}, lambda: {"bleu": 2.0})
    assert again == {"bleu": 2.0} and cache.computed == 2
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    stored = json.loads(next(tmp_path.glob("dev-ted.*.json")).read_text())
    assert stored["part"] == "dev-ted" and "settings" in stored


def test_without_a_folder_every_part_is_computed(tmp_path: Path) -> None:
    cache = WorkCache(None)
    for _ in range(2):
        cache.get_or_compute("x", {}, lambda: {"v": 1})
    assert cache.computed == 2 and cache.reused == 0


def test_the_grid_is_every_combination_around_the_server_setting() -> None:
    base = RetrievalSettings()
    args = argparse.Namespace(gates=[1.0, 2.0], weights=None, min_scores=[50.0, 70.0])
    points = grid_of(args, base)
    assert len(points) == 4
    assert {(p.gate, p.min_score) for p in points} == {(1.0, 50.0), (1.0, 70.0),
                                                       (2.0, 50.0), (2.0, 70.0)}
    assert all(p.max_weight == base.max_weight and p.k == base.k for p in points)
    assert grid_of(argparse.Namespace(gates=None, weights=None, min_scores=None),
                   base) == [base]
    assert label_of(base).startswith(f"gate={base.gate:g} ")


def row(point: str, mean: float, worst: float) -> dict[str, Any]:
    return {"point": point, "dev_bleu": mean, "gain": 1.0, "worst_domain": "ted",
            "worst_gain": worst}


def test_the_floor_rules_out_a_higher_mean_that_costs_a_domain() -> None:
    grid = [row("high-but-costly", 30.0, -1.0), row("kept", 29.0, -0.2),
            row("lower", 28.0, 0.0)]
    best, rule = pick(grid, 0.3)
    assert best["point"] == "kept" and "best mean" in rule
    best, rule = pick([row("a", 30.0, -2.0), row("b", 25.0, -0.9)], 0.3)
    assert best["point"] == "b" and "least-worst" in rule


def test_the_report_shows_the_grid_the_tests_and_each_domain_against_the_adapter() -> None:
    scores = dict(zip(CONFIGURATIONS, (20.0, 22.0, 24.0, 26.5), strict=True))
    domain = {"domain": "it", "sentences": 10, "novel": 8, **scores,
              **{f"{k} novel": v - 1 for k, v in scores.items()}}
    result = {"direction": "en-fr", "beam": 4, "limit": 0, "dev_limit": 0,
              "selection": {"grid": [row("gate=2", 25.0, -0.1) | {"gain": 2.0}],
                            "adapter_dev_bleu": 23.0, "chosen": "gate=2",
                            "rule": "best mean"},
              "domains": [domain], "mean": scores,
              "mean_novel": {k: v - 1 for k, v in scores.items()},
              "general": [{"set": "news", "sentences": 5, "routed_to_a_domain": 1,
                           "memories off": 10.0, "memories on": 10.1}],
              "speed": [{"batch": 32, "sentences": 8, "tokens_per_s_off": 100.0,
                         "tokens_per_s_on": 70.0, "ratio": 0.7}],
              "stored_bytes_per_memory_besides_text": 0, "stored_note": "note"}
    text = markdown(result)
    assert "| gate=2 | 25.0 | +2.00 | ted -0.10 |" in text
    assert "| it | 10 (8) | 20.0 (19.0) | 22.0 (21.0) | 24.0 (23.0) | 26.5 (25.5) | +2.50 |" \
        in text
    assert "| news | 5 | 1 | 10.0 | 10.1 |" in text
    assert "test sentences per set: all" in text


def test_the_gate_calibration_report_shows_each_domain_and_the_mean() -> None:
    rows = [{"domain": "religion", "memory_pairs": 4996, "calibrated_gate": 3.0,
             "adapter": 13.0, "fixed": 24.5, "calibrated": 32.8, "calibration_s": 21.3},
            {"domain": "subtitles", "memory_pairs": 4998, "calibrated_gate": 0.5,
             "adapter": 18.3, "fixed": 17.4, "calibrated": 17.8, "calibration_s": 9.9}]
    text = gate_markdown({"direction": "en-fr", "beam": 4, "dev_limit": 60, "fixed_gate": 1.0,
                          "candidates": [0.5, 1.0, 3.0], "calibration_pairs": 48,
                          "margin": 0.5, "rows": rows, "host_note": "loaded host",
                          "mean": {"adapter": 15.65, "fixed": 20.95, "calibrated": 25.3,
                                   "calibration_s": 15.6}})
    assert "| religion | 4996 | 3 | 13.0 | 24.5 | 32.8 | 21.3 |" in text
    assert "| mean | | | 15.65 | 20.95 | 25.3 | 15.6 |" in text and "loaded host" in text
