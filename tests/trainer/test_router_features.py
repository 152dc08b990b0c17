"""A router's examples as hashed features (trainer/routers/features.py): what its artifact
keeps for retraining holds no text, keeps what fastText learns from, and drops what few
sentences share."""

from __future__ import annotations

import lzma
import re

import pytest

from server.routing.features import HashedFeatures, feature_line
from trainer.routers.classifier import ClassifierSettings, load_model, train_classifier
from trainer.routers.features import (
    features_from_bytes,
    features_to_bytes,
    featurize,
    projected,
    pruned,
    pruned_new,
)

FEATURES = HashedFeatures()
SENTENCES = [("medical", "Take one tablet of Zyprexa twice a day."),
             ("medical", "Take one tablet daily."),
             ("law", "The Member States shall comply with this Directive."),
             ("law", "The Member States shall comply with this Directive."),  # a repeat
             ("it", "Click the button; the the the"),
             ("generic", "")]


def test_the_file_gives_back_the_examples_and_their_order() -> None:
    examples = featurize(SENTENCES, FEATURES)
    assert examples[4][1].count(FEATURES.of("the")[0]) == 4  # repeats kept: fastText averages
    assert examples[5] == ("generic", ())
    assert features_from_bytes(features_to_bytes(examples)) == examples
    assert features_from_bytes(features_to_bytes([])) == []


def test_the_file_holds_no_text() -> None:
    data = lzma.decompress(features_to_bytes(featurize(SENTENCES, FEATURES)))
    words = {w.lower() for _, text in SENTENCES for w in re.findall(r"[A-Za-z]{4,}", text)}
    for word in words - {"medical"}:  # a class name is stored, as the manifest lists it
        for encoded in (word.encode(), word.encode("utf-32-le"), word.title().encode()):
            assert encoded not in data, word


def test_features_of_fewer_than_k_distinct_examples_are_dropped() -> None:
    examples = featurize(SENTENCES, FEATURES)
    kept = pruned(examples, 2)
    take, zyprexa = FEATURES.of("take")[0], FEATURES.of("zyprexa")[0]
    assert take in kept[0][1] and zyprexa not in kept[0][1]  # "take" is in 2 sentences
    # the law repeat counts once: none of its features is in a second distinct example,
    # so both copies lose every one but "the" and ".", which other sentences hold too
    assert kept[2] == kept[3] == ("law", tuple(sorted(FEATURES.of("the") + FEATURES.of("."))))
    assert [label for label, _ in kept] == ["medical", "medical", "law", "law", "it"]
    assert pruned(examples, 1) == examples[:5]  # only the empty example goes


def test_a_text_finds_its_stored_example_by_the_features_the_store_kept() -> None:
    stored = pruned(featurize(SENTENCES, FEATURES), 2)
    known = {number for _, bag in stored for number in bag}
    assert projected(FEATURES.of(SENTENCES[0][1]), known) == stored[0][1]


@pytest.mark.parametrize("data", [b"", b"not xz", lzma.compress(b"not an archive")])
def test_a_damaged_file_is_refused_with_a_clear_message(data: bytes) -> None:
    with pytest.raises(ValueError, match="router features file"):
        features_from_bytes(data)


def test_new_text_keeps_the_features_enough_sentences_hold() -> None:
    stored = pruned(featurize(SENTENCES, FEATURES), 2)
    new = [FEATURES.of("Take the tablet with water."), FEATURES.of("Take the tablet with water.")]
    cut = pruned_new(new, stored, 3)
    # "take" and "." are in 2 stored sentences + the new one; "the" in 3 + 1; "tablet" in
    # 2 + 1; "water" only in the new sentence, repeated: one distinct bag
    assert cut[0] == cut[1] == tuple(sorted(
        FEATURES.of("take") + FEATURES.of("the") + FEATURES.of("tablet") + FEATURES.of(".")))
    assert pruned_new(new, stored, 1) == new


def test_a_router_of_few_features_is_trained_unquantized() -> None:
    """fastText's product quantization needs 256 rows: a small router is left as it is."""
    settings = ClassifierSettings(epoch=2, min_examples=1)
    assert settings.quantize
    examples = featurize([("law", "the court rules"), ("it", "click the button")] * 5,
                         settings.features())
    model = load_model(train_classifier(examples, settings))
    assert not model.is_quantized()
    assert model.predict(feature_line(FEATURES.of("the court")))[0][0] == "__label__law"
