"""Built-in artifacts: layered under the writable root, verified, never written to."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from tiny_artifacts import (
    publish_backbone,
    publish_module,
    set_read_only,
    snapshot,
    store_root,
)

from model_store import BUILTIN_DIR, ArtifactError, Store


def open_store(tmp_path: Path, registry_url: str, builtin_dir: Path | None) -> Store:
    """The operator's store (registry on SQLite or PostgreSQL) over `builtin_dir`."""
    return Store.open(tmp_path / "store", registry_url=registry_url, builtin_dir=builtin_dir)


@pytest.fixture
def builtin_dir(tmp_path: Path) -> Iterator[Path]:
    """A read-only builtin directory: backbone v1 and module `medical` v1."""
    with Store.open(tmp_path / "factory", builtin_dir=None) as factory:
        backbone = publish_backbone(factory)
        module = publish_module(factory, "medical", backbone.backbone_fingerprint)
        builtin = tmp_path / "builtin"
        for manifest in (backbone, module):
            shutil.copytree(store_root(factory) / manifest.label, builtin / manifest.label)
    (builtin / "README.md").write_text("shipped artifacts")
    set_read_only(builtin, True)
    yield builtin
    set_read_only(builtin, False)


def test_builtins_are_registered_activated_and_never_written(
    tmp_path: Path, builtin_dir: Path, registry_url: str) -> None:
    before = snapshot(builtin_dir)

    with open_store(tmp_path, registry_url, builtin_dir) as store:
        record = store.record("module", "medical")
        backbone = store.load_backbone()
        fingerprint = backbone.manifest.backbone_fingerprint
        medical = store.load("module", "medical", expected_fingerprint=fingerprint)
        v2 = publish_module(store, "medical", fingerprint, seed=7.0)
        store.activate("module", "medical", v2.version)
        swept = store.sweep(older_than=timedelta(0))
        store.delete_domain("medical")

        assert record.location == "builtin:modules/medical/v1"
        assert medical.manifest.version == 1 and v2.version == 2
        assert store.storage.exists("modules/medical/v2")
        assert not store.storage.exists("modules/medical/v1")
        assert swept == []

    with open_store(tmp_path, registry_url, builtin_dir) as reopened:
        # A deleted built-in domain stays deleted; the backbone stays active.
        assert reopened.active_domains() == {}
        assert reopened.registry.get_active("backbone", "default-en-fr") == 1
        assert reopened.registry.list_versions("module", "medical") == [1, 2]
        assert reopened.load("module", "medical", 1).files == medical.files

    assert snapshot(builtin_dir) == before


def test_corrupt_builtin_fails_open(tmp_path: Path, builtin_dir: Path, registry_url: str) -> None:
    set_read_only(builtin_dir, False)
    (builtin_dir / "modules/medical/v1/module.safetensors").write_bytes(b"corrupt")

    with pytest.raises(ArtifactError, match="modules/medical/v1 is invalid.*size mismatch"):
        open_store(tmp_path, registry_url, builtin_dir)


def test_builtin_version_taken_by_a_published_one_stays_the_stores_own(
    tmp_path: Path, builtin_dir: Path, registry_url: str) -> None:
    with open_store(tmp_path, registry_url, None) as plain:
        own = publish_backbone(plain, seed=9.0)  # takes backbones/default-en-fr/v1 under the root

    with open_store(tmp_path, registry_url, builtin_dir) as store:
        record = store.record("backbone", "default-en-fr", 1)
        assert record.location == own.label and record.manifest == own
        assert store.record("module", "medical").location == "builtin:modules/medical/v1"


def package_update(tmp_path: Path, versions: int) -> Path:
    """A newer package's builtin directory: the same backbone, and only module `medical`
    version `versions` (retrained: other weights), its older versions gone."""
    with Store.open(tmp_path / "factory2", builtin_dir=None) as factory:
        backbone = publish_backbone(factory)
        for version in range(1, versions + 1):
            module = publish_module(factory, "medical", backbone.backbone_fingerprint,
                                    seed=float(version))
        builtin = tmp_path / "builtin2"
        for manifest in (backbone, module):
            shutil.copytree(store_root(factory) / manifest.label, builtin / manifest.label)
    return builtin


def test_a_newer_builtin_version_replaces_the_builtin_one_served(
    tmp_path: Path, builtin_dir: Path, registry_url: str) -> None:
    open_store(tmp_path, registry_url, builtin_dir).close()
    update = package_update(tmp_path, versions=2)

    with open_store(tmp_path, registry_url, update) as store:
        assert store.active_domains() == {"medical": 2}
        assert store.record("module", "medical").location == "builtin:modules/medical/v2"
        store.load("module", "medical", 2)  # verified from the new package
        assert store.registry.get_active("backbone", "default-en-fr") == 1


def test_a_newer_builtin_leaves_the_operators_choice_alone(
    tmp_path: Path, builtin_dir: Path, registry_url: str) -> None:
    with open_store(tmp_path, registry_url, builtin_dir) as store:
        fingerprint = store.load_backbone().manifest.backbone_fingerprint
        own = publish_module(store, "medical", fingerprint, seed=7.0)  # v2, under the root
        store.activate("module", "medical", own.version)
    update = package_update(tmp_path, versions=3)

    with open_store(tmp_path, registry_url, update) as store:
        assert store.active_domains() == {"medical": 2}
        assert store.registry.list_versions("module", "medical") == [1, 2, 3]
        assert store.record("module", "medical", 3).location == "builtin:modules/medical/v3"


def test_a_deleted_builtin_domain_stays_deleted_after_an_update(
    tmp_path: Path, builtin_dir: Path, registry_url: str) -> None:
    with open_store(tmp_path, registry_url, builtin_dir) as store:
        store.delete_domain("medical")
    update = package_update(tmp_path, versions=2)

    with open_store(tmp_path, registry_url, update) as store:
        assert store.active_domains() == {}
        assert store.registry.list_versions("module", "medical") == [1, 2]


def test_package_builtin_dir_is_layered(tmp_path: Path, registry_url: str) -> None:
    before = snapshot(BUILTIN_DIR)
    shipped = {
        f"builtin:{path.parent.relative_to(BUILTIN_DIR).as_posix()}"
        for pattern in ("*s/*/v*/manifest.json", "directions/*/*s/*/v*/manifest.json")
        for path in BUILTIN_DIR.glob(pattern)
    }  # a further direction's modules and router live under directions/<backbone>/

    with Store.open(tmp_path / "store", registry_url=registry_url) as store:
        registered = {record.location for record in store.registry.list_artifacts()}

    assert (BUILTIN_DIR / "README.md").is_file()
    assert registered == shipped
    assert snapshot(BUILTIN_DIR) == before
