"""`make bench-mixed-lengths` end to end on a toy model (the GPU serve run's `mixed` part
rehearses the same on the CPU): both servers answer every request, the report compares
them, and the engine's device and dtype are the ones asked for (nothing asserts on speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.speed.batching import mixed_lengths


@pytest.mark.slow
def test_a_tiny_run_compares_both_batchings_on_the_asked_device(tmp_path: Path) -> None:
    assert mixed_lengths.main(["--tiny", "--quick", "--rate", "8", "--seconds", "2",
                               "--data", str(tmp_path / "no-data"), "--device", "cpu",
                               "--dtype", "float32", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "mixed_lengths.json").read_text())
    assert result["meta"]["model"] == "tiny toy model on cpu, float32"
    assert result["meta"]["texts"] == "synthetic"
    static, continuous = result["servers"]["static"], result["servers"]["continuous"]
    assert static["requests"] == continuous["requests"] > 0  # the same arrivals
    assert static["statuses"] == continuous["statuses"] == {"200": static["requests"]}
    assert result["ratios"]["tokens_per_s"] == pytest.approx(
        continuous["tokens_per_s"] / static["tokens_per_s"])
    assert "Continuous / static: tokens/s" in (tmp_path / "mixed_lengths.md").read_text()
