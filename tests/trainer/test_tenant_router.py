"""A router per tenant, trained by the sidecar: a tenant's new domain is taught to that
tenant's router (`<tenant>-router`: the shared domains, its own, never another
tenant's), published and activated with the module; the shared router does not learn
it."""

from __future__ import annotations

from pathlib import Path

from model_store import Store
from server.serving.refresh_jobs import submit_refresh
from tests.trainer.refresh_fixtures import add, fresh_sources
from tests.trainer.sidecar_store import (
    BACKBONE,
    FAST_JOB,
    build_store,
    submit,
    worker_settings,
)
from trainer.jobs.refresh_settings import RefreshSettings
from trainer.sidecar.worker import Sidecar

# a refresh that publishes whatever its gate measures (the tiny model, a few steps)
REFRESH = {k: v for k, v in FAST_JOB.items() if k != "max_epochs"} | {
    "max_epochs": 2, "gate_margin_bleu": 100.0}


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


def test_a_refresh_of_a_tenants_domain_retrains_its_tenants_router(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store")
    with Store.open(root, builtin_dir=None) as store:
        store.registry.create_tenant("acme")
        for key in ("acme-1", "acme-2"):
            store.registry.add_tenant_key(key, "acme", "member")
        submit(store, name="acme-religion")
        assert Sidecar(store, worker_settings()).run(once=True) == 1
        shared = store.registry.get_active("classifier", "router", backbone=BACKBONE)
        before = store.registry.get_active("classifier", "acme-router", backbone=BACKBONE)
        sources = fresh_sources(40, avoid=[], seed=3)
        add(store, sources[:20], key="acme-1", domain="acme-religion")
        add(store, sources[20:], key="acme-2", domain="acme-religion")
        backbone = store.record("backbone", BACKBONE).manifest
        job = submit_refresh(store, "acme-religion", backbone=backbone, trigger="admin",
                             options=REFRESH, require_new=True)
        settings = worker_settings(refresh=RefreshSettings(min_held_out_gain_chrf=-100.0))
        assert Sidecar(store, settings).run(once=True) == 1
        done = store.registry.get_job(job.id)
        assert done.state == "published", (done.error, done.scores)
        after = store.registry.get_active("classifier", "acme-router", backbone=BACKBONE)
        assert done.result["router"]["classifier_version"] == after and after != before
        assert store.registry.get_active("classifier", "router",
                                         backbone=BACKBONE) == shared
