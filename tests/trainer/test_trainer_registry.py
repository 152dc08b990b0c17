"""Registry additions of the sidecar: one-transaction flips, exclusive job creation,
fenced job updates and take-overs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from model_store import ConflictError, NotFoundError, Store
from tests.trainer.sidecar_store import build_store


@pytest.fixture
def store(tmp_path: Path, registry_url: str) -> Iterator[Store]:
    root = build_store(tmp_path / "store", registry_url=registry_url)
    with Store.open(root, registry_url=registry_url, builtin_dir=None) as opened:
        yield opened


def test_set_active_many_flips_all_in_one_go(store: Store) -> None:
    module = store.load("module", "law", 1)
    again = store.publish("module", "law", dict(module.files), config=module.manifest.config,
                          backbone_fingerprint=module.manifest.backbone_fingerprint)
    router = store.registry.get_active("classifier", "router")
    before = store.registry.latest_event_id()
    store.registry.set_active_many([("module", "law", again.version),
                                    ("classifier", "router", 1)],
                                   expect={("classifier", "router"): router})
    assert store.registry.get_active("module", "law") == again.version
    actions = [(e.kind, e.name, e.action) for e in store.registry.events_since(before)]
    assert actions == [("module", "law", "activate"), ("classifier", "router", "activate")]


def test_set_active_many_changes_nothing_on_conflict(store: Store) -> None:
    before = store.registry.latest_event_id()
    with pytest.raises(ConflictError, match="is version 1, not 7"):
        store.registry.set_active_many([("module", "law", 1)],
                                       expect={("classifier", "router"): 7})
    with pytest.raises(NotFoundError):
        store.registry.set_active_many([("module", "law", 1), ("module", "it", 9)])
    assert store.registry.latest_event_id() == before


def test_create_domain_job_is_exclusive(store: Store) -> None:
    registry = store.registry
    with pytest.raises(ConflictError, match="'law' exists"):
        registry.create_domain_job("law", config={}, data_location="jobs/a", job_id="a")
    job = registry.create_domain_job("new", config={"k": 1}, data_location="jobs/b",
                                     job_id="b")
    assert (job.id, job.state, job.config) == ("b", "queued", {"k": 1})
    with pytest.raises(ConflictError, match="has a queued job"):
        registry.create_domain_job("new", config={}, data_location="jobs/c", job_id="c")
    registry.update_job("b", state="failed")
    assert registry.create_domain_job("new", config={}, data_location="jobs/d",
                                      job_id="d").state == "queued"


def test_heartbeat_is_fenced_by_worker_and_state(store: Store) -> None:
    registry = store.registry
    registry.create_domain_job("new", config={}, data_location="jobs/j", job_id="j")
    assert not registry.heartbeat_job("j", "w1")  # queued: nobody runs it
    claimed = registry.claim_next_job("w1")
    assert claimed is not None and claimed.heartbeat_at is not None
    assert registry.heartbeat_job("j", "w1", progress=0.5, loss=2.0)
    assert not registry.heartbeat_job("j", "w2", progress=0.9)
    job = registry.get_job("j")
    assert (job.progress, job.loss, job.worker) == (0.5, 2.0, "w1")
    assert job.heartbeat_at is not None and job.heartbeat_at > claimed.heartbeat_at


def test_take_over_has_one_winner(store: Store) -> None:
    registry = store.registry
    registry.create_domain_job("new", config={}, data_location="jobs/j", job_id="j")
    registry.claim_next_job("dead")
    seen = registry.get_job("j")
    taken = registry.take_over_job(seen, "w2")
    assert taken is not None and (taken.worker, taken.attempts) == ("w2", 2)
    assert registry.take_over_job(seen, "w3") is None  # stale view: lost the race
    assert not registry.heartbeat_job("j", "dead")
    registry.update_job("j", heartbeat_at=datetime.now(UTC) - timedelta(hours=1))
    assert registry.take_over_job(registry.get_job("j"), "w3") is not None
