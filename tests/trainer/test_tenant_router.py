"""A router per tenant, trained by the sidecar: a tenant's new domain is taught to that
tenant's router (`<tenant>-router`: the shared domains, its own, never another
tenant's), published and activated with the module; the shared router does not learn
it."""

from __future__ import annotations

from pathlib import Path

from model_store import Store
from tests.trainer.sidecar_store import BACKBONE, build_store, submit, worker_settings
from trainer.sidecar.worker import Sidecar


def labels(store: Store, name: str) -> set[str]:
    version = store.registry.get_active("classifier", name, backbone=BACKBONE)
    assert version is not None, name
    loaded = store.load("classifier", name, version, backbone=BACKBONE)
    return set(loaded.manifest.config["labels"])


def test_a_tenants_domain_trains_its_tenants_router_only(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    with Store.open(root, builtin_dir=None) as store:
        for tenant in ("acme", "beta"):
            store.registry.create_tenant(tenant)
        store.registry.claim_resource("domain", "law", "beta")  # beta's, in the shared router
        shared_before = store.registry.get_active("classifier", "router", backbone=BACKBONE)
        shared_labels = labels(store, "router")
        job = submit(store, name="acme-religion")
        assert Sidecar(store, worker_settings()).run(once=True) == 1
        done = store.registry.get_job(job.id)
        assert done.state == "published", done.error
        # the shared router is the one it was; acme's knows the shared domains and its own
        assert store.registry.get_active("classifier", "router",
                                         backbone=BACKBONE) == shared_before
        assert "acme-religion" not in labels(store, "router")
        assert labels(store, "acme-router") == (shared_labels - {"law"}) | {"acme-religion"}
        assert done.result["classifier_version"] == store.registry.get_active(
            "classifier", "acme-router", backbone=BACKBONE)
        assert store.registry.get_active("classifier", "beta-router", backbone=BACKBONE) is None
        # acme's next domain extends acme's router (its earlier domain kept)
        second = submit(store, name="acme-scripture")
        assert Sidecar(store, worker_settings()).run(once=True) == 1
        assert store.registry.get_job(second.id).state == "published"
        assert labels(store, "acme-router") == (shared_labels - {"law"}) | {
            "acme-religion", "acme-scripture"}
