"""The corrections bench's report says how its baseline module was trained."""

from __future__ import annotations

import pytest

from benchmarks.quality.corrections.corrections import DEFAULT_BASELINE_LINES, parse_args
from benchmarks.quality.corrections.corrections_report import _baseline_training


def baseline(scores: dict[str, object]) -> dict[str, object]:
    return {"job": {"options": {"max_steps": 53}, "scores": scores}}


@pytest.mark.parametrize(("reason", "said"), [
    ("max_steps", "316 steps, ended by the cap of 53 steps"),
    ("max_epochs", "316 steps, ended by its epoch limit"),
    ("early stopping", "316 steps, ended by early stopping (dev BLEU no longer improved)"),
])
def test_the_baseline_line_names_what_ended_its_training(reason: str, said: str) -> None:
    assert _baseline_training(baseline({"training": {"steps": 316,
                                                     "stop_reason": reason}})) == said
    assert _baseline_training(baseline({})) == "at most 53 steps"


def test_a_smaller_baseline_is_its_own_report() -> None:
    assert parse_args([]).baseline_lines == DEFAULT_BASELINE_LINES
    assert parse_args(["--baseline-lines", "500"]).baseline_lines == 500
