"""The tenants' routers a runtime serves: for each tenant whose domain the sidecar added,
its own classifier (`<tenant>-<router name>`, trained over its domains and the shared
ones: trainer/routers/tenant_router.py), loaded when its active version changes. A
tenant without one is routed by the shared router, restricted to what it sees
(server/serving/tenant_view.py)."""

from __future__ import annotations

import logging

from model_store import Store
from server.routing.classifier import Classifier, RouterOrigin, load_classifier

log = logging.getLogger(__name__)


class TenantRouters:
    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.name = name  # the shared router's name
        self.loaded: dict[str, Classifier] = {}  # tenant -> its router

    def refresh(self, backbone: str | None) -> dict[str, Classifier]:
        """Every tenant's active router of `backbone` (blocking: reads the registry and
        the store). One that fails to load keeps the version loaded before, if any."""
        registry = self.store.registry
        active = registry.active_versions("classifier", backbone=backbone)
        tenants = set(registry.list_tenants()) if len(active) > 1 else set()
        routers: dict[str, Classifier] = {}
        for name, version in active.items():
            tenant, dash, rest = name.partition("-")
            if not dash or rest != self.name or tenant not in tenants:
                continue
            current = self.loaded.get(tenant)
            if current is not None and current.version == version:
                routers[tenant] = current
                continue
            try:
                loaded = self.store.load("classifier", name, version, backbone=backbone)
                routers[tenant] = load_classifier(
                    loaded.files, loaded.manifest.config, version=version,
                    origin=RouterOrigin(backbone or "", name, version))
            except Exception as error:  # the shared router serves the tenant meanwhile
                log.error("router %s v%d failed to load: %s", name, version, error)
                if current is not None:
                    routers[tenant] = current
        self.loaded = routers
        return routers
