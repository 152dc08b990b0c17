"""The fastText router's posteriors: temperature scaling from the artifact's config."""

from __future__ import annotations

import math

import pytest
from fasttext_tiny import classifier_bytes

from server.routing.classifier import calibrated, load_classifier

KEYWORDS = {"law": ["court"], "medical": ["dose"], "it": ["click"]}
TEXT = "the court said"


def test_temperature_flattens_posteriors_and_keeps_the_ranking() -> None:
    raw = {"law": 0.9, "medical": 0.08, "it": 0.02}
    assert calibrated(raw, 1.0) == raw
    warm = calibrated(raw, 3.0)
    assert math.isclose(sum(warm.values()), 1.0)
    assert sorted(warm, key=warm.__getitem__) == sorted(raw, key=raw.__getitem__)
    assert warm["law"] < raw["law"] and warm["it"] > raw["it"]
    # p^(1/T) renormalised: the ratio of two labels is the raw ratio to the power 1/T
    assert math.isclose(warm["law"] / warm["medical"], (0.9 / 0.08) ** (1 / 3))
    cold = calibrated(raw, 0.5)
    assert cold["law"] > raw["law"]


def test_a_zero_posterior_stays_finite() -> None:
    found = calibrated({"law": 1.0, "medical": 0.0}, 2.0)
    assert 0 < found["medical"] < 1e-2 and math.isclose(sum(found.values()), 1.0)


def test_the_artifact_temperature_applies_to_served_posteriors() -> None:
    files = {"classifier.bin": classifier_bytes(KEYWORDS)}
    plain = load_classifier(files, {"labels": list(KEYWORDS)}, version=1)
    scaled = load_classifier(files, {"labels": list(KEYWORDS), "temperature": 4.0}, version=1)
    assert plain.temperature == 1.0 and scaled.temperature == 4.0
    assert plain.posteriors(TEXT) == plain.raw_posteriors(TEXT)
    assert scaled.raw_posteriors(TEXT) == plain.raw_posteriors(TEXT)
    raw, served = plain.posteriors(TEXT), scaled.posteriors(TEXT)
    assert max(raw, key=raw.__getitem__) == max(served, key=served.__getitem__) == "law"
    assert served["law"] < raw["law"]


@pytest.mark.parametrize("value", [0, -1.5, "2", float("nan"), float("inf"), True, None])
def test_an_invalid_temperature_is_refused_with_a_clear_message(value: object) -> None:
    files = {"classifier.bin": classifier_bytes(KEYWORDS)}
    with pytest.raises(ValueError, match="'temperature' must be a finite number > 0"):
        load_classifier(files, {"labels": list(KEYWORDS), "temperature": value}, version=1)
