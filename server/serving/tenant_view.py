"""What one request may route to: a serving state's domains, word-level mixtures and
classifier as the request's tenant scope sees them (server/core/tenancy.py): a tenant's
own router when it has one (server/routing/tenant_routers.py), else the shared one, both
restricted to the labels it sees. With no tenant owning anything this is the state
itself, unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from server.core.tenancy import TenantScope, current_scope
from server.routing.classifier import Classifier
from server.routing.visible_labels import VisibleLabels
from server.serving.state import ServingState


@dataclass(frozen=True)
class Routable:
    versions: Mapping[str, int]  # domain -> served version
    mixtures: set[str]  # the served domains whose module is a word-level mixture
    classifier: Classifier | None
    scope: TenantScope


def routable(state: ServingState, scope: TenantScope | None = None) -> Routable:
    scope = scope or current_scope()
    versions = state.versions()
    mixtures = state.mixtures()
    classifier = state.classifier
    if scope.operator or not scope.tenants:
        return Routable(versions, mixtures, classifier, scope)
    if scope.tenant is not None:  # its own router, once the sidecar published one
        classifier = state.tenant_classifiers.get(scope.tenant, classifier)
    sees = partial(scope.sees, "domain")
    return Routable(scope.visible("domain", versions),
                    {m for m in mixtures if sees(m)},
                    VisibleLabels(classifier, sees) if classifier is not None else None,
                    scope)
