"""The adversarial benchmark's bookkeeping (benchmarks/speed/adversarial/adversarial.py): per-phase
summaries, the two targets and the markdown table; the adversaries' request bodies. The
clients themselves run against a real server in tests/server/test_server_adversarial.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.speed.adversarial.adversarial import Phase, markdown, polite_texts, report
from benchmarks.speed.adversarial.adversarial_compare import BULK, BULK_PHASE, verdict
from benchmarks.speed.adversarial.adversarial_compare import markdown as compare_markdown
from benchmarks.speed.adversarial.adversaries import Outcome, bulk_batch


def phases(*, slow_polite: float, adversary_s: float, status: int) -> dict[str, Phase]:
    quiet = Phase("quiet", [0.1, 0.1, 0.2], [200, 200, 200], [])
    mix = Phase("mix", [slow_polite] * 3, [200, 200, 429],
                [Outcome("24 MB body", 413, 0.2), Outcome("nested JSON", status, adversary_s)])
    return {"quiet": quiet, "mix": mix}


def test_targets_met() -> None:
    results = report(phases(slow_polite=0.25, adversary_s=0.5, status=422), tiny=True,
                     data=None)
    assert results["targets"] == {"ratio": 2.5, "ratio_met": True, "answers_met": True}
    polite = results["phases"]["mix"]["polite"]
    assert polite["errors"] == 1 and polite["statuses"] == {"200": 2, "429": 1}
    assert results["phases"]["mix"]["adversaries"]["24 MB body"]["statuses"] == {"413": 1}
    # summaries per client kind, not every request
    assert "raw" not in results
    nested = results["phases"]["mix"]["adversaries"]["nested JSON"]
    assert nested["requests"] == 1 and nested["p50_ms"] == 500.0 and nested["max_s"] == 0.5
    assert polite["p50_ms"] == 250.0 and polite["p95_ms"] == 250.0
    table = markdown(results)
    assert "| mix | 250.0 |" in table and "2.50x (met)" in table
    json.dumps(results)  # what is written must be JSON


def test_targets_missed_by_slowness_or_a_5xx() -> None:
    slow = report(phases(slow_polite=0.5, adversary_s=12.0, status=422), tiny=True, data=None)
    assert slow["targets"]["ratio_met"] is False and slow["targets"]["answers_met"] is False
    failed = report(phases(slow_polite=0.2, adversary_s=0.1, status=500), tiny=True, data=None)
    assert failed["targets"]["answers_met"] is False
    assert "| NO |" in markdown(failed)


def test_polite_texts_fall_back_to_synthetic_ones(tmp_path: Path) -> None:
    texts = polite_texts(tmp_path / "missing", 5)
    assert len(texts) == 5 and all(texts)


def test_the_bulk_batch_is_legal_but_heavy() -> None:
    body = bulk_batch(["The patient takes one tablet a day."] * 3)
    items = body["items"]
    assert isinstance(items, list) and len(items) == 64
    assert all(880 <= len(item["text"]) <= 940 for item in items)


def test_the_side_by_side_verdict_reads_the_bulk_phase() -> None:
    """benchmarks/speed/adversarial/adversarial_compare.py: per server, the mix + bulk polite ratio
    against its own quiet phase, and whether every bulk request got a 200."""
    def server(bulk_polite: float, bulk_status: int) -> dict[str, Any]:
        quiet = Phase("quiet", [0.1, 0.1], [200, 200], [])
        mix = Phase("mix", [0.2, 0.2], [200, 200], [Outcome("nested JSON", 422, 0.1)])
        bulk = Phase(BULK_PHASE, [bulk_polite] * 2, [200, 200],
                     [Outcome(BULK, bulk_status, 20.0), Outcome("24 MB body", 413, 0.2)])
        results = report({"quiet": quiet, "mix": mix, BULK_PHASE: bulk}, tiny=True,
                         data=None)
        results["verdict"] = verdict(results)
        return results

    by_server = {"static": server(0.6, 504), "continuous": server(0.25, 200)}
    static, continuous = by_server["static"]["verdict"], by_server["continuous"]["verdict"]
    assert static["bulk_ratio"] == 6.0 and not static["bulk_ratio_met"]
    assert not static["bulk_all_200"] and static["bulk_statuses"] == {"504": 1}
    assert continuous["bulk_ratio"] == 2.5 and continuous["bulk_ratio_met"]
    assert continuous["bulk_all_200"]
    table = compare_markdown(by_server)
    assert "| continuous | mix + bulk | 250.0 |" in table
    assert "continuous: mix + bulk polite p50 2.50x quiet (target <= 3x: met)" in table
    json.dumps(by_server)
