"""A tenant's router: the classifier `auto` uses for a tenant's requests, trained over
the tenant's domains and the shared ones (never another tenant's).

A tenant's new domain teaches that tenant's router (`<tenant>-<router name>`, e.g.
`acme-router`), not the shared one, which keeps learning shared domains only. Its
examples are the shared router's of the shared domains (so it knows the newest shared
domains) plus its own previous version's of the tenant's domains, plus the new domain's
sources; it is hashed with, and carries the temperature of, the shared router. The server
routes a tenant's `auto` requests with it once published (server/routing/tenant_routers.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from contract.tsv import Pair
from model_store import Store
from trainer.routers.features import FeatureExample
from trainer.routers.settings import RouterSettings
from trainer.routers.update import RouterUpdate, active_router, retrained


def tenant_router_name(tenant: str, name: str) -> str:
    """The tenant's router's artifact name: it carries the tenant's prefix (its own)."""
    return f"{tenant}-{name}"


def tenant_router_update(store: Store, tenant: str, domain: str,
                         data: tuple[Sequence[Pair], Sequence[Pair]], *,
                         settings: RouterSettings, backbone: str | None
                         ) -> RouterUpdate | str:
    """The tenant's next router, knowing `domain`, or a note saying why there is none."""
    shared = active_router(store, settings, backbone)
    if isinstance(shared, str):
        return f"{shared}: no router of tenant {tenant!r} was trained; requests reach " \
               f"{domain!r} by name only"
    name = tenant_router_name(tenant, settings.name)
    own = active_router(store, settings.model_copy(update={"name": name}), backbone)
    owners: dict[str, str | None] = {}

    def owner(label: str) -> str | None:
        if label not in owners:
            owners[label] = store.registry.resource_owner("domain", label)
        return owners[label]

    base: list[FeatureExample] = [(label, f) for label, f in shared.examples
                                  if owner(label) is None]
    if not isinstance(own, str) and own.features == shared.features:
        base += [(label, f) for label, f in own.examples if owner(label) == tenant]
    version = None if isinstance(own, str) else own.loaded.manifest.version
    return retrained(base, shared, domain, data, settings=settings, base_version=version)
