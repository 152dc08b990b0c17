"""benchmarks/speed/batching/batch_lengths.py on the toy model: every lookahead translates every
sentence, and the report says what each cost against lookahead 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.speed.batching.batch_lengths import LOOKAHEADS, main


@pytest.mark.slow
def test_every_lookahead_runs_the_same_sentences(tmp_path: Path) -> None:
    assert main(["--tiny", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "batch_lengths.json").read_text())
    rows = report["rows"]
    assert [row["lookahead"] for row in rows] == list(LOOKAHEADS)
    assert rows[0]["cost_vs_lookahead_1"] == 1.0
    sentences = {round(row["batches"] * row["sentences_per_batch"]) for row in rows}
    assert sentences == {40}
    assert all(row["ms_per_sentence"] > 0 for row in rows)
    assert "| 2 |" in (tmp_path / "batch_lengths.md").read_text()
