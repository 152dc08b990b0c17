"""A published refresh also retrains the router with the corrected sources (issue #49).

A correction is stored for the domain the corrector chose (server/corrections/desk.py),
whatever the original answer was routed to (another domain, an ensemble, nobody): the
source belongs to that domain, so the router should send it, and text like it, there.

The new classifier is trained on the active one's stored examples (hashed features,
`features.npz.xz`) with the refresh's training corrections' sources, hashed the same way,
added to the domain's class; a stored example of the same text (the same features, once
the source's are cut to the features the store knows) under another label is relabelled
(the corrector said where it belongs). No claim of neighbouring examples and no
rebalancing: the class already had its fair share when the domain was added
(trainer/routers/balance.py), and a few hundred sentences move it little. The held-back
corrections' sources are not trained on: the share of them routed to the domain, before
and after, is the router's own check, with the domain's dev sources.

Gated like a new domain's router: only a refresh whose module passed its gate retrains
the router, and the module and the classifier are activated in ONE registry transaction
(trainer/jobs/pipeline.py does the same for a new domain). A classifier changed meanwhile by
another publisher is retrained on top of it; without an active classifier with examples
the module is published alone, with a note.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contract.artifacts import CLASSIFIER_FEATURES_FILE, CLASSIFIER_MODEL_FILE
from model_store import ArtifactKind, ConflictError, Manifest, Store
from server.routing.classifier import config_temperature
from server.routing.features import Features, HashedFeatures
from trainer.jobs.domain_job import JobFailed
from trainer.jobs.pipeline import FLIP_ATTEMPTS, job_artifact
from trainer.routers.classifier import accuracy, train_classifier
from trainer.routers.features import FeatureExample, features_to_bytes, projected, pruned_new
from trainer.routers.settings import RouterSettings
from trainer.routers.tenant_router import tenant_router_name
from trainer.routers.update import active_router

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RouterCheck:
    """Top-1 share routed to the refreshed domain, by the active router and the new one."""

    dev_before: float
    dev_after: float
    held_before: float
    held_after: float

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.__dict__.items()}


def corrected_examples(stored: Sequence[FeatureExample], domain: str,
                       sources: Sequence[Features]) -> list[FeatureExample]:
    """`stored` with `sources` (as features) in `domain`'s class: a stored example of the
    same source under another label is relabelled, and a source the class already holds
    is not added twice. A stored example holds only the features that were frequent
    enough to keep, so a source is matched by its features cut to those the store knows."""
    known = {number for _, bag in stored for number in bag}
    matched = {projected(bag, known) for bag in sources if bag}
    kept = [(label, bag) for label, bag in stored if label == domain or bag not in matched]
    present = {bag for label, bag in kept if label == domain}
    added = [(domain, bag) for bag in dict.fromkeys(sources)
             if bag and bag not in present and projected(bag, known) not in present]
    return kept + added


def _share(model: bytes, domain: str, sources: Sequence[str],
           features: HashedFeatures | None) -> float:
    if not sources:
        return 0.0
    return accuracy(model, [(domain, s) for s in sources], features).overall


def retrain_router(store: Store, domain: str, *, train_sources: Sequence[str],
                   held_sources: Sequence[str], dev_sources: Sequence[str],
                   settings: RouterSettings, backbone: str, job_id: str, fingerprint: str
                   ) -> tuple[Manifest, int, RouterCheck] | str:
    """(the published, inactive classifier, the active version it replaces, its check),
    or a note saying why the router is left alone."""
    active = active_router(store, settings, backbone)
    if isinstance(active, str):
        return f"{active}: the router was not retrained"
    loaded, features = active.loaded, active.features
    base = loaded.manifest.version
    mine = job_artifact(store, "classifier", settings.name, job_id, backbone)
    if mine is not None and mine.provenance.get("based_on") == base:
        return mine, base, RouterCheck(**mine.scores["router_check"])
    sources = pruned_new([features.of(s) for s in train_sources], active.examples,
                         settings.min_examples)
    examples = corrected_examples(active.examples, domain, sources)
    log.info("router: retraining on %d examples with %d corrected sources of %r",
             len(examples), len(train_sources), domain)
    model = train_classifier(examples, settings.classifier_settings())
    before = loaded.files[CLASSIFIER_MODEL_FILE]
    # the base reads text when it is an older classifier
    reads = HashedFeatures.from_config(loaded.manifest.config)
    check = RouterCheck(_share(before, domain, dev_sources, reads),
                        _share(model, domain, dev_sources, features),
                        _share(before, domain, held_sources, reads),
                        _share(model, domain, held_sources, features))
    manifest = store.publish(
        "classifier", settings.name,
        {CLASSIFIER_MODEL_FILE: model, CLASSIFIER_FEATURES_FILE: features_to_bytes(examples)},
        config={"labels": sorted({label for label, _ in examples}),
                "temperature": config_temperature(loaded.manifest.config),
                "features": features.as_config()},
        backbone_fingerprint=fingerprint, backbone=backbone,
        provenance={"job": job_id, "based_on": base, "refreshed_domain": domain,
                    "corrected_sources": len(train_sources), "examples": len(examples),
                    "recipe": "corrections refresh"},
        scores={"router_check": check.as_dict()})
    return manifest, base, check


def activate_refresh(store: Store, domain: str, module: Manifest, *, base_version: int,
                     backbone: str, router: dict[str, Any], job_id: str, fingerprint: str,
                     settings: RouterSettings) -> dict[str, Any]:
    """Activate the refreshed module in place of `base_version`, with its retrained router
    in the same transaction; `router`: retrain_router's keyword arguments of sources.
    Returns the job result's router part. A tenant's domain retrains its tenant's router
    (trainer/routers/tenant_router.py), never the shared one."""
    tenant = store.registry.resource_owner("domain", domain)
    if tenant is not None:
        settings = settings.model_copy(
            update={"name": tenant_router_name(tenant, settings.name)})
    for _attempt in range(FLIP_ATTEMPTS):
        if store.registry.get_active("module", domain, backbone=backbone) == module.version:
            return {"note": "activated by an earlier attempt"}
        retrained = retrain_router(store, domain, settings=settings, backbone=backbone,
                                   job_id=job_id, fingerprint=fingerprint, **router)
        versions: list[tuple[ArtifactKind, str, int]] = [("module", domain, module.version)]
        expect: dict[tuple[ArtifactKind, str], int | None] = {("module", domain): base_version}
        if not isinstance(retrained, str):
            classifier, based_on, _ = retrained
            versions.append(("classifier", settings.name, classifier.version))
            expect[("classifier", settings.name)] = based_on
        try:
            store.registry.set_active_many(versions, expect=expect, backbone=backbone)
        except ConflictError as error:
            if store.registry.get_active("module", domain, backbone=backbone) != base_version:
                raise JobFailed(f"the served module changed during the refresh ({error}); "
                                f"{module.label} stays inactive") from None
            log.warning("router changed meanwhile (%s); retraining it again", error)
            continue
        if isinstance(retrained, str):
            log.warning("%s", retrained)
            return {"note": retrained}
        classifier, _, check = retrained
        log.info("activated %s and %s", module.label, classifier.label)
        return {"classifier_version": classifier.version, "check": check.as_dict()}
    raise JobFailed(f"the router kept changing during {FLIP_ATTEMPTS} publication attempts")
