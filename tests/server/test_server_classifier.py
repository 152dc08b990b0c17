"""The fastText router's posteriors: temperature scaling from the artifact's config, and
the hashed features a router of `config.features` reads."""

from __future__ import annotations

import math
import zlib

import pytest
from fasttext_tiny import classifier_bytes, hashed_classifier_bytes

from server.routing.classifier import calibrated, load_classifier
from server.routing.features import HashedFeatures, feature_line, model_input

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


def test_a_router_of_hashed_features_reads_the_text_hashed() -> None:
    """The same keywords, once as words (an older router) and once as their feature numbers
    (the recipe's): each routes the text when it reads it its own way."""
    features = HashedFeatures()
    hashed = load_classifier({"classifier.bin": hashed_classifier_bytes(KEYWORDS)},
                             {"labels": list(KEYWORDS), "features": features.as_config()},
                             version=1)
    words = load_classifier({"classifier.bin": classifier_bytes(KEYWORDS)},
                            {"labels": list(KEYWORDS)}, version=1)
    assert hashed.features == features and words.features is None
    for classifier in (hashed, words):
        found = classifier.posteriors("The COURT said:")
        assert max(found, key=found.__getitem__) == "law" and found["law"] > 0.9
    # read the other way, the keywords are unknown: no class stands out
    mismatched = load_classifier({"classifier.bin": classifier_bytes(KEYWORDS)},
                                 {"labels": list(KEYWORDS), "features": features.as_config()},
                                 version=1)
    assert max(mismatched.posteriors(TEXT).values()) < 0.5


@pytest.mark.parametrize(("text", "grams"), [
    ("the court said", ["the", "court", "said", "the court", "court said"]),
    ("The COURT,", ["the", "court", ",", "the court", "court ,"]),
    ("", []),
])
def test_features_are_the_hashed_words_and_word_pairs_sorted(text: str,
                                                             grams: list[str]) -> None:
    """The numbers are CRC-32 of the normalised words and pairs: stable across processes
    and machines (a router trained on one reads them on another)."""
    features = HashedFeatures(ngrams=2, buckets=1 << 22)
    found = features.of(text)
    assert found == tuple(sorted(zlib.crc32(g.encode()) % (1 << 22) for g in grams))
    assert model_input(text, features) == feature_line(found)
    unigrams = HashedFeatures(ngrams=1, buckets=1000).of(text)
    assert unigrams == tuple(sorted(zlib.crc32(g.encode()) % 1000 for g in grams
                                    if " " not in g))


@pytest.mark.parametrize("value", [
    {"kind": "char-ngrams", "ngrams": 2, "buckets": 8}, {"kind": "hashed-word-ngrams"},
    {"kind": "hashed-word-ngrams", "ngrams": True, "buckets": 8},
    {"kind": "hashed-word-ngrams", "ngrams": 0, "buckets": 8}, "hashed", 3])
def test_unknown_features_are_refused_with_a_clear_message(value: object) -> None:
    files = {"classifier.bin": classifier_bytes(KEYWORDS)}
    with pytest.raises(ValueError, match="features"):
        load_classifier(files, {"labels": list(KEYWORDS), "features": value}, version=1)
