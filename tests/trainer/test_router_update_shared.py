"""A domain added to a direction that has no router of its own and routes with the router
of a direction of the same source language (server/routing/shared_router.py): the sidecar
trains the direction's first own router on that router's examples plus the new domain,
and leaves the shared router as it was; a direction of another source language gets none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contract.artifacts import CLASSIFIER_FEATURES_FILE
from model_store import Store
from server.engine.artifacts import module_files
from tests.tiny import random_module, tiny_backbone_files, tiny_config
from tests.trainer.sidecar_store import (
    NEW_DOMAIN,
    WORDS,
    classifier_settings,
    new_domain_pairs,
    router_texts,
)
from trainer.routers.classifier import train_classifier
from trainer.routers.features import features_from_bytes, features_to_bytes, featurize, pruned
from trainer.routers.settings import RouterSettings
from trainer.routers.update import router_update

SETTINGS = RouterSettings(bucket=20_000, dim=16, min_examples=3, quantize=False)
EN_FR, EN_DE, DE_EN = "tiny-en-fr", "tiny-en-de", "tiny-de-en"


def three_backbones(root: Path) -> Path:
    """en->fr with the domains of WORDS and a router; en->de and de->en with the same
    domains and no router."""
    with Store.open(root, builtin_dir=None) as store:
        for seed, name in enumerate((EN_FR, EN_DE, DE_EN)):
            files = tiny_backbone_files(seed=seed)
            backbone = store.publish("backbone", name, files,
                                     config=json.loads(files["config.json"]))
            store.activate("backbone", name, backbone.version)
            for index, domain in enumerate(WORDS, start=1):
                config, params = random_module(tiny_config(), "adapter", seed=index,
                                               bottleneck=4)
                module = store.publish("module", domain, module_files(params), config=config,
                                       backbone_fingerprint=backbone.backbone_fingerprint)
                store.activate("module", domain, module.version, backbone=name)
            if name != EN_FR:
                continue
            settings = classifier_settings()
            data = pruned(featurize(router_texts(), settings.features()), settings.min_examples)
            router_config: dict[str, Any] = {"labels": sorted(WORDS), "temperature": 1.5,
                                             "features": settings.features().as_config()}
            router = store.publish(
                "classifier", "router", {"classifier.bin": train_classifier(data, settings),
                                         CLASSIFIER_FEATURES_FILE: features_to_bytes(data)},
                config=router_config, backbone_fingerprint=backbone.backbone_fingerprint,
                backbone=name)
            store.activate("classifier", "router", router.version, backbone=name)
    return root


def test_the_first_own_router_starts_from_the_shared_one(tmp_path: Path) -> None:
    pairs = new_domain_pairs()
    with Store.open(three_backbones(tmp_path / "store"), builtin_dir=None) as store:
        shared = features_from_bytes(store.load("classifier", "router", backbone=EN_FR).files[
            CLASSIFIER_FEATURES_FILE])
        update = router_update(store, NEW_DOMAIN, (pairs, pairs[:10]), settings=SETTINGS,
                               backbone=EN_DE)
        german_english = router_update(store, NEW_DOMAIN, (pairs, pairs[:10]),
                                       settings=SETTINGS, backbone=DE_EN)
        unchanged = store.registry.get_active("classifier", "router", backbone=EN_FR)

    assert not isinstance(update, str), update
    assert update.base_version is None  # en->de's first router of its own
    assert update.labels == sorted([*WORDS, NEW_DOMAIN])
    assert update.temperature == 1.5  # the shared router's
    examples = features_from_bytes(update.files[CLASSIFIER_FEATURES_FILE])
    assert examples[:len(shared)] == shared
    assert unchanged == 1
    assert isinstance(german_english, str) and "by name only" in german_english
