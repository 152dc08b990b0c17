"""The router's calibration scores in the evaluation report."""

from __future__ import annotations

import math

import pytest

from benchmarks.quality.evaluation.calibration import calibration_scores


def test_scores_of_two_hand_computed_sentences() -> None:
    found = calibration_scores([{"a": 0.9, "b": 0.1}, {"a": 0.6, "b": 0.4}], ["a", "b"])
    assert found["mean_confidence"] == 0.75 and found["accuracy"] == 0.5
    assert found["nll"] == pytest.approx(-(math.log(0.9) + math.log(0.4)) / 2, abs=1e-4)
    # bins 0.9 (confidence 0.9, right) and 0.6 (0.6, wrong), one sentence each
    assert found["ece"] == pytest.approx(0.1 / 2 + 0.6 / 2, abs=1e-4)


def test_a_perfectly_calibrated_bin_has_no_error() -> None:
    posteriors = [{"a": 0.75, "b": 0.25}] * 4
    found = calibration_scores(posteriors, ["a", "a", "a", "b"])
    assert found["accuracy"] == 0.75 and found["ece"] == 0.0


def test_certainty_is_the_top_bin() -> None:
    found = calibration_scores([{"a": 1.0, "b": 0.0}], ["b"])
    assert found["ece"] == 1.0 and found["nll"] == pytest.approx(-math.log(1e-12), abs=1e-3)
