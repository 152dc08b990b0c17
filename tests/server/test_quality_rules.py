"""Features, detectors and the estimator file: pure functions, table-driven."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

import pytest

from model_store import Manifest
from model_store.compact import COMPACT_OF
from server.quality import casing
from server.quality.detectors import detect
from server.quality.estimator import PRIOR, Estimator, EstimatorError, fit
from server.quality.estimators import EstimatorBook, write_estimator
from server.quality.features import (
    BEAM_FEATURES,
    FEATURES,
    Candidate,
    beam_chrf,
    copy_share,
    features,
    overlap,
    repeated_ngrams,
)
from server.quality.signals import Signals


@pytest.mark.parametrize(("source", "output", "expected"), [
    ("The patient takes one tablet.", "Le patient prend un comprimé.", 1 / 3),
    ("Click the button", "Click the button", 1.0),
    ("Version 3.12 is out", "La version 3.12 est sortie", 1 / 3),
    ("Hello", "", 0.0),
])
def test_copy_share(source: str, output: str, expected: float) -> None:
    assert copy_share(source, output) == pytest.approx(expected)


@pytest.mark.parametrize(("ids", "expected"), [
    ([1, 2, 3, 4, 5], 0.0), ([1, 2, 3, 1, 2, 3, 1, 2, 3], 1 - 3 / 7), ([1, 2], 0.0),
    ([7] * 10, 1 - 1 / 8)])
def test_repeated_ngrams(ids: list[int], expected: float) -> None:
    assert repeated_ngrams(ids) == pytest.approx(expected)


def test_overlap() -> None:
    assert overlap([1, 2, 3], [1, 2, 3]) == 1.0
    assert overlap([1, 2], [3, 4]) == 0.0
    assert overlap([], []) == 1.0
    assert overlap([1, 2, 2], [2, 2, 5]) == pytest.approx(2 * 2 / 6)


def test_beam_chrf_is_the_alternatives_mean_chrf_against_the_output() -> None:
    output = "Le patient prend un comprimé par jour."
    assert beam_chrf(output, [output, output]) == pytest.approx(1.0)
    assert beam_chrf(output, ["zzz"]) == pytest.approx(0.0)
    near, far = "Le patient prend une pilule par jour.", "Il fait beau."
    assert 0 < beam_chrf(output, [far]) < beam_chrf(output, [near, far]) < beam_chrf(
        output, [near]) < 1


def test_character_features_read_the_texts() -> None:
    candidate = Candidate("abcd", "abcdefghi", [1, 2, 0], [5, 6, 7], [[5, 6], [5, 8]],
                          [-0.1, -0.2, -0.3], alternative_outputs=["abcdefghi", "abcdefghi"])
    found = features(candidate, None)
    assert found["char_ratio"] == pytest.approx(math.log(10 / 5))
    assert found["source_chars"] == pytest.approx(math.log(5))
    assert found["beam_chrf"] == pytest.approx(1.0)
    assert found["beam_gap"] == pytest.approx(0.1)


def signals(lps: list[float], coverage: list[float]) -> Signals:
    return Signals(lps, [1.0] * len(lps), coverage, 0.5)


def row(source_tokens: int, output_ids: list[int], *, source: str = "a b c",
        output: str = "x y z", coverage: float = 1.0) -> dict[str, float]:
    candidate = Candidate(source, output, list(range(source_tokens + 1)), output_ids)
    return features(candidate, signals([-0.5] * (len(output_ids) + 1),
                                       [coverage] * source_tokens))


def test_features_are_complete_and_beam_ones_missing_without_alternatives() -> None:
    found = row(5, [1, 2, 3, 4])
    assert set(found) == set(FEATURES)
    assert all(math.isnan(found[name]) for name in BEAM_FEATURES)
    assert found["lp_mean"] == pytest.approx(-0.5)


ENGLISH = "The patient takes one tablet every day with food"
FRENCH = "Le patient prend un comprimé par jour avec de la nourriture"


@pytest.mark.parametrize(("source_tokens", "output_ids", "source", "output", "coverage",
                          "english", "expected"), [
    (10, list(range(12)), ENGLISH, FRENCH, 1.0, False, []),
    (10, list(range(12)), ENGLISH, ENGLISH, 1.0, True, ["copy"]),
    (10, list(range(12)), ENGLISH, ENGLISH, 1.0, False, []),  # language ID says target
    (3, [1, 2, 3], "https://example.org/a", "https://example.org/a", 1.0, True, []),
    (10, [5, 6, 7] * 6, ENGLISH, FRENCH, 1.0, False, ["loop"]),
    (10, list(range(3)), ENGLISH, FRENCH, 1.0, False, ["dropped"]),
    (10, list(range(12)), ENGLISH, FRENCH, 0.1, False, ["dropped"]),
    (10, list(range(30)), ENGLISH, FRENCH, 1.0, False, ["invented"]),
    (3, list(range(30)), "Hi there", FRENCH, 1.0, False, []),  # too short for ratios
])
def test_detectors(source_tokens: int, output_ids: list[int], source: str, output: str,
                   coverage: float, english: bool, expected: list[str]) -> None:
    found = row(source_tokens, output_ids, source=source, output=output, coverage=coverage)
    issues = detect(found, source=source, output=output,
                    reads_as_source=lambda _text: english, hit_length_limit=False)
    assert issues == expected


def test_fit_recovers_a_linear_relation_and_round_trips() -> None:
    rows = [{"lp_mean": -i / 10, "copy_share": (i % 3) / 3} for i in range(40)]
    targets = [0.9 + r["lp_mean"] * 0.2 - 0.1 * r["copy_share"] for r in rows]
    model = fit(rows, targets, ridge=1e-6, names=("lp_mean", "copy_share"))
    for r, t in zip(rows, targets, strict=True):
        assert model.predict(r) == pytest.approx(t, abs=1e-4)
    again = Estimator.from_json(model.to_json())
    assert again == model
    assert model.predict({"lp_mean": 100.0, "copy_share": 0.0}) == 1.0  # clipped
    assert model.predict({"copy_share": 0.0}) == pytest.approx(
        model.predict({"lp_mean": model.mean[0], "copy_share": 0.0}))  # imputed


def test_a_bad_estimator_file_lists_every_problem() -> None:
    body = ('{"format": 2, "features": ["lp_mean", "nonsense"], "mean": [0], '
            '"scale": [0, 1], "weights": [1, 1], "threshold": "x"}')
    with pytest.raises(EstimatorError) as caught:
        Estimator.from_json(body)
    message = str(caught.value)
    for part in ("format 2", "unknown features ['nonsense']", "mean: a list of 2",
                 "scale: every value must be > 0", "bias: a number", "threshold: a number"):
        assert part in message


def manifest(fingerprint: str) -> Manifest:
    return Manifest(format=1, kind="backbone", name="tiny", version=1,
                    created_at="2026-11-26T00:00:00Z", files={},
                    backbone_fingerprint=fingerprint)


def test_the_book_uses_the_first_file_fitted_for_the_backbone(tmp_path: Path) -> None:
    ours, other = "a" * 64, "b" * 64
    fitted = fit([{"lp_mean": -1.0}, {"lp_mean": -2.0}], [0.8, 0.4], names=("lp_mean",))
    write_estimator(tmp_path / "store", "tiny", replace(fitted, backbone_fingerprint=other))
    write_estimator(tmp_path / "builtin", "tiny", replace(fitted, backbone_fingerprint=ours,
                                                          threshold=0.3))
    book = EstimatorBook([tmp_path / "store", tmp_path / "builtin"])
    assert book.get(manifest(ours)).threshold == 0.3
    assert book.get(manifest("c" * 64)) is PRIOR
    assert book.get(None) is PRIOR
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["tiny.json.xz"]


def test_a_plain_json_estimator_is_read_until_a_refit_replaces_it(tmp_path: Path) -> None:
    """What older versions wrote (`<backbone>.json`, plain JSON) is still served; the
    compressed file a refit writes takes its place and holds the same estimator."""
    fingerprint = "a" * 64
    fitted = replace(fit([{"lp_mean": -1.0}, {"lp_mean": -2.0}], [0.8, 0.4],
                         names=("lp_mean",)), backbone_fingerprint=fingerprint, threshold=0.3)
    (tmp_path / "tiny.json").write_text(fitted.to_json())
    assert EstimatorBook([tmp_path]).get(manifest(fingerprint)) == fitted
    path = write_estimator(tmp_path, "tiny", replace(fitted, threshold=0.25))
    assert [p.name for p in tmp_path.iterdir()] == ["tiny.json.xz"]
    assert path.read_bytes().startswith(b"\xfd7zXZ")
    assert Estimator.from_json(path.read_bytes()) == replace(fitted, threshold=0.25)
    assert EstimatorBook([tmp_path]).get(manifest(fingerprint)).threshold == 0.25
    path.write_bytes(path.read_bytes()[:-20])  # a truncated file is refused, not a 500
    with pytest.raises(EstimatorError, match="xz"):
        Estimator.from_json(path.read_bytes())


def test_a_compact_restore_uses_the_estimator_of_the_version_it_restores(
        tmp_path: Path) -> None:
    restored, compact = "a" * 64, "d" * 64
    fitted = fit([{"lp_mean": -1.0}, {"lp_mean": -2.0}], [0.8, 0.4], names=("lp_mean",))
    write_estimator(tmp_path, "tiny", replace(fitted, backbone_fingerprint=restored,
                                              threshold=0.3))
    backbone = manifest(compact).model_copy(update={"provenance": {COMPACT_OF: {
        "version": 1, "backbone_fingerprint": restored, "storage": "int8-rows"}}})
    assert EstimatorBook([tmp_path]).get(backbone).threshold == 0.3
    assert EstimatorBook([tmp_path]).get(manifest(compact)) is PRIOR


@pytest.mark.parametrize(("text", "shouted", "folded"), [
    ("DO NOT TAKE MORE THAN THE DOSE.", True, "Do not take more than the dose."),
    ("- STORE BELOW 25 °C {0}", True, "- Store below 25 °c {0}"),
    ("FAQ", False, "Faq"),
    ("Use the USB port.", False, "Use the usb port."),
    ("NASA and ESA", False, "Nasa and esa"),
    ("42 %", False, "42 %"),
])
def test_capitals(text: str, shouted: bool, folded: str) -> None:
    assert casing.is_shouted(text) is shouted
    assert casing.fold(text) == folded


def test_a_refit_is_read_again(tmp_path: Path) -> None:
    fingerprint = "a" * 64
    fitted = fit([{"lp_mean": -1.0}, {"lp_mean": -2.0}], [0.8, 0.4], names=("lp_mean",))
    write_estimator(tmp_path, "tiny", replace(fitted, backbone_fingerprint=fingerprint,
                                              threshold=0.3))
    book = EstimatorBook([tmp_path], recheck_s=0.0)
    assert book.get(manifest(fingerprint)).threshold == 0.3
    path = write_estimator(tmp_path, "tiny", replace(fitted, backbone_fingerprint=fingerprint,
                                                     threshold=0.25))
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 10))
    assert book.get(manifest(fingerprint)).threshold == 0.25
