"""The sharded store layout (model_store/layout.py): a flat store migrated in place, new
versions published sharded, every artifact loading the same bytes from its new place."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from tiny_artifacts import publish_backbone, publish_module, store_root

from model_store import Manifest, Store
from model_store.__main__ import main
from model_store.layout import LAYOUT_FILE, shard_of

NAMES = ("medical", "law", "it", "tenant-0042")


def test_a_flat_store_is_resharded_in_place(store: Store, backbone: Manifest) -> None:
    fingerprint = backbone.backbone_fingerprint
    for index, name in enumerate(NAMES):
        publish_module(store, name, fingerprint, seed=0.1 * index)
    publish_module(store, "law", fingerprint, seed=0.9)
    before = {(r.name, r.version): store.load("module", r.name, r.version).files
              for r in store.registry.list_artifacts("module")}
    root = store_root(store)
    assert sorted(p.name for p in (root / "modules").iterdir()) == sorted(NAMES)

    moved = store.reshard()

    assert len(moved) == len(before) == 5
    assert (root / LAYOUT_FILE).is_file()
    shards = sorted(p.name for p in (root / "modules").iterdir())
    assert shards == sorted({shard_of(name) for name in NAMES})
    for record in store.registry.list_artifacts("module"):
        assert record.location == (f"modules/{shard_of(record.name)}/{record.name}/"
                                   f"v{record.version}")
        assert store.load("module", record.name, record.version).files == \
            before[(record.name, record.version)]
    assert store.reshard() == []  # nothing flat is left
    assert store.sweep(older_than=timedelta(0)) == []  # every directory has its row

    newer = publish_module(store, "medical", fingerprint, seed=2.0)
    assert (root / "modules" / shard_of("medical") / "medical" / f"v{newer.version}").is_dir()


def test_a_row_less_sharded_directory_is_swept(store: Store, backbone: Manifest) -> None:
    store.reshard()
    manifest = publish_module(store, "law", backbone.backbone_fingerprint)
    root = store_root(store)
    orphan = root / "modules" / shard_of("law") / "law" / "v9"
    orphan.mkdir()
    (orphan / "module.safetensors").write_bytes(b"left by a crashed publisher")
    removed = store.sweep(older_than=timedelta(0))
    assert removed == [f"modules/{shard_of('law')}/law/v9"]
    assert store.load("module", "law", manifest.version).manifest == manifest


def test_the_command_reshards_a_store_and_a_reopened_store_stays_sharded(
        tmp_path: Path) -> None:
    root = tmp_path / "store"
    with Store.open(root, builtin_dir=None) as store:
        fingerprint = publish_backbone(store).backbone_fingerprint
        publish_module(store, "law", fingerprint)
    assert main(["reshard", str(root)]) == 0
    with Store.open(root, builtin_dir=None) as store:
        assert store.sharded
        assert store.load("module", "law", 1).manifest.name == "law"
        publish_module(store, "it", fingerprint)
    assert (root / "modules" / shard_of("it") / "it" / "v1").is_dir()
