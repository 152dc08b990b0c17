"""What the built-in routers ship: a fastText model over hashed feature numbers and the
examples it learnt from as those numbers (for the sidecar's retraining), never the text of
the corpora (TED and QED are CC BY-NC-ND, OpenSubtitles research use only; the model
cards say so in "Data and licences")."""

from __future__ import annotations

import io
import json
import lzma
import re
import tempfile
from collections import Counter
from pathlib import Path

import fasttext
import numpy as np
import pytest

from contract.artifacts import (
    CLASSIFIER_FEATURES_FILE,
    CLASSIFIER_MODEL_FILE,
    MANIFEST_FILE,
)
from server.routing.classifier import LABEL_PREFIX, XZ_MAGIC, fasttext_model, load_classifier
from server.routing.features import HashedFeatures
from trainer.routers.features import features_from_bytes
from trainer.routers.settings import RouterSettings

ROOT = Path(__file__).resolve().parents[1]
ROUTERS = sorted(p.parent for p in (ROOT / "model_store" / "builtin").glob(
    f"**/classifiers/*/v*/{MANIFEST_FILE}"))
# one sentence per class the router of each source language must recognise
CLEAR = {"en": {"medical": "Take one tablet twice a day with food and tell your doctor.",
                "law": "Member States shall bring into force the provisions necessary to "
                       "comply with this Directive.",
                "it": "Click the button to open the file in a new window.",
                "religion": "And the Lord said unto Moses, speak unto the children of Israel."},
         "fr": {"medical": "Prenez un comprimé deux fois par jour et parlez-en à votre médecin.",
                "law": "Les États membres mettent en vigueur les dispositions nécessaires "
                       "pour se conformer à la présente directive.",
                "it": "Cliquez sur le bouton pour ouvrir le fichier dans une nouvelle fenêtre.",
                "religion": "Et l'Éternel parla à Moïse, et dit : Parle aux enfants d'Israël."}}


def manifest(router: Path) -> dict[str, object]:
    return json.loads((router / MANIFEST_FILE).read_text())  # type: ignore[no-any-return]


def features_of(router: Path) -> HashedFeatures:
    config = manifest(router)["config"]
    assert isinstance(config, dict)
    found = HashedFeatures.from_config(config)
    assert found is not None, f"{router}: its config names no features"
    return found


def test_both_directions_ship_a_router() -> None:
    assert len(ROUTERS) == 2, ROUTERS


@pytest.mark.parametrize("router", ROUTERS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_router_ships_its_model_and_its_features_and_no_text_file(router: Path) -> None:
    listed = manifest(router)["files"]
    assert isinstance(listed, dict)
    assert set(listed) == {CLASSIFIER_MODEL_FILE, CLASSIFIER_FEATURES_FILE}
    assert sorted(p.name for p in router.iterdir()) == sorted(
        [CLASSIFIER_MODEL_FILE, CLASSIFIER_FEATURES_FILE, MANIFEST_FILE])


@pytest.mark.parametrize("router", ROUTERS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_shipped_features_are_numbers_that_several_sentences_share(router: Path) -> None:
    data = (router / CLASSIFIER_FEATURES_FILE).read_bytes()
    config = manifest(router)["config"]
    assert isinstance(config, dict)
    # arrays of unsigned numbers, and the class names: no text in it
    with np.load(io.BytesIO(lzma.decompress(data)), allow_pickle=False) as archive:
        assert sorted(archive.files) == ["index", "label", "labels", "length", "vocabulary"]
        assert list(archive["labels"]) == config["labels"]
        assert {archive[name].dtype.kind for name in archive.files if name != "labels"} == {"u"}
    examples = features_from_bytes(data)
    assert {label for label, _ in examples} == set(config["labels"])
    assert len(examples) > 30_000 and all(examples)
    # every number is in at least min_examples of the sentences: no sentence's own word
    seen = Counter(n for _, bag in examples for n in set(bag))
    assert min(seen.values()) >= RouterSettings().min_examples
    assert max(seen) < features_of(router).buckets


@pytest.mark.parametrize("router", ROUTERS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_shipped_model_knows_numbers_not_words(router: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CLASSIFIER_MODEL_FILE
        stored = (router / CLASSIFIER_MODEL_FILE).read_bytes()
        assert stored.startswith(XZ_MAGIC)  # shipped compressed
        path.write_bytes(fasttext_model(stored))
        model = fasttext.load_model(str(path))
    entries = model.get_words()
    assert len(entries) > 10_000
    assert all(re.fullmatch("[0-9a-f]+", entry) for entry in entries if entry != "</s>")
    config = manifest(router)["config"]
    assert isinstance(config, dict)
    assert sorted(model.get_labels()) == [LABEL_PREFIX + label for label in config["labels"]]


@pytest.mark.parametrize("router", ROUTERS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_shipped_router_routes_clear_sentences_to_their_domain(router: Path) -> None:
    config = manifest(router)["config"]
    assert isinstance(config, dict)
    classifier = load_classifier(
        {CLASSIFIER_MODEL_FILE: (router / CLASSIFIER_MODEL_FILE).read_bytes()}, config,
        version=1)
    language = "fr" if "default-fr-en" in router.parts else "en"
    for domain, text in CLEAR[language].items():
        found = classifier.posteriors(text)
        assert max(found, key=found.__getitem__) == domain, (text, found)
