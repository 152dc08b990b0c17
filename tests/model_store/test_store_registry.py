"""Registry: active versions and rollback, the event counter, training jobs."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from datetime import UTC, datetime
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

import pytest
from pydantic import ValidationError
from tiny_artifacts import publish_module

from model_store import ConflictError, Manifest, NotFoundError, Registry, Store

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def registry(registry_url: str) -> Iterator[Registry]:
    opened = Registry(registry_url)
    yield opened
    opened.close()


def test_activate_and_roll_back(store: Store, backbone: Manifest) -> None:
    fingerprint = backbone.backbone_fingerprint
    v1 = publish_module(store, "medical", fingerprint, seed=1.0)
    v2 = publish_module(store, "medical", fingerprint, seed=2.0)
    before = store.registry.latest_event_id()

    store.activate("module", "medical", v2.version)
    assert store.load("module", "medical").manifest == v2
    store.activate("module", "medical", v1.version)  # rollback

    assert store.load("module", "medical").manifest == v1
    assert store.active_domains() == {"medical": 1}
    events = store.registry.events_since(before)
    assert [(e.action, e.version) for e in events] == [("activate", 2), ("activate", 1)]
    assert store.registry.latest_event_id() == events[-1].id > before


def test_activate_refuses_unknown_versions(store: Store, backbone: Manifest) -> None:
    publish_module(store, "medical", backbone.backbone_fingerprint)
    before = store.registry.latest_event_id()

    with pytest.raises(NotFoundError, match=r"^no module 'medical' version 3; known: 1$"):
        store.activate("module", "medical", 3)
    with pytest.raises(NotFoundError, match=r"^no module 'law'; known: medical$"):
        store.activate("module", "law", 1)

    assert store.registry.get_active("module", "medical") is None
    assert store.registry.latest_event_id() == before


def test_delete_domain_keeps_versions_for_rollback(store: Store, backbone: Manifest) -> None:
    module = publish_module(store, "medical", backbone.backbone_fingerprint)
    store.activate("module", "medical", module.version)

    store.delete_domain("medical")

    assert store.active_domains() == {}
    assert store.registry.events_since(0)[-1].action == "deactivate"
    assert store.registry.list_versions("module", "medical") == [1]
    with pytest.raises(NotFoundError, match=r"^no active module 'medical'; known: none$"):
        store.delete_domain("medical")
    store.activate("module", "medical", 1)
    assert store.active_domains() == {"medical": 1}


def test_duplicate_artifact_row_is_a_conflict(store: Store, backbone: Manifest) -> None:
    with pytest.raises(ConflictError, match="backbones/default-en-fr/v1 is already registered"):
        store.registry.add_artifact(backbone, location="elsewhere")

    assert store.registry.get_artifact("backbone", backbone.name, 1) is not None
    assert store.registry.list_names("backbone") == ["default-en-fr"]


def test_event_counter_starts_at_zero(registry: Registry) -> None:
    assert registry.latest_event_id() == 0
    assert registry.events_since(0) == []


def test_job_lifecycle(registry: Registry) -> None:
    job = registry.create_job("medical", config={"epochs": 2}, data_location="data/medical.tsv")
    assert (job.state, job.progress, job.attempts, job.config) == ("queued", 0.0, 0, {"epochs": 2})

    claimed = registry.claim_next_job("worker-a")
    assert claimed is not None and claimed.id == job.id
    assert (claimed.state, claimed.worker, claimed.attempts) == ("running", "worker-a", 1)

    beat = datetime(2026, 1, 1, tzinfo=UTC)
    updated = registry.update_job(job.id, progress=0.5, loss=2.25, heartbeat_at=beat)
    assert (updated.progress, updated.loss, updated.heartbeat_at) == (0.5, 2.25, beat)
    done = registry.update_job(
        job.id, state="published", scores={"bleu": 31.5}, result={"version": 3}
    )

    assert (done.state, done.scores, done.result) == ("published", {"bleu": 31.5}, {"version": 3})
    assert done.updated_at >= done.created_at
    assert registry.list_jobs("published") == [done]
    assert registry.list_jobs("queued") == []
    assert registry.claim_next_job("worker-a") is None


@pytest.mark.parametrize(
    "fields",
    [{"state": "paused"}, {"progress": 1.5}, {"colour": "red"}, {"state": None}, {"loss": "low"}],
)
def test_update_job_validates_fields(registry: Registry, fields: dict[str, object]) -> None:
    job = registry.create_job("medical", config={}, data_location="x")

    with pytest.raises((ValidationError, ValueError)):
        registry.update_job(job.id, **fields)

    assert registry.get_job(job.id) == job


def test_unknown_job_is_not_found(registry: Registry) -> None:
    with pytest.raises(NotFoundError, match="no job 'nope'"):
        registry.get_job("nope")
    with pytest.raises(NotFoundError, match="no job 'nope'"):
        registry.update_job("nope", progress=0.1)


def test_jobs_are_claimed_first_come_first_served(registry: Registry) -> None:
    ids = [registry.create_job(f"d{i}", config={}, data_location="x").id for i in range(3)]

    claimed = [registry.claim_next_job("w") for _ in range(4)]

    assert [job.id if job else None for job in claimed] == [*ids, None]


def _claim_all(url: str, worker: str, barrier: Barrier, out: Queue[object]) -> None:
    registry = Registry(url)
    barrier.wait(timeout=60)
    claimed: list[str] = []
    while (job := registry.claim_next_job(worker)) is not None:
        claimed.append(job.id)
    registry.close()
    out.put(claimed)


def test_job_claim_is_exclusive_across_processes(registry: Registry) -> None:
    ids = {registry.create_job("medical", config={"i": i}, data_location="x").id for i in range(20)}
    barrier, out = SPAWN.Barrier(2), SPAWN.Queue()
    workers = [
        SPAWN.Process(target=_claim_all, args=(registry.url, f"w{n}", barrier, out))
        for n in range(2)
    ]
    for process in workers:
        process.start()
    claims = [out.get(timeout=120) for _ in workers]
    for process in workers:
        process.join(timeout=60)

    flat = [job_id for claim in claims for job_id in claim]
    assert [p.exitcode for p in workers] == [0, 0]
    assert sorted(flat) == sorted(ids)  # every job once, none twice
    assert all(job.attempts == 1 for job in registry.list_jobs("running"))
    assert len(registry.list_jobs("running")) == 20
