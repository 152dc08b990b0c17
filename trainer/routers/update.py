"""Teach the router (the fastText domain classifier) a new domain.

The active classifier artifact carries the examples it was trained on as hashed features
(`features.npz.xz`, no text: trainer/routers/features.py). The new classifier is trained
on those examples (minus any old ones of the same label) plus source sentences of the new
domain hashed the same way (the base's `config.features`), given their fair share
(trainer/routers/balance.py: the stored examples that look like the new domain move to
it, and its class is repeated to the other classes' size), and published as the next
version of the same classifier name with `config = {"labels": [...], "temperature": T,
"features": {...}}` (as trainer/recipes/router_stage.py publishes the default router).
The temperature is the base classifier's: the job has dev text of the new domain only,
and a temperature fitted on one class would only sharpen (see
server/routing/classifier.py). An older classifier that carries its examples as
text (`examples.tsv.gz`) is retrained from them hashed with the settings' features, and
its successor keeps features only. A direction without a router of its own that routes
with the router of a direction of the same source language (server/routing/shared_router.py)
gets its first router of its own, trained on that router's examples plus the new domain:
from then on it routes with its own (which always wins). Without any active classifier, or
one without examples, the router is left alone and the job records a note: the new domain
is then reachable by name only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contract.artifacts import (
    CLASSIFIER_EXAMPLES_FILE,
    CLASSIFIER_FEATURES_FILE,
    CLASSIFIER_MODEL_FILE,
)
from contract.tsv import Pair
from model_store import LoadedArtifact, Manifest, Store
from server.routing.classifier import config_temperature
from server.routing.features import HashedFeatures
from server.routing.shared_router import SharedRouter, shared_router, source_language
from trainer.routers.balance import updated_examples
from trainer.routers.classifier import accuracy, examples_from_bytes, train_classifier
from trainer.routers.features import (
    FeatureExample,
    features_from_bytes,
    features_to_bytes,
    featurize,
    pruned,
    pruned_new,
)
from trainer.routers.settings import RouterSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RouterUpdate:
    base_version: int | None  # the active version it replaces (None: the first of its name)
    files: dict[str, bytes]
    labels: list[str]
    examples: int
    dev_accuracy: float  # on the new domain's dev sources
    temperature: float  # carried over from the base classifier
    features: HashedFeatures  # the base classifier's

    def config(self) -> dict[str, Any]:
        return {"labels": self.labels, "temperature": self.temperature,
                "features": self.features.as_config()}


@dataclass(frozen=True)
class ActiveRouter:
    """The active classifier, the examples it was trained on and the features they are."""

    loaded: LoadedArtifact
    examples: list[FeatureExample]
    features: HashedFeatures


def active_router(store: Store, settings: RouterSettings, backbone: str | None
                  ) -> ActiveRouter | str:
    """The active classifier `settings.name` of `backbone` with its examples, or why a
    retraining has nothing to start from. An older classifier's text examples are hashed
    with the settings' features."""
    name = settings.name
    base = store.registry.get_active("classifier", name, backbone=backbone)
    if base is None:
        return f"no active classifier {name!r}"
    loaded = store.load("classifier", name, base, backbone=backbone)
    features = HashedFeatures.from_config(loaded.manifest.config)
    if features is not None and CLASSIFIER_FEATURES_FILE in loaded.files:
        return ActiveRouter(loaded, features_from_bytes(loaded.files[CLASSIFIER_FEATURES_FILE]),
                            features)
    if features is None and CLASSIFIER_EXAMPLES_FILE in loaded.files:
        features = settings.classifier_settings().features()
        texts = examples_from_bytes(loaded.files[CLASSIFIER_EXAMPLES_FILE])
        return ActiveRouter(loaded, pruned(featurize(texts, features), settings.min_examples),
                            features)
    return (f"the active classifier {loaded.manifest.label} carries no "
            f"{CLASSIFIER_FEATURES_FILE}")


def router_update(store: Store, domain: str, data: tuple[Sequence[Pair], Sequence[Pair]], *,
                  settings: RouterSettings, backbone: str | None = None) -> RouterUpdate | str:
    """A retrained classifier of `backbone` (default: the default backbone) that knows
    `domain`, or a note saying why there is none."""
    active = active_router(store, settings, backbone)
    base_version = None if isinstance(active, str) else active.loaded.manifest.version
    if isinstance(active, str) and backbone is not None:
        shared = _shared(store, settings.name, backbone)
        if isinstance(shared, SharedRouter):  # its first own router starts from that one
            log.info("router: %s has none of its own; starting from %s's v%d", backbone,
                     shared.backbone, shared.version)
            active = active_router(store, settings, shared.backbone)
    if isinstance(active, str):
        return f"{active}: the router was not updated; requests reach {domain!r} by name only"
    return retrained(active.examples, active, domain, data, settings=settings,
                     base_version=base_version)


def _shared(store: Store, name: str, backbone: str) -> SharedRouter | str:
    """The router the server shares with `backbone` (the same source language), if any."""
    default = store.registry.default_backbone()
    return shared_router(store, name, backbone=backbone,
                         source=source_language(store, backbone),
                         served=sorted(store.active_backbones(), key=lambda b: (b != default, b)),
                         domains=store.active_domains(backbone))


def retrained(base: list[FeatureExample], active: ActiveRouter, domain: str,
              data: tuple[Sequence[Pair], Sequence[Pair]], *, settings: RouterSettings,
              base_version: int | None) -> RouterUpdate:
    """A classifier trained on `base` plus `domain`'s sources, hashed with `active`'s
    features and carrying its temperature; `base_version`: the active version of the
    classifier it replaces (None: the first of its name)."""
    features = active.features
    train_pairs, dev_pairs = data
    sources = pruned_new([features.of(source) for source, _ in train_pairs], base,
                         settings.min_examples)
    examples = updated_examples(base, domain, sources,
                                max_lines=settings.max_examples_per_domain,
                                balance=settings.balance,
                                claim=settings.classifier_settings()
                                if settings.claim_overlap else None)
    log.info("router: retraining on %d examples (%d of %r)", len(examples),
             sum(label == domain for label, _ in examples), domain)
    model = train_classifier(examples, settings.classifier_settings())
    dev_accuracy = accuracy(model, [(domain, source) for source, _ in dev_pairs],
                            features).overall
    files = {CLASSIFIER_MODEL_FILE: model, CLASSIFIER_FEATURES_FILE: features_to_bytes(examples)}
    labels = sorted({label for label, _ in examples})
    temperature = config_temperature(active.loaded.manifest.config)
    return RouterUpdate(base_version, files, labels, len(examples), dev_accuracy,
                        temperature, features)


def publish_router(store: Store, update: RouterUpdate, *, name: str, job_id: str,
                   domain: str, fingerprint: str, backbone: str | None = None) -> Manifest:
    """Publish the retrained classifier (inactive; the caller flips it with the module)."""
    return store.publish(
        "classifier", name, update.files,
        config=update.config(),
        backbone_fingerprint=fingerprint, backbone=backbone,
        provenance={"job": job_id, "based_on": update.base_version, "added_domain": domain,
                    "examples": update.examples, "recipe": "trainer sidecar"},
        scores={"dev_accuracy": {domain: round(update.dev_accuracy, 4)}})
