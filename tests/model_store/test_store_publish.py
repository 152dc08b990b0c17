"""Atomic publication: concurrent publishers, crashes between write and flip, sweeping."""

from __future__ import annotations

import multiprocessing
import os
from datetime import timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from tiny_artifacts import make_safetensors, publish_backbone, publish_module, store_root

from model_store import Manifest, NotFoundError, PublishStep, Store

# spawn: children start clean (no inherited SQLite connections or torch threads).
SPAWN = multiprocessing.get_context("spawn")
CRASH_EXIT_CODE = 3


def _publish_many(
    root: str, url: str, worker: int, count: int, fingerprint: str, barrier: Barrier,
    out: Queue[object],
) -> None:
    with Store.open(Path(root), registry_url=url, builtin_dir=None) as store:
        barrier.wait(timeout=60)
        versions = [
            publish_module(store, "medical", fingerprint, seed=100.0 * worker + i).version
            for i in range(count)
        ]
    out.put((worker, versions))


def _publish_and_crash(root: str, url: str, fingerprint: str, crash_at: PublishStep) -> None:
    def hook(step: PublishStep, _key: str) -> None:
        if step == crash_at:
            os._exit(CRASH_EXIT_CODE)  # a hard crash: no finally blocks, no cleanup

    with Store.open(Path(root), registry_url=url, builtin_dir=None) as store:
        publish_module(store, "medical", fingerprint, hook=hook)


def test_two_processes_publish_concurrently(store: Store, backbone: Manifest) -> None:
    root = str(store_root(store))
    barrier, out = SPAWN.Barrier(2), SPAWN.Queue()
    workers = [
        SPAWN.Process(
            target=_publish_many,
            args=(root, store.registry.url, w, 5, backbone.backbone_fingerprint, barrier, out),
        )
        for w in range(2)
    ]
    for process in workers:
        process.start()
    results = dict(out.get(timeout=120) for _ in workers)
    for process in workers:
        process.join(timeout=60)

    assert [p.exitcode for p in workers] == [0, 0]
    versions = sorted(results[0] + results[1])
    assert versions == list(range(1, 11))
    assert store.registry.list_versions("module", "medical") == versions
    seeds = set()
    for version in versions:
        loaded = store.load("module", "medical", version)
        assert loaded.manifest.version == version
        seeds.add(loaded.files["module.safetensors"])
    assert len(seeds) == 10  # ten distinct payloads, none overwritten
    assert store.storage.list(".staging") == []


@pytest.mark.parametrize("crash_at", ["staged", "renamed"])
def test_crash_between_write_and_flip_leaves_nothing_visible(
    store: Store, backbone: Manifest, crash_at: PublishStep
) -> None:
    root = str(store_root(store))
    process = SPAWN.Process(
        target=_publish_and_crash,
        args=(root, store.registry.url, backbone.backbone_fingerprint, crash_at),
    )
    process.start()
    process.join(timeout=120)
    leftover = ".staging" if crash_at == "staged" else "modules/medical/v1"

    assert process.exitcode == CRASH_EXIT_CODE
    assert store.storage.exists(leftover)
    assert store.registry.list_names("module") == []
    with pytest.raises(NotFoundError):
        store.load("module", "medical", 1)
    assert store.sweep(older_than=timedelta(hours=1)) == []  # too young: may be in flight

    removed = store.sweep(older_than=timedelta(0))

    assert len(removed) == 1 and removed[0].startswith(leftover)
    assert store.storage.list(".staging") == []
    assert not store.storage.exists("modules/medical/v1")
    assert publish_module(store, "medical", backbone.backbone_fingerprint).version == 1
    assert store.load("module", "medical", 1).manifest.version == 1


def test_failed_publish_cleans_its_staging_directory(store: Store, backbone: Manifest) -> None:
    def hook(step: PublishStep, _key: str) -> None:
        raise RuntimeError(f"injected failure at {step}")

    with pytest.raises(RuntimeError, match="injected failure at staged"):
        publish_module(store, "medical", backbone.backbone_fingerprint, hook=hook)

    assert store.storage.list(".staging") == []
    assert store.registry.list_names("module") == []


def test_orphan_version_directory_is_skipped_then_swept(store: Store, backbone: Manifest) -> None:
    store.storage.write_bytes("modules/medical/v1/module.safetensors", make_safetensors([9.0]))

    manifest = publish_module(store, "medical", backbone.backbone_fingerprint)
    removed = store.sweep(older_than=timedelta(0))

    assert manifest.version == 2
    assert removed == ["modules/medical/v1"]
    assert store.registry.list_versions("module", "medical") == [2]
    assert store.load("module", "medical", 2).manifest == manifest


def test_sweep_keeps_registered_artifacts(store: Store, backbone: Manifest) -> None:
    module = publish_module(store, "medical", backbone.backbone_fingerprint)

    assert store.sweep(older_than=timedelta(0)) == []
    assert store.load("module", "medical", module.version).manifest == module
    assert store.load_backbone().manifest == backbone


def test_versions_are_per_kind_and_name(store: Store, backbone: Manifest) -> None:
    fingerprint = backbone.backbone_fingerprint
    first = [publish_module(store, "medical", fingerprint, seed=s).version for s in (1.0, 2.0)]
    other = publish_module(store, "law", fingerprint).version
    second_backbone = publish_backbone(store, seed=5.0).version

    assert (first, other, second_backbone) == ([1, 2], 1, 2)
