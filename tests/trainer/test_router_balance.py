"""A new domain's share of the router's examples: its class repeated up to the others'
size, and the stored examples that look like it moved to it (real fastText models). The
examples are hashed features, as the router's artifact stores them."""

from __future__ import annotations

import random
from collections import Counter

from server.routing.features import Features, HashedFeatures
from trainer.routers.balance import reference_size, updated_examples
from trainer.routers.classifier import ClassifierSettings
from trainer.routers.features import FeatureExample
from trainer.routers.overlap import claimed

ABSTRACTS = ["protein", "cells", "mice", "expression", "gene", "receptor", "cohort", "assay",
             "tumour", "plasma", "induced", "significantly"]
LEAFLETS = ["tablet", "dose", "patient", "leaflet", "doctor", "pharmacist", "take", "daily",
            "side", "effects", "pregnant", "capsule"]
LAWS = ["council", "regulation", "member", "states", "directive", "commission", "article",
        "annex", "adopted", "provisions", "treaty", "shall"]
FAST = ClassifierSettings(epoch=5, quantize=False)
FEATURES = HashedFeatures()


def sentences(words: list[str], count: int, seed: int) -> list[Features]:
    rng = random.Random(seed)
    return [FEATURES.of(" ".join(rng.choice(words) for _ in range(8)) + f" {seed}x{i}")
            for i in range(count)]


def bags(*texts: str) -> list[Features]:
    return [FEATURES.of(text) for text in texts]


def test_the_new_class_is_repeated_to_the_median_domain_class() -> None:
    stored: list[FeatureExample] = [("law", FEATURES.of(f"l{i}")) for i in range(10)] + [
        ("it", FEATURES.of(f"i{i}")) for i in range(6)] + [
        ("medical", FEATURES.of(f"m{i}")) for i in range(4)] + [
        ("generic", FEATURES.of(f"g{i}")) for i in range(50)]  # generic: no domain, not counted
    assert reference_size(stored, "median") == 6
    assert reference_size(stored, "largest") == 10
    assert reference_size(stored, "none") == 0
    examples = updated_examples(stored, "bio", bags("a", "b", "a", " ", "c", "d"), max_lines=3,
                                balance="median")
    bio = [bag for label, bag in examples if label == "bio"]
    # distinct, capped, then repeated in order (the blank line has no features)
    assert bio == bags("a", "b", "c", "a", "b", "c")
    assert examples[: len(stored)] == stored
    as_is = updated_examples(stored, "bio", bags("a", "b"), max_lines=3, balance="none")
    assert Counter(label for label, _ in as_is)["bio"] == 2


def test_a_refreshed_domain_replaces_its_old_examples() -> None:
    stored = [("law", FEATURES.of("x")), ("bio", FEATURES.of("old")),
              ("bio", FEATURES.of("older"))]
    examples = updated_examples(stored, "bio", bags("new"), max_lines=10, balance="largest")
    assert examples == [("law", FEATURES.of("x")), ("bio", FEATURES.of("new"))]


def test_stored_examples_of_the_new_domains_kind_are_claimed() -> None:
    """Medical holds some abstracts: a biomedical domain claims (most of) them, and no
    leaflet or law line."""
    abstracts_in_medical = sentences(ABSTRACTS, 40, seed=1)
    others: list[FeatureExample] = [("medical", s) for s in sentences(LEAFLETS, 300, seed=2)]
    others += [("medical", s) for s in abstracts_in_medical]
    others += [("law", s) for s in sentences(LAWS, 300, seed=3)]
    new_lines = sentences(ABSTRACTS, 200, seed=4)
    found = claimed(others, new_lines, settings=FAST)
    texts = {others[i][1] for i in found}
    assert len(texts & set(abstracts_in_medical)) >= 30
    assert len(texts - set(abstracts_in_medical)) <= 3
    examples = updated_examples(others, "biomedical", new_lines, max_lines=5000,
                                balance="none", claim=FAST)
    moved = [text for label, text in examples if label == "biomedical"]
    assert set(moved) == set(new_lines) | texts
    assert not {text for label, text in examples if label == "medical"} & texts


def test_a_domain_of_the_same_text_as_a_class_leaves_that_class_whole() -> None:
    """Two domains added from one corpus: the second claims no example of the first, or the
    first would vanish from the router."""
    religion = sentences(ABSTRACTS, 200, seed=5)
    others: list[FeatureExample] = [("religion", s) for s in religion]
    others += [("law", s) for s in sentences(LAWS, 300, seed=3)]
    assert claimed(others, sentences(ABSTRACTS, 200, seed=6), settings=FAST) == set()
    examples = updated_examples(others, "scripture", sentences(ABSTRACTS, 200, seed=6),
                                max_lines=5000, balance="median", claim=FAST)
    assert [text for label, text in examples if label == "religion"] == religion
