"""The adversarial benchmark's bookkeeping (benchmarks/speed/adversarial.py): per-phase
summaries, the two targets and the markdown table; the adversaries' request bodies. The
clients themselves run against a real server in tests/server/test_server_adversarial.py."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.speed.adversarial import Phase, markdown, polite_texts, report
from benchmarks.speed.adversaries import Outcome, bulk_batch


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
