"""benchmarks/speed/batching/mixed_domains.py on the toy store: every adapter variant decodes the
same mixed-domain batches, greedy and beam 4, and the report compares each with float32."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.speed.batching.mixed_domains import BEAMS, VARIANTS, main


@pytest.mark.slow
def test_every_variant_decodes_the_same_mixed_batches(tmp_path: Path) -> None:
    assert main(["--tiny", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "mixed_domains.json").read_text())["rows"]
    assert [(row["beam"], row["variant"]) for row in rows] == [
        (beam, name) for beam in BEAMS for name in VARIANTS]
    for beam in BEAMS:
        mine = [row for row in rows if row["beam"] == beam]
        assert len({row["batches"] for row in mine}) == 1  # one plan for every variant
        assert mine[0]["speed_vs_float32"] == 1.0
        assert all(row["seconds"] > 0 for row in mine)
        assert mine[0]["modules_per_batch"] > 1  # the batches mix domains
    assert "| 4 | int8 |" in (tmp_path / "mixed_domains.md").read_text()
