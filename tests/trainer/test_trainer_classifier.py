"""Calibrating the router: the temperature fitted on held-out examples (of a hand-written
fastText model that reads text: features None)."""

from __future__ import annotations

import math

from tests.server.fasttext_tiny import classifier_bytes
from trainer.routers.classifier import TEMPERATURES, fit_temperature

KEYWORDS = {"law": ["court"], "medical": ["dose"], "it": ["click"]}
TEXTS = {"law": "the court rules", "medical": "one dose daily", "it": "click the button"}


def examples(wrong_every: int | None) -> list[tuple[str, str]]:
    """30 dev examples; every `wrong_every`-th carries another domain's label."""
    labels = list(TEXTS)
    out = []
    for i in range(30):
        label = labels[i % 3]
        if wrong_every and i % wrong_every == 0:
            label = labels[(i + 1) % 3]
        out.append((label, TEXTS[labels[i % 3]]))
    return out


def test_an_overconfident_classifier_gets_a_temperature_above_one() -> None:
    model = classifier_bytes(KEYWORDS, scale=8.0)  # top posterior ~0.999
    found = fit_temperature(model, examples(wrong_every=4), None)  # 8 of 30 labels disagree
    assert found.temperature > 1.5
    assert found.nll < found.nll_uncalibrated
    assert found.examples == 30


def test_a_classifier_right_on_every_example_may_sharpen() -> None:
    found = fit_temperature(classifier_bytes(KEYWORDS, scale=1.0), examples(wrong_every=None),
                            None)
    assert found.temperature < 1.0
    assert found.nll <= found.nll_uncalibrated


def test_examples_of_unknown_labels_are_ignored() -> None:
    model = classifier_bytes(KEYWORDS)
    found = fit_temperature(model, [("religion", "amen")] + examples(wrong_every=4), None)
    assert found.examples == 30
    none = fit_temperature(model, [("religion", "amen")], None)
    assert none.temperature == 1.0 and none.examples == 0 and math.isnan(none.nll)


def test_the_grid_contains_no_scaling() -> None:
    assert 1.0 in TEMPERATURES and min(TEMPERATURES) == 0.25 and max(TEMPERATURES) == 16.0
