"""The router a runtime serves, loaded when the registry's choice changes: the direction's
own (the active classifier `routing.classifier` of its backbone), or, without one, the
router of a served direction of the same source language
(server/routing/shared_router.py). A version that fails to load is recorded with its
backoff (server/serving/load_failures.py) and the router loaded before keeps routing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial

from model_store import Store
from server.core.metrics import Metrics
from server.routing.classifier import Classifier, RouterOrigin, load_classifier
from server.routing.shared_router import SharedRouter, shared_router
from server.serving.load_failures import FailureBook, describe

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RouterChoice:
    classifier: Classifier | None
    note: str = ""  # without a classifier: why (no router of its own, none to share)


class RouterLoader:
    def __init__(self, store: Store, name: str, *, served: Sequence[str],
                 failed: FailureBook, metrics: Metrics) -> None:
        self.store = store
        self.name = name
        self.served = list(served)  # the server's backbones, the default first
        self.failed = failed  # the runtime's book: retries follow its backoff
        self.metrics = metrics

    async def refresh(self, current: Classifier | None, *, backbone: str | None,
                      source: str | None, domains: Collection[str],
                      failures: dict[str, str], wanted: set[tuple[str, int]]) -> RouterChoice:
        """The router to serve now (`current`: the one served so far). A failure goes to
        `failures["classifier"]`; the key of the version wanted, to `wanted`."""
        name = self.name
        registry = self.store.registry
        version = await asyncio.to_thread(
            partial(registry.get_active, "classifier", name, backbone=backbone))
        if version is not None:
            origin = RouterOrigin(backbone or "", name, version)
            key = (f"classifier:{name}", version)
        else:
            found = await asyncio.to_thread(self._shared, backbone, source, domains)
            if isinstance(found, str):
                return RouterChoice(None, found)
            origin = RouterOrigin(found.backbone, name, found.version, shared=True)
            key = (f"classifier:{found.backbone}/{name}", found.version)
        if current is not None and current.origin == origin:
            return RouterChoice(current)
        wanted.add(key)
        failure = self.failed.waiting(key)
        if failure is None:
            try:
                classifier = await asyncio.to_thread(self._load, origin)
                self.failed.clear(key)
                return RouterChoice(classifier)
            except Exception as error:  # automatic routing falls back; the server stays up
                failure = self.failed.record(key, f"version {origin.version}"
                                             f"{_of(origin)}: {describe(error)}")
                self.metrics.load_failures.labels(kind="classifier").inc()
                log.error("classifier %s v%d%s failed to load: %s", name, origin.version,
                          _of(origin), error)
        failures["classifier"] = failure.problem
        return RouterChoice(current)

    def _shared(self, backbone: str | None, source: str | None,
                domains: Collection[str]) -> SharedRouter | str:
        if backbone is None or len(self.served) < 2:
            return ""  # one direction: nothing to share (readiness says as before)
        return shared_router(self.store, self.name, backbone=backbone, source=source,
                             served=self.served, domains=domains)

    def _load(self, origin: RouterOrigin) -> Classifier:
        loaded = self.store.load("classifier", origin.name, origin.version,
                                 backbone=origin.backbone or None)
        return load_classifier(loaded.files, loaded.manifest.config, version=origin.version,
                               origin=origin)


def _of(origin: RouterOrigin) -> str:
    return f" of {origin.backbone} (shared)" if origin.shared else ""
