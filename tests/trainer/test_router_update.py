"""A domain added to a router that keeps features (trainer/routers/update.py): the stored
examples are retrained on as they are, the new domain's sentences are hashed and cut the
same way, and the new artifact holds no text. An older router that kept text is retrained
into one that keeps features."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

from contract.artifacts import (
    CLASSIFIER_EXAMPLES_FILE,
    CLASSIFIER_FEATURES_FILE,
    CLASSIFIER_MODEL_FILE,
)
from model_store import Store
from server.routing.features import HashedFeatures
from tests.server.fasttext_tiny import classifier_bytes
from tests.trainer.sidecar_store import (
    NEW_DOMAIN,
    WORDS,
    build_store,
    new_domain_pairs,
    router_texts,
)
from trainer.routers.classifier import accuracy
from trainer.routers.features import features_from_bytes
from trainer.routers.settings import RouterSettings
from trainer.routers.update import router_update

SETTINGS = RouterSettings(bucket=20_000, dim=16, min_examples=3, quantize=False)


def test_the_stored_examples_are_kept_and_the_new_ones_cut_like_them(tmp_path: Path) -> None:
    with Store.open(build_store(tmp_path / "store"), builtin_dir=None) as store:
        before = features_from_bytes(store.load("classifier", "router").files[
            CLASSIFIER_FEATURES_FILE])
        pairs = new_domain_pairs()
        update = router_update(store, NEW_DOMAIN, (pairs, pairs[:10]), settings=SETTINGS)
    assert not isinstance(update, str), update
    assert set(update.files) == {CLASSIFIER_MODEL_FILE, CLASSIFIER_FEATURES_FILE}
    examples = features_from_bytes(update.files[CLASSIFIER_FEATURES_FILE])
    assert examples[:len(before)] == before  # the stored examples, as they were
    added = examples[len(before):]
    assert {label for label, _ in added} == {NEW_DOMAIN}
    seen = Counter(n for _, bag in before for n in set(bag))
    seen.update(n for bag in {HashedFeatures(2, SETTINGS.bucket).of(s) for s, _ in pairs}
                for n in set(bag))
    assert all(seen[n] >= SETTINGS.min_examples for _, bag in added for n in bag)
    assert update.config()["features"] == update.features.as_config()
    assert update.dev_accuracy >= 0.9


def test_an_older_router_that_kept_text_is_retrained_into_features(tmp_path: Path) -> None:
    """Its text examples are hashed with the settings' features; its successor keeps those
    and reads them."""
    root = build_store(tmp_path / "store", router=False)
    with Store.open(root, builtin_dir=None) as store:
        fingerprint = store.load_backbone().manifest.backbone_fingerprint
        text = "".join(f"{label}\t{sentence}\n" for label, sentence in router_texts())
        old = store.publish(
            "classifier", "router",
            {CLASSIFIER_MODEL_FILE: classifier_bytes(WORDS),
             CLASSIFIER_EXAMPLES_FILE: gzip.compress(text.encode())},
            config={"labels": sorted(WORDS), "temperature": 1.5},
            backbone_fingerprint=fingerprint)
        store.activate("classifier", "router", old.version)
        pairs = new_domain_pairs()
        update = router_update(store, NEW_DOMAIN, (pairs, pairs[:10]), settings=SETTINGS)
    assert not isinstance(update, str), update
    assert CLASSIFIER_EXAMPLES_FILE not in update.files
    assert update.features == SETTINGS.classifier_settings().features()
    assert update.temperature == 1.5 and update.labels == sorted([*WORDS, NEW_DOMAIN])
    examples = features_from_bytes(update.files[CLASSIFIER_FEATURES_FILE])
    assert Counter(label for label, _ in examples)["law"] == 30
    law = [("law", s) for d, s in router_texts() if d == "law"]
    assert accuracy(update.files[CLASSIFIER_MODEL_FILE], law, update.features).overall >= 0.9
