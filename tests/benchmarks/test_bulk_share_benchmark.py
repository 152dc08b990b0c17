"""The bulk-share benchmark's bookkeeping (benchmarks/speed/adversarial/bulk_share.py): the
four targets and the markdown; the hot-add-under-load report. The clients run against a
real server in the benchmark itself."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.speed.adversarial.bulk_share import bulk_texts, markdown, verdict
from benchmarks.speed.serve.hot_add_load import markdown as load_markdown


def bulk(statuses: list[Any], chars_per_s: float, errors: int = 0) -> dict[str, Any]:
    return {"statuses": statuses, "batch_seconds": [], "batch_chars": 0, "libre_chars": 0,
            "libre_requests": 3, "libre_errors": ["HTTPError: 429"] * errors,
            "seconds": 10.0, "chars_per_s": chars_per_s}


def phases(*, polite_ms: float, beside: float, statuses: list[Any], errors: int = 0,
           completed: int = 40) -> dict[str, Any]:
    return {"quiet": {"polite": {"requests": 3, "errors": 0, "p50_ms": 100.0, "p95_ms": 120.0,
                                 "max_ms": 130.0}},
            "bulk alone": {"bulk": bulk([200, 200], 1000.0)},
            "bulk + polite": {"bulk": bulk(statuses, beside, errors),
                              "polite": {"requests": 3, "errors": 0, "p50_ms": polite_ms,
                                         "p95_ms": 400.0, "max_ms": 500.0}},
            "bulk + documents": {"bulk": bulk([200], 900.0),
                                 "documents": {"documents": 40, "completed": completed,
                                               "failures": [], "median_s": 2.0}}}


def test_every_target_met() -> None:
    found = phases(polite_ms=250.0, beside=700.0, statuses=[200, 200])
    result = verdict(found)
    assert result == {"polite_ratio": 2.5, "polite_ratio_met": True, "bulk_refused": 0,
                      "bulk_refused_met": True, "throughput_ratio": 0.7,
                      "throughput_met": True, "documents_met": True}
    text = markdown({"meta": {"setup": "a run"}, "phases": found, "verdict": result})
    assert "2.50x quiet (target <= 3x: met)" in text and "40 of 40 completed" in text
    json.dumps(found)


def test_refusals_slow_polite_answers_and_lost_documents_are_missed() -> None:
    found = phases(polite_ms=400.0, beside=500.0, statuses=[200, 429, 504], errors=1,
                   completed=39)
    result = verdict(found)
    assert result["bulk_refused"] == 3 and not result["bulk_refused_met"]
    assert not result["polite_ratio_met"] and not result["throughput_met"]
    assert not result["documents_met"]
    assert "MISSED" in markdown({"meta": {"setup": "a run"}, "phases": found,
                                 "verdict": result})


def test_bulk_texts_are_about_900_characters_each() -> None:
    texts = bulk_texts(None, 5)
    assert len(texts) == 5 and all(880 <= len(text) <= 1100 for text in texts)


def test_the_hot_add_report_states_each_target() -> None:
    result = {"quiet": {"p50_ms": 100.0},
              "hot_add_quiet": {"upload_to_published_s": 100.0, "sidecar_cpu_s": 95.0,
                                "sidecar_cpu_share": 0.95},
              "hot_add_loaded": {"upload_to_published_s": 250.0, "sidecar_cpu_s": 120.0,
                                 "sidecar_cpu_share": 0.48},
              "clients": {"count": 16, "requests": 900, "during_sidecar": 800,
                          "statuses": {"200": 899, "504": 1}, "failed": 1, "p50_ms": 280.0},
              "setup": {"threads": 1, "pairs": 5000, "quick": False, "training_cpus": 1},
              "verdict": {"polite_ratio": 2.8, "polite_met": True, "publish_ratio": 2.5,
                          "publish_met": False, "failed_met": False}}
    text = load_markdown(result)
    assert "failed requests: 1 (target 0: MISSED)" in text
    assert "2.8x quiet (target <= 3x: met)" in text
    assert "2.5x its quiet time (target <= 2x: MISSED)" in text
    assert "| sidecar CPU s (share of one CPU) | 95.0 (0.95) | 120.0 (0.48) |" in text
    assert "the server yields 1 CPU(s) while a job trains" in text
