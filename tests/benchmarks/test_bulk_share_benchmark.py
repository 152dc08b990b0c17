"""The bulk-share benchmark's bookkeeping (benchmarks/speed/adversarial/bulk_share.py): the
four targets and the markdown; the hot-add-under-load report and its client and engine
summaries. The clients run against a real server in the benchmark itself."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.speed.adversarial.bulk_share import bulk_texts, markdown, verdict
from benchmarks.speed.serve.hot_add_load import ENGINE_SAMPLES, answered, engine_batches
from benchmarks.speed.serve.hot_add_load import markdown as load_markdown
from benchmarks.speed.serve.hot_add_load import verdict as load_verdict


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


def hot_add_result(*, polite_ms: float, published_s: float, failed: int) -> dict[str, Any]:
    return {"quiet": {"requests": 20, "p50_ms": 100.0},
            "hot_add_quiet": {"upload_to_published_s": 100.0, "sidecar_cpu_s": 95.0,
                              "sidecar_cpu_share": 0.95},
            "hot_add_loaded": {"upload_to_published_s": published_s, "sidecar_cpu_s": 120.0,
                               "sidecar_cpu_share": 0.48},
            "polite": {"requests": 90, "statuses": {"200": 90}, "failed": 0,
                       "p50_ms": polite_ms},
            "clients": {"count": 16, "requests": 900, "statuses": {"200": 899, "504": 1},
                        "failed": 1, "p50_ms": 640.0, "requests_per_s": 25.0},
            "failed": failed,
            "engine_batches": {"unit": "batch", "count": 300, "size": 15.2,
                               "ms_per_unit": 640.0, "engine_busy_share": 0.97},
            "setup": {"threads": 1, "pairs": 5000, "quick": False, "training_cpus": 1,
                      "pause_s": 1.0, "continuous": False}}


def test_the_hot_add_report_states_each_target() -> None:
    result = hot_add_result(polite_ms=280.0, published_s=250.0, failed=1)
    result["verdict"] = load_verdict(result)
    assert result["verdict"] == {"polite_ratio": 2.8, "polite_met": True,
                                 "clients_ratio": 6.4, "publish_ratio": 2.5,
                                 "publish_met": False, "failed_met": False}
    text = load_markdown(result)
    assert "failed requests (the whole run): 1 (target 0: MISSED)" in text
    assert "2.8x quiet (target <= 3x: met)" in text
    assert "the busy clients' own p50: 6.4x the polite client's quiet p50" in text
    assert "2.5x its quiet time (target <= 2x: MISSED)" in text
    assert "| polite client: one-sentence p50 ms | 100.0 | 280.0 |" in text
    assert "| busy clients: one-sentence p50 ms (answers/s, all together) | - | 640.0 (25.0) |" \
        in text
    assert "| sidecar CPU s (share of one CPU) | 95.0 (0.95) | 120.0 (0.48) |" in text
    assert ("| engine batches: sentences per batch, ms per batch (engine busy share) | - | "
            "15.2, 640.0 (0.97) |") in text
    assert "the server (static batching) yields 1 CPU(s) while a job trains" in text
    json.dumps(result)


def test_a_slow_polite_client_misses_and_a_clean_run_meets_the_rest() -> None:
    result = hot_add_result(polite_ms=310.0, published_s=150.0, failed=0)
    found = load_verdict(result)
    assert not found["polite_met"] and found["polite_ratio"] == 3.1
    assert found["publish_met"] and found["failed_met"]
    result["verdict"], result["setup"]["continuous"] = found, True
    result["engine_batches"] = {"unit": "step", "count": 9000, "size": 60.1,
                                "ms_per_unit": 44.1, "engine_busy_share": 0.97}
    text = load_markdown(result)
    assert "| engine live steps: beam rows per step, ms per step (engine busy share) | - | " \
        "60.1, 44.1 (0.97) |" in text
    assert "the server (continuous batching) yields" in text


def test_a_client_groups_answers_count_failures_and_time_only_answered_requests() -> None:
    answers: list[tuple[float, float, int | str]] = [
        (1.0, 0.1, 200), (2.0, 0.3, 200), (3.0, 30.0, 504), (4.0, 0.2, "ReadTimeout")]
    found = answered(answers)
    assert found["requests"] == 4 and found["failed"] == 2
    assert found["statuses"] == {"200": 2, "504": 1, "ReadTimeout": 1}
    assert found["p50_ms"] == 200.0 and found["max_ms"] == 300.0


def reading(batches: float, sentences: float, steps: float, rows: float,
            busy: float) -> dict[str, float]:
    return dict(zip(ENGINE_SAMPLES, (batches, sentences, steps, rows, busy), strict=True))


def test_the_engine_batches_are_those_between_the_two_readings() -> None:
    found = engine_batches(reading(10, 100, 0, 0, 5.0), reading(30, 420, 0, 0, 14.0), 10.0)
    assert found == {"unit": "batch", "count": 20, "size": 16.0,
                     "ms_per_unit": 450.0, "engine_busy_share": 0.9}
    live = engine_batches(reading(0, 0, 100, 900, 2.0), reading(0, 0, 500, 7300, 10.0), 10.0)
    assert live == {"unit": "step", "count": 400, "size": 16.0,
                    "ms_per_unit": 20.0, "engine_busy_share": 0.8}


def test_a_run_without_documents_states_the_phase_was_left_out() -> None:
    """--documents 0 (the GPU serve run's bulk part): no documents phase, no verdict on it."""
    found = phases(polite_ms=250.0, beside=700.0, statuses=[200, 200])
    del found["bulk + documents"]
    result = verdict(found)
    assert result["documents_met"] is None and result["bulk_refused_met"]
    text = markdown({"meta": {"setup": "a run"}, "phases": found, "verdict": result})
    assert "documents beside the bulk clients: not run" in text and "MISSED" not in text
