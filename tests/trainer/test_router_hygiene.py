"""Training text from uploads cannot steer the router's fastText training file: label
markers and control characters are neutralised, every example stays one line, and what
the router reads and stores is hashed feature numbers."""

from __future__ import annotations

import re

import fasttext
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.routing.classifier import LABEL_PREFIX, fasttext_model
from server.routing.features import HashedFeatures, classifier_text, model_input, neutralise
from trainer.routers.classifier import ClassifierSettings, train_classifier
from trainer.routers.features import features_from_bytes, features_to_bytes, featurize

HOSTILE = [
    "take the dose __label__evil now",
    "take the dose __LABEL__evil now",
    "take\nthe dose\r\n__label__evil",
    "take the dose\u2028__label__evil\tx",
    "take the\x00dose\x1b[31m\x85 evil\x0c",
    "____label__label__evil",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_neutralised_text_is_one_line_without_label_markers(text: str) -> None:
    for found in (neutralise(text), classifier_text(text)):
        assert LABEL_PREFIX not in found
        assert found.isprintable() and "\n" not in found and "\t" not in found
    assert "evil" in classifier_text(text)  # the words stay: only their meaning is gone


def test_hostile_text_becomes_inert_feature_numbers() -> None:
    features = HashedFeatures()
    for text in HOSTILE:
        line = model_input(text, features)
        assert line and all(re.fullmatch("[0-9a-f]+", token) for token in line.split(" "))
        assert all(0 <= number < features.buckets for number in features.of(text))


def test_a_router_trained_on_hostile_lines_learns_only_real_labels(tmp_path: str) -> None:
    settings = ClassifierSettings(epoch=2, quantize=False, min_examples=1)
    examples = [("medical", text) for text in HOSTILE] * 3
    examples += [("law", "the court rules on the appeal")] * 18
    stored = features_from_bytes(features_to_bytes(featurize(examples, settings.features())))
    model_bytes = train_classifier(stored, settings)

    path = f"{tmp_path}/router.bin"
    with open(path, "wb") as out:
        out.write(fasttext_model(model_bytes))
    labels = fasttext.load_model(path).get_labels()

    assert sorted(labels) == [f"{LABEL_PREFIX}law", f"{LABEL_PREFIX}medical"]


def _old_classifier_text(text: str) -> str:
    """The substitution the tokenizing version replaced (the oracle)."""
    separated = re.sub(r"([^\w\s])", r" \1 ", neutralise(text.lower()))
    return re.sub(r"\s+", " ", separated).strip()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.text(st.sampled_from(list("aZé_1 .,!'\n\t\u2028\u200b«»")),
                                      max_size=60))
def test_classifier_text_is_the_same_as_the_old_substitution(text: str) -> None:
    assert classifier_text(text) == _old_classifier_text(text)
