"""The tenant scope's rules (server/core/tenancy.py) and the registry's tenant rows: who
sees and changes what, decided by owners and name prefixes, never by whether a resource
exists; bounded metric labels; a tenant's router restricted to the labels it sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_store import Registry
from model_store.errors import ConflictError, NotFoundError
from server.core.errors import Forbidden, NotFound
from server.core.tenancy import METRIC_BUCKETS, OPERATOR, TenantScope, tenant_bucket
from server.routing.visible_labels import VisibleLabels

OWNERS = {("domain", "legal"): "beta"}  # given to beta by the operator, no prefix
TENANTS = frozenset({"acme", "beta"})


def scope(tenant: str | None, role: str = "member") -> TenantScope:
    return TenantScope(tenant, role, OWNERS, TENANTS)  # type: ignore[arg-type]


def test_a_tenant_sees_its_own_and_the_shared_resources() -> None:
    acme = scope("acme")
    assert acme.sees("domain", "acme-contracts") and acme.sees("domain", "medical")
    assert not acme.sees("domain", "beta-contracts") and not acme.sees("domain", "legal")
    assert scope("beta").sees("domain", "legal")
    assert not scope(None, "shared").sees("domain", "acme-x")
    assert OPERATOR.sees("domain", "beta-contracts")
    assert dict(acme.visible("domain", {"medical": 1, "beta-x": 2, "acme-x": 3})) == {
        "medical": 1, "acme-x": 3}
    # without tenants everything is shared, exactly as before
    assert TenantScope("acme", "member").sees("domain", "beta-x")


def test_what_a_tenant_may_change_is_decided_by_the_name_alone() -> None:
    acme = scope("acme", "admin")
    acme.check_manages("glossary", "acme-terms")  # its own, existing or new
    with pytest.raises(NotFound) as existing:
        acme.check_manages("glossary", "beta-terms")
    with pytest.raises(NotFound) as missing:
        acme.check_manages("glossary", "beta-nothing")
    assert str(existing.value).replace("beta-terms", "X") == \
        str(missing.value).replace("beta-nothing", "X")
    # a shared name and a name given to another tenant answer alike
    with pytest.raises(Forbidden) as shared:
        acme.check_manages("domain", "medical")
    with pytest.raises(Forbidden) as given:
        acme.check_manages("domain", "legal")
    assert str(shared.value).replace("medical", "X") == str(given.value).replace("legal", "X")
    scope(None, "shared").check_manages("glossary", "medical")  # no tenant: as before
    assert acme.own_name("terms") == "acme-terms" and acme.own_name("acme-x") == "acme-x"


def test_metric_labels_are_buckets_never_names() -> None:
    labels = {tenant_bucket(f"tenant{i}") for i in range(500)}
    assert len(labels) == METRIC_BUCKETS and tenant_bucket(None) == "shared"
    assert tenant_bucket("acme") == tenant_bucket("acme")
    assert scope("acme").metric_label("domain", "beta-x") == tenant_bucket("beta")
    assert scope("acme").metric_label("domain", "medical") == "medical"


class Fixed:
    version = 3
    origin = None

    def posteriors(self, text: str) -> dict[str, float]:
        return {"beta-legal": 0.6, "medical": 0.3, "generic": 0.1}


def test_a_tenants_router_renormalises_over_the_labels_it_sees() -> None:
    router = VisibleLabels(Fixed(), lambda label: scope("acme").sees("domain", label))
    assert router.version == 3
    assert router.posteriors("x") == pytest.approx({"medical": 0.75, "generic": 0.25})


def test_the_registry_keeps_tenants_their_keys_and_what_they_own(tmp_path: Path) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        registry.create_tenant("acme")
        with pytest.raises(ConflictError):
            registry.create_tenant("acme")
        registry.create_tenant("beta")
        assert registry.list_tenants() == ["acme", "beta"]
        registry.add_tenant_key("k1", "acme", "admin")
        assert registry.tenant_key("k1").role == "admin"  # type: ignore[union-attr]
        assert registry.tenant_key("k2") is None and registry.tenant_key_ids("acme") == {"k1"}
        with pytest.raises(NotFoundError):
            registry.add_tenant_key("k3", "nobody", "member")
        registry.claim_resource("domain", "legal", "acme")
        registry.claim_resource("domain", "legal", "acme")  # idempotent for its owner
        with pytest.raises(ConflictError):
            registry.claim_resource("domain", "legal", "beta")
        assert [(r.kind, r.name, r.tenant) for r in registry.tenant_resources()] == [
            ("domain", "legal", "acme")]
        assert registry.release_resource("domain", "legal")
        assert not registry.release_resource("domain", "legal")
        assert registry.tenant_resources() == []
    finally:
        registry.close()
