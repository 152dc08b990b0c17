"""The sidecar in-process on a tiny store: publication, determinism, resumption, the
quality gate, the router update, every module family, take-overs and retries."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import torch

from converters.marian import convert_marian
from model_store import LocalStorage, Store
from server.engine.artifacts import backbone_parts, module_params
from server.engine.families import get_family
from server.engine.residency import check_params
from server.routing.classifier import load_classifier
from tests.converters.marian_fixture import marian_model, save_marian
from tests.tiny import tiny_config
from tests.trainer.sidecar_store import (
    BACKBONE,
    NEW_DOMAIN,
    NEW_TEXT,
    build_store,
    submit,
    worker_settings,
)
from trainer.jobs.domain_job import run_dir_of
from trainer.sidecar import worker as sidecar_module
from trainer.sidecar.worker import Heartbeat, Sidecar

UNTIL_LAST_STEP = {"eval_every": 1000}  # the module is the last step's, not the first eval's


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(build_store(tmp_path / "store"), builtin_dir=None) as opened:
        yield opened


def run_once(store: Store, **overrides: Any) -> int:
    return Sidecar(store, worker_settings(**overrides)).run(once=True)


def module_hash(store: Store, version: int = 1) -> str:
    return store.record("module", NEW_DOMAIN, version).manifest.files["module.safetensors"].sha256


def test_job_publishes_module_and_router_in_one_flip(store: Store) -> None:
    job = submit(store)
    before = store.registry.latest_event_id()
    assert run_once(store) == 1
    done = store.registry.get_job(job.id)
    assert done.state == "published" and done.progress == 1.0 and done.error is None
    assert done.loss is not None and math.isfinite(done.loss)
    assert done.scores["gate"] == "passed"
    assert set(done.scores["module"]) == set(done.scores["backbone"]) == {"bleu", "chrf"}
    assert done.result == {"module_version": 1, "classifier_version": 2, "active": True,
                           "notes": []}
    assert store.active_domains() == {"medical": 1, "law": 1, "it": 1, NEW_DOMAIN: 1}
    events = [e for e in store.registry.events_since(before) if e.action == "activate"]
    assert [(e.kind, e.name, e.version) for e in events] == [
        ("module", NEW_DOMAIN, 1), ("classifier", "router", 2)]
    assert events[1].id == events[0].id + 1  # one transaction, nothing in between
    module = store.load("module", NEW_DOMAIN)
    assert module.manifest.provenance["job"] == job.id
    assert module.manifest.scores["gate"] == "passed"
    router = store.load("classifier", "router")
    classifier = load_classifier(router.files, router.manifest.config, version=2)
    assert router.manifest.config["labels"] == sorted(["it", "law", "medical", NEW_DOMAIN])
    assert router.manifest.config["temperature"] == 1.0  # the base router's (none: 1)
    posteriors = classifier.posteriors(NEW_TEXT)
    assert max(posteriors, key=lambda d: posteriors[d]) == NEW_DOMAIN


def test_the_retrained_router_keeps_the_base_routers_calibration(tmp_path: Path) -> None:
    root = build_store(tmp_path / "store", router_temperature=2.5)
    with Store.open(root, builtin_dir=None) as store:
        submit(store)
        assert run_once(store) == 1
        router = store.load("classifier", "router")
        assert router.manifest.version == 2
        assert router.manifest.config["temperature"] == 2.5
        classifier = load_classifier(router.files, router.manifest.config, version=2)
        assert classifier.temperature == 2.5
        raw, served = classifier.raw_posteriors(NEW_TEXT), classifier.posteriors(NEW_TEXT)
        assert served[NEW_DOMAIN] < raw[NEW_DOMAIN]


def test_same_seed_gives_a_bit_identical_module_even_across_an_interruption(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hashes = []
    for index, seed in enumerate((1, 1, 2)):
        with Store.open(build_store(tmp_path / f"s{index}"), builtin_dir=None) as store:
            job = submit(store, config=UNTIL_LAST_STEP | {"seed": seed})
            if index == 1:
                interrupt_after_reports(store, monkeypatch, reports=6)
                monkeypatch.undo()
                interrupted = store.registry.get_job(job.id)
                assert (interrupted.state, interrupted.attempts) == ("queued", 0)
                assert (run_dir_of(store, job.id) / "checkpoint.pt").exists()
            assert run_once(store) == 1
            assert store.registry.get_job(job.id).state == "published"
            hashes.append(module_hash(store))
    assert hashes[0] == hashes[1] != hashes[2]


def interrupt_after_reports(store: Store, monkeypatch: pytest.MonkeyPatch, *,
                            reports: int) -> None:
    """Run the sidecar and stop it (as SIGTERM does) after some training reports."""
    sidecar = Sidecar(store, worker_settings())
    original = Heartbeat.report
    seen: list[int] = []

    def report(self: Heartbeat, fields: dict[str, Any]) -> None:
        original(self, fields)
        seen.append(1)
        if len(seen) >= reports:
            sidecar.stop.set()

    monkeypatch.setattr(Heartbeat, "report", report)
    assert sidecar.run(once=True) == 1


def test_gate_refuses_a_module_worse_than_the_margin(store: Store) -> None:
    job = submit(store, config={"gate_margin_bleu": -100})
    run_once(store)
    failed = store.registry.get_job(job.id)
    assert failed.state == "failed"
    assert failed.error is not None and failed.error.startswith("quality gate: dev BLEU")
    assert "modules/religion/v1 was published inactive" in failed.error
    assert failed.scores["gate"] == "refused" and failed.scores["margin_bleu"] == -100
    assert {"bleu", "chrf"} <= set(failed.scores["backbone"]) & set(failed.scores["module"])
    assert failed.result == {"module_version": 1, "active": False}
    assert NEW_DOMAIN not in store.active_domains()
    assert store.registry.list_versions("module", NEW_DOMAIN) == [1]
    assert store.registry.get_active("classifier", "router") == 1
    assert store.registry.list_versions("classifier", "router") == [1]


@pytest.mark.parametrize("router", [True, False])
def test_router_is_skipped_with_a_note_without_examples(tmp_path: Path, router: bool) -> None:
    root = build_store(tmp_path / "store", examples=False, router=router)
    with Store.open(root, builtin_dir=None) as store:
        job = submit(store, config={"max_epochs": 1})
        run_once(store)
        done = store.registry.get_job(job.id)
        assert done.state == "published" and done.result is not None
        assert done.result["classifier_version"] is None
        expected = "carries no features.npz.xz" if router else "no active classifier"
        assert expected in done.result["notes"][0]
        assert store.registry.list_versions("classifier", "router") == ([1] if router else [])
        assert store.active_domains()[NEW_DOMAIN] == 1


def test_a_job_on_an_imported_opus_mt_backbone_trains_its_module(tmp_path: Path) -> None:
    files = convert_marian(save_marian(marian_model(), tmp_path / "opus-mt"))
    with Store.open(build_store(tmp_path / "store", backbone_files=files),
                    builtin_dir=None) as store:
        job = submit(store, config={"max_epochs": 2})
        assert run_once(store) == 1
        done = store.registry.get_job(job.id)
        assert done.state == "published" and done.error is None, done.error
        assert done.loss is not None and math.isfinite(done.loss)
        assert done.result is not None and done.result["module_version"] == 1
        module = store.load("module", NEW_DOMAIN, 1)
        assert module.manifest.backbone_fingerprint == \
            store.load_backbone(BACKBONE).manifest.backbone_fingerprint


FAMILY_OPTIONS: dict[str, dict[str, Any]] = {
    "adapter": {"bottleneck": 4}, "highway": {"bottleneck": 4}, "gated": {"bottleneck": 4},
    "ldr": {"rank": 2}, "sf": {}, "pa": {}}


@pytest.mark.parametrize("family", list(FAMILY_OPTIONS))
def test_every_family_trains_against_the_frozen_backbone(store: Store, family: str) -> None:
    job = submit(store, config={"family": family, "max_epochs": 2, "eval_every": 1000,
                                **FAMILY_OPTIONS[family]})
    run_once(store)
    assert store.registry.get_job(job.id).state == "published"
    loaded = store.load("module", NEW_DOMAIN)
    config = dict(loaded.manifest.config)
    params = module_params(loaded.files)
    assert config["family"] == family
    assert check_params(config, params, tiny_config()) == []
    backbone = backbone_parts(store.load_backbone(BACKBONE).files).tensors
    fresh = get_family(family).initial(tiny_config(), config, torch.Generator().manual_seed(1),
                                       weights=backbone)
    trained = [name for name in params if not torch.equal(params[name], fresh[name])]
    if "project" in get_family(family).sites:  # copies of the backbone's projections
        assert set(fresh) - set(trained) <= {k for k in fresh if k.endswith(".k.bias")}
        return
    zero_init = [name for name in fresh if not fresh[name].any()]  # up / B / gates
    assert zero_init and set(zero_init) <= set(trained)


def test_dead_workers_jobs_are_taken_over_and_attempts_are_bounded(store: Store) -> None:
    registry = store.registry
    job = submit(store, config={"max_epochs": 1})
    registry.claim_next_job("dead-worker")
    assert run_once(store, heartbeat_timeout_s=60) == 0  # fresh heartbeat: not taken
    assert registry.get_job(job.id).worker == "dead-worker"
    registry.update_job(job.id, heartbeat_at=datetime.now(UTC) - timedelta(seconds=61))
    assert run_once(store, heartbeat_timeout_s=60) == 1  # silent for too long: taken over
    done = registry.get_job(job.id)
    assert (done.state, done.worker, done.attempts) == ("published", "test-worker", 2)
    other = submit(store, name="psalms", config={"max_epochs": 1})
    for _ in range(3):
        registry.update_job(other.id, state="running", worker="test-worker",
                            attempts=registry.get_job(other.id).attempts + 1)
    run_once(store)
    gave_up = registry.get_job(other.id)
    assert gave_up.state == "failed"
    assert gave_up.error is not None and gave_up.error.startswith("gave up after 3 attempts")


def test_unexpected_errors_are_retried_then_failed(store: Store,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_ctx: object) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sidecar_module, "run_domain_job", broken)
    job = submit(store)
    run_once(store)
    retried = store.registry.get_job(job.id)
    assert (retried.state, retried.error) == ("queued", "RuntimeError: disk on fire")
    run_once(store)
    run_once(store)
    failed = store.registry.get_job(job.id)
    assert failed.state == "failed" and failed.attempts == 3
    assert failed.error == "gave up after 3 attempts; last error: RuntimeError: disk on fire"


def test_sweep_removes_orphan_job_directories(store: Store) -> None:
    job = submit(store)
    store.storage.write_bytes("jobs/orphan/train.tsv", b"a\tb\n")
    assert isinstance(store.storage, LocalStorage)
    for key in ("jobs/orphan", f"jobs/{job.id}"):
        os.utime(store.storage.path(key), (1_000_000_000, 1_000_000_000))  # long ago
    Sidecar(store, worker_settings()).sweep()
    assert store.storage.list("jobs") == [job.id]
