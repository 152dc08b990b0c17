"""Directions in the store: modules, classifiers, activations, jobs and glossaries belong to
a backbone (revision 0004), and the upgrade of a registry made before it keeps every row."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from tiny_artifacts import publish_backbone, publish_module

from model_store import ConflictError, NotFoundError, Store

# Made by main at af12fdb (schema revision 0003) with the real Store: backbones
# default-en-fr v1 and opus-en-de v1 (both active); modules medical v1, v2 (v1 active after
# a rollback), law v1 (deleted), it v1 and classifier router v1 for default-en-fr, and
# module news v1 built for opus-en-de (its fingerprint), active; glossaries pharma (default
# of medical) and ui; a queued job for religion; an API key; 17 events.
REVISION_0003 = Path(__file__).parent / "fixtures" / "registry-0003.sqlite"


def test_registry_of_revision_0003_keeps_every_row_and_gets_its_backbones(
        tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    shutil.copy(REVISION_0003, root / "registry.sqlite")

    with Store.open(root, builtin_dir=None) as store:
        registry = store.registry
        rows = {(r.backbone, r.kind, r.name, r.version, r.location)
                for r in registry.list_artifacts()}
        en_fr, en_de = "default-en-fr", "opus-en-de"

        assert rows == {
            ("", "backbone", en_fr, 1, "backbones/default-en-fr/v1"),
            ("", "backbone", en_de, 1, "backbones/opus-en-de/v1"),
            (en_fr, "module", "medical", 1, "modules/medical/v1"),
            (en_fr, "module", "medical", 2, "modules/medical/v2"),
            (en_fr, "module", "law", 1, "modules/law/v1"),
            (en_fr, "module", "it", 1, "modules/it/v1"),
            (en_fr, "classifier", "router", 1, "classifiers/router/v1"),
            (en_de, "module", "news", 1, "modules/news/v1")}  # by its fingerprint
        assert registry.default_backbone() == en_fr
        assert store.active_backbones() == {en_fr: 1, en_de: 1}
        assert store.active_domains() == {"medical": 1, "it": 1}  # the default backbone's
        assert store.active_domains(en_fr) == {"medical": 1, "it": 1}
        assert store.active_domains(en_de) == {"news": 1}
        assert registry.get_active("classifier", "router", backbone=en_fr) == 1
        assert registry.get_active("classifier", "router", backbone=en_de) is None
        assert {g.name: (g.backbone, g.default_for) for g in registry.list_glossaries()} == {
            "pharma": (en_fr, "medical"), "ui": (en_fr, None)}
        assert registry.glossary_defaults(backbone=en_fr)["medical"].name == "pharma"
        assert registry.glossary_defaults(backbone=en_de) == {}
        [job] = registry.list_jobs()
        assert (job.id, job.domain, job.backbone, job.state) == (
            "job-queued", "religion", en_fr, "queued")
        assert len(registry.list_api_keys()) == 1
        assert registry.latest_event_id() == 17
        # the upgraded registry takes writes, each on its own backbone
        registry.set_active("module", "law", 1, backbone=en_fr)
        assert store.active_domains(en_fr) == {"medical": 1, "it": 1, "law": 1}
        assert store.active_domains(en_de) == {"news": 1}


def test_each_backbone_has_its_own_domains_versions_and_activations(store: Store) -> None:
    en_fr = publish_backbone(store)
    fr_en = publish_backbone(store, name="default-fr-en", seed=7.0)
    store.activate("backbone", en_fr.name, 1)
    store.activate("backbone", fr_en.name, 1)

    ours = publish_module(store, "medical", en_fr.backbone_fingerprint)
    theirs = publish_module(store, "medical", fr_en.backbone_fingerprint, seed=0.25)
    store.activate("module", "medical", 1, backbone=fr_en.name)

    # both are version 1 of `medical`, each of its own backbone, in its own directory
    assert (ours.version, theirs.version) == (1, 1)
    assert store.record("module", "medical", 1, backbone=en_fr.name).location == (
        "modules/medical/v1")
    assert store.record("module", "medical", 1, backbone=fr_en.name).location == (
        "directions/default-fr-en/modules/medical/v1")
    assert store.active_domains(en_fr.name) == {}
    assert store.active_domains(fr_en.name) == {"medical": 1}
    loaded = store.load("module", "medical", backbone=fr_en.name,
                        expected_fingerprint=fr_en.backbone_fingerprint)
    assert loaded.manifest == theirs
    with pytest.raises(NotFoundError, match="active version of module"):
        store.load("module", "medical", backbone=en_fr.name)

    store.delete_domain("medical", backbone=fr_en.name)
    assert store.active_domains(fr_en.name) == {}
    assert store.sweep(older_than=timedelta(0)) == []  # every directory has its row


def test_a_domain_job_and_a_default_glossary_are_per_backbone(store: Store) -> None:
    publish_backbone(store)
    publish_backbone(store, name="default-fr-en", seed=7.0)
    registry = store.registry

    registry.create_domain_job("cooking", config={}, data_location="a", job_id="j1",
                               backbone="default-en-fr")
    job = registry.create_domain_job("cooking", config={}, data_location="b", job_id="j2",
                                     backbone="default-fr-en")
    with pytest.raises(ConflictError, match="has a queued job"):
        registry.create_domain_job("cooking", config={}, data_location="c", job_id="j3",
                                   backbone="default-fr-en")
    registry.put_glossary("a", [("x", "y")], default_for="medical", backbone="default-en-fr")
    registry.put_glossary("b", [("y", "x")], default_for="medical", backbone="default-fr-en")
    with pytest.raises(ConflictError, match="already the default of domain 'medical'"):
        registry.put_glossary("c", [("y", "z")], default_for="medical",
                              backbone="default-fr-en")

    assert job.backbone == "default-fr-en"
    assert registry.glossary_defaults(backbone="default-fr-en")["medical"].name == "b"
    assert registry.glossary_defaults()["medical"].name == "a"  # the default backbone's
