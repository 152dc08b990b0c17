"""Teach the router (the fastText domain classifier) a new domain.

The active classifier artifact carries the examples it was trained on
(`examples.tsv.gz`: label TAB source text). The new classifier is trained on those
examples (minus any old ones of the same label) plus source sentences of the new domain,
given their fair share (trainer/routers/balance.py: the stored examples that look like the
new domain move to it, and its class is repeated to the other classes' size), and
published as the next version of the same classifier name with
`config = {"labels": [...], "temperature": T}` (as trainer/recipes/router_stage.py
publishes the default router). The temperature is the base classifier's: the job has dev
text of the new domain only, and a temperature fitted on one class would only sharpen
(see server/routing/classifier.py). Without an active classifier, or one without
examples, the router is left alone and the job records a note: the new domain is then
reachable by name only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from contract.artifacts import CLASSIFIER_EXAMPLES_FILE, CLASSIFIER_MODEL_FILE
from contract.tsv import Pair
from model_store import LoadedArtifact, Manifest, Store
from server.routing.classifier import config_temperature
from trainer.routers.balance import updated_examples
from trainer.routers.classifier import (
    Example,
    accuracy,
    examples_from_bytes,
    examples_to_bytes,
    train_classifier,
)
from trainer.routers.settings import RouterSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RouterUpdate:
    base_version: int  # the active classifier version the update extends
    files: dict[str, bytes]
    labels: list[str]
    examples: int
    dev_accuracy: float  # on the new domain's dev sources
    temperature: float  # carried over from the base classifier


def active_router(store: Store, name: str, backbone: str | None
                  ) -> tuple[LoadedArtifact, list[Example]] | str:
    """The active classifier `name` of `backbone` and the examples it was trained on, or
    why a retraining has nothing to start from."""
    base = store.registry.get_active("classifier", name, backbone=backbone)
    if base is None:
        return f"no active classifier {name!r}"
    loaded = store.load("classifier", name, base, backbone=backbone)
    if CLASSIFIER_EXAMPLES_FILE not in loaded.files:
        return (f"the active classifier {loaded.manifest.label} carries no "
                f"{CLASSIFIER_EXAMPLES_FILE}")
    return loaded, examples_from_bytes(loaded.files[CLASSIFIER_EXAMPLES_FILE])


def router_update(store: Store, domain: str, data: tuple[Sequence[Pair], Sequence[Pair]], *,
                  settings: RouterSettings, backbone: str | None = None) -> RouterUpdate | str:
    """A retrained classifier of `backbone` (default: the default backbone) that knows
    `domain`, or a note saying why there is none."""
    active = active_router(store, settings.name, backbone)
    if isinstance(active, str):
        return f"{active}: the router was not updated; requests reach {domain!r} by name only"
    loaded, stored = active
    base = loaded.manifest.version
    train_pairs, dev_pairs = data
    examples = updated_examples(stored, domain, [source for source, _ in train_pairs],
                                max_lines=settings.max_examples_per_domain,
                                balance=settings.balance,
                                claim=settings.classifier_settings()
                                if settings.claim_overlap else None)
    log.info("router: retraining on %d examples (%d of %r)", len(examples),
             sum(label == domain for label, _ in examples), domain)
    model = train_classifier(examples, settings.classifier_settings())
    dev_accuracy = accuracy(model, [(domain, source) for source, _ in dev_pairs]).overall
    files = {CLASSIFIER_MODEL_FILE: model, CLASSIFIER_EXAMPLES_FILE: examples_to_bytes(examples)}
    labels = sorted({label for label, _ in examples})
    temperature = config_temperature(loaded.manifest.config)
    return RouterUpdate(base, files, labels, len(examples), dev_accuracy, temperature)


def publish_router(store: Store, update: RouterUpdate, *, name: str, job_id: str,
                   domain: str, fingerprint: str, backbone: str | None = None) -> Manifest:
    """Publish the retrained classifier (inactive; the caller flips it with the module)."""
    return store.publish(
        "classifier", name, update.files,
        config={"labels": update.labels, "temperature": update.temperature},
        backbone_fingerprint=fingerprint, backbone=backbone,
        provenance={"job": job_id, "based_on": update.base_version, "added_domain": domain,
                    "examples": update.examples, "recipe": "trainer sidecar"},
        scores={"dev_accuracy": {domain: round(update.dev_accuracy, 4)}})
