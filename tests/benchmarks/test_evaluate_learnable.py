"""Dev-tuned ensemble weights: coordinate ascent over the simplex, on synthetic scores."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from benchmarks.quality.evaluation.learnable import (
    Weights,
    coordinate_ascent,
    normalised,
    with_share,
)


@pytest.mark.parametrize(("weights", "name", "share", "expected"), [
    ({"a": 0.5, "b": 0.5}, "a", 0.2, {"a": 0.2, "b": 0.8}),
    ({"a": 0.5, "b": 0.25, "c": 0.25}, "a", 0.0, {"b": 0.5, "c": 0.5}),
    ({"a": 0.5, "b": 0.5}, "c", 0.4, {"a": 0.3, "b": 0.3, "c": 0.4}),
    ({"a": 0.5, "b": 0.5}, "a", 1.0, {"a": 1.0}),
    ({"a": 1.0}, "a", 0.4, None),  # nobody else can take the remaining mass
])
def test_with_share(weights: Weights, name: str, share: float,
                    expected: Weights | None) -> None:
    assert with_share(weights, name, share) == expected


def test_normalised_drops_zero_weights_and_refuses_an_empty_mixture() -> None:
    assert normalised({"a": 2.0, "b": 0.0, "c": 2.0}) == {"a": 0.5, "c": 0.5}
    with pytest.raises(ValueError, match="no positive weight"):
        normalised({"a": 0.0})


def _distance_score(target: Weights) -> Callable[[Weights], float]:
    def score(weights: Weights) -> float:
        names = set(target) | set(weights)
        return -sum(abs(weights.get(n, 0.0) - target.get(n, 0.0)) for n in names)
    return score


def test_coordinate_ascent_moves_towards_the_best_mixture() -> None:
    start = {"generic": 0.25, "law": 0.25, "medical": 0.25, "it": 0.25}
    target = {"generic": 0.3, "medical": 0.7}
    search = coordinate_ascent(start, _distance_score(target), rounds=3)
    score = _distance_score(target)
    assert search.score == pytest.approx(score(search.weights))
    assert search.score > score(normalised(start))
    assert search.weights.get("law", 0.0) == 0.0 and search.weights.get("it", 0.0) == 0.0
    assert sum(search.weights.values()) == pytest.approx(1.0, abs=1e-5)
    assert search.trace[0]["weights"] == normalised(start)


def test_coordinate_ascent_keeps_the_start_when_nothing_improves() -> None:
    start = {"generic": 0.5, "medical": 0.5}
    search = coordinate_ascent(start, lambda weights: 1.0, rounds=2)
    assert search.weights == start and search.score == 1.0
    # one round of 2 members x 4 shares (duplicates scored once), then it stops
    assert 1 < len(search.trace) <= 1 + 2 * 4


def test_each_mixture_is_scored_once() -> None:
    calls: list[Weights] = []

    def score(weights: Weights) -> float:
        calls.append(weights)
        return 0.0

    coordinate_ascent({"a": 0.5, "b": 0.5}, score, rounds=3)
    keys = [tuple(sorted(w.items())) for w in calls]
    assert len(keys) == len(set(keys))
