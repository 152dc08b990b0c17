"""Refreshing a domain's module from corrections with the sidecar's real job runner on the
tiny store: a refresh that publishes (and marks its corrections used), one the gate
refuses (sabotaged corrections), one key alone refused by the per-key share, anonymous
corrections that train nothing until approved, and the automatic trigger."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from contract.artifacts import (
    CLASSIFIER_EXAMPLES_FILE,
    CLASSIFIER_FEATURES_FILE,
    CLASSIFIER_MODEL_FILE,
)
from contract.training import RUN_DIR, TRAIN_FILE, job_key
from contract.tsv import pairs_from_bytes
from model_store import Store
from model_store.correction_rows import CorrectionFilter
from server.core.errors import InvalidInput
from server.engine.artifacts import module_params
from server.quality.estimator import Estimator
from server.quality.estimators import estimator_path, write_estimator
from server.quality.features import FEATURES
from server.routing.features import HashedFeatures
from server.serving.refresh_jobs import due_refreshes, submit_refresh
from tests.trainer.refresh_fixtures import SCRAMBLED, add, fresh_sources, translate
from tests.trainer.sidecar_store import (
    BACKBONE,
    FAST_JOB,
    LEXICON,
    NEW_DOMAIN,
    build_store,
    router_texts,
    submit,
    worker_settings,
)
from trainer.corrections.refresh_job import CHOICE_FILE
from trainer.jobs.refresh_settings import RefreshSettings
from trainer.quality.refit import fit_rows, quality_root
from trainer.routers.classifier import accuracy
from trainer.routers.features import features_from_bytes, projected
from trainer.sidecar.worker import Sidecar

# Fine-tuning options of the tests' refreshes: the tiny model learns in a few steps.
REFRESH = {k: v for k, v in FAST_JOB.items() if k != "max_epochs"} | {"max_epochs": 6}


@pytest.fixture(scope="module")
def trained_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny store whose religion domain was added (and published) by a job."""
    root = build_store(tmp_path_factory.mktemp("refresh") / "store")
    with Store.open(root, builtin_dir=None) as store:
        job = submit(store)
        assert Sidecar(store, worker_settings()).run(once=True) == 1
        assert store.registry.get_job(job.id).state == "published"
    return root


@pytest.fixture
def store(trained_root: Path, tmp_path: Path) -> Iterator[Store]:
    root = tmp_path / "store"
    shutil.copytree(trained_root, root)
    with Store.open(root, builtin_dir=None) as opened:
        yield opened


def own_sources(store: Store) -> list[str]:
    job = next(j for j in store.registry.list_jobs() if j.domain == NEW_DOMAIN)
    return [s for s, _ in pairs_from_bytes(store.storage.read_bytes(job_key(job.id, TRAIN_FILE)))]


def run_refresh(store: Store, **refresh: Any) -> Any:
    backbone = store.record("backbone", BACKBONE).manifest
    job = submit_refresh(store, NEW_DOMAIN, backbone=backbone, trigger="admin",
                         options=REFRESH | refresh.pop("options", {}), require_new=True)
    settings = worker_settings(refresh=RefreshSettings(**refresh))
    assert Sidecar(store, settings).run(once=True) == 1
    return store.registry.get_job(job.id)


def seed_estimator(store: Store) -> Path:
    """An estimator with training rows for the tiny backbone (a refit keeps the other
    sets' rows and replaces the refreshed domain's): where refits go."""
    quality = quality_root(store)
    assert quality is not None
    rows = [{"set": "generic", "chrf": float(7 * i % 60),
             "features": {name: float(i * k % 5) for k, name in enumerate(FEATURES)}}
            for i in range(8)]
    fingerprint = store.record("backbone", BACKBONE).manifest.backbone_fingerprint
    write_estimator(quality, BACKBONE, fit_rows(rows, ridge=3.0, fingerprint=fingerprint))
    return quality


# The tiny random backbone scores BLEU 0 whatever a module learns, so these two runs set
# the gate so that it must pass, and must refuse; the gate's decisions themselves are
# tested in test_refresh_selection.py, and on the real model by `make bench-corrections`.
LENIENT = {"min_held_out_gain_chrf": -100.0, "options": {"gate_margin_bleu": 100.0}}


def test_refresh_publishes_the_next_version_and_marks_the_corrections(store: Store) -> None:
    sources = fresh_sources(60, avoid=own_sources(store), seed=3)
    add(store, sources[:30], key="key-a")
    add(store, sources[30:], key="key-b")
    quality = seed_estimator(store)
    done = run_refresh(store, **LENIENT)
    assert done.state == "published", (done.error, done.scores)
    router = done.result.pop("router")
    assert done.result == {"module_version": 2, "active": True, "base_version": 1,
                           "corrections_used": 60}
    # The router was retrained with the corrected sources, activated with the module.
    assert store.registry.get_active("classifier", "router") == router["classifier_version"]
    assert set(router["check"]) == {"dev_before", "dev_after", "held_before", "held_after"}
    scores = done.scores
    assert scores["gate"] == "passed" and scores["training"]["steps"] > 0
    assert set(scores["dev"]) == {"served", "refreshed", "delta_bleu"}
    assert scores["refresh"]["held_out"] == 12 and scores["refresh"]["train"] == 48
    assert store.registry.get_active("module", NEW_DOMAIN) == 2
    manifest = store.record("module", NEW_DOMAIN, 2).manifest
    assert manifest.provenance["base_version"] == 1
    assert manifest.provenance["recipe"] == "corrections refresh"
    assert manifest.provenance["original_data"] == done.config["refresh"]["original_data"]
    # The refresh started from the served module's weights, and changed them.
    served = module_params(store.load("module", NEW_DOMAIN, 1).files)
    refreshed = module_params(store.load("module", NEW_DOMAIN, 2).files)
    assert any(not torch.equal(served[k], refreshed[k]) for k in served)
    used = store.registry.list_corrections(CorrectionFilter(domain=NEW_DOMAIN))
    assert {r.used_in for r in used} == {2}
    # The quality estimator was refit with the domain's dev rows from the new version.
    refit = Estimator.from_json(estimator_path(quality, BACKBONE).read_bytes())
    assert refit.fitted_on["refit_for"] == NEW_DOMAIN
    assert refit.fitted_on["sets"]["generic"] == 8 and refit.fitted_on["sets"][NEW_DOMAIN] > 0
    # Nothing new is left: another refresh is refused up front.
    with pytest.raises(InvalidInput, match="no new usable corrections"):
        run_refresh(store)



def test_the_next_refresh_replays_the_corrections_the_last_one_learnt(store: Store) -> None:
    """Refreshed from the served module with the original pairs replayed, a refresh would
    forget the corrections of the one before: it trains on them again, one per source,
    a source corrected anew taking the new correction."""
    sources = fresh_sources(80, avoid=own_sources(store), seed=11)
    add(store, sources[:20], key="key-a")
    add(store, sources[20:40], key="key-b")
    first = run_refresh(store, **LENIENT)
    assert first.state == "published", (first.error, first.scores)
    assert first.scores["refresh"]["replayed_corrections"] == 0
    recorrected = lambda s: f"{translate(s)} !"  # noqa: E731
    add(store, sources[:5], key="key-c", correct=recorrected)
    add(store, sources[40:60], key="key-a")
    add(store, sources[60:], key="key-b")
    second = run_refresh(store, **LENIENT)
    assert second.state == "published", (second.error, second.scores)
    assert second.scores["refresh"]["train"] + second.scores["refresh"]["held_out"] == 45
    assert second.scores["refresh"]["replayed_corrections"] == 35
    more = fresh_sources(40, avoid=own_sources(store) + sources, seed=12)
    add(store, more[:20], key="key-c")
    add(store, more[20:], key="key-d")
    capped = run_refresh(store, **LENIENT, max_original_pairs=10)
    assert capped.state == "published", (capped.error, capped.scores)
    assert capped.scores["refresh"]["replayed_corrections"] == 10

def test_corrections_routed_elsewhere_teach_the_router_the_domain_the_corrector_chose(
        store: Store) -> None:
    """Sources the router had learnt as another domain, corrected for the religion domain
    after an answer routed there or to an ensemble: the retrained router's examples hold
    them (as features) as religion, and it routes them there."""
    router_before = store.registry.get_active("classifier", "router")
    loaded = store.load("classifier", "router")
    features = HashedFeatures.from_config(loaded.manifest.config)
    assert features is not None
    stored = features_from_bytes(loaded.files[CLASSIFIER_FEATURES_FILE])
    known = {number for _, bag in stored for number in bag}
    chosen = list(dict.fromkeys(text for _, text in router_texts()))[:40]  # medical, law, it
    sources = fresh_sources(20, avoid=own_sources(store), seed=9)
    add(store, chosen[:20], key="key-a", routed="ensemble", correct=lambda s: f"{s} (fr)")
    add(store, chosen[20:], key="key-b", routed="medical", correct=lambda s: f"{s} (fr)")
    add(store, sources, key="key-c")
    done = run_refresh(store, **LENIENT)
    assert done.state == "published", (done.error, done.scores)
    version = done.result["router"]["classifier_version"]
    assert version != router_before
    assert store.registry.get_active("classifier", "router") == version
    retrained = store.load("classifier", "router", version)
    assert retrained.manifest.provenance["based_on"] == router_before
    assert retrained.manifest.provenance["refreshed_domain"] == NEW_DOMAIN
    assert retrained.manifest.config["features"] == features.as_config()
    assert CLASSIFIER_EXAMPLES_FILE not in retrained.files
    examples = features_from_bytes(retrained.files[CLASSIFIER_FEATURES_FILE])
    texts = set(chosen) - held_sources(store, done)  # the held-back ones are not trained on
    assert len(texts) >= 30
    moved = {projected(features.of(text), known) for text in texts}
    assert moved <= {bag for _, bag in stored}  # each was a stored example
    # every other stored example keeps its label and place; the corrected sources are
    # religion
    others = [e for e in stored if e[1] not in moved]
    assert examples[:len(others)] == others
    added = {projected(bag, known) for _, bag in examples[len(others):]}
    assert moved <= added
    assert {label for label, bag in examples if projected(bag, known) in moved} == {NEW_DOMAIN}
    model = retrained.files[CLASSIFIER_MODEL_FILE]
    before = store.load("classifier", "router", router_before).files[CLASSIFIER_MODEL_FILE]
    as_religion = [(NEW_DOMAIN, t) for t in sorted(texts)]
    assert accuracy(model, as_religion, features).overall >= 0.9
    assert accuracy(before, as_religion, features).overall <= 0.1


def held_sources(store: Store, done: Any) -> set[str]:
    saved = json.loads((store.storage.path(job_key(done.id, RUN_DIR)) / CHOICE_FILE)
                       .read_text())
    ids = saved["held_out"]
    return {r.source for r in store.registry.list_corrections(CorrectionFilter(ids=ids))}


def test_a_refused_refresh_stays_inactive_and_leaves_its_corrections_unused(
        store: Store) -> None:
    sources = fresh_sources(60, avoid=own_sources(store), seed=4)
    scramble = lambda s: translate(s, SCRAMBLED)  # noqa: E731
    add(store, sources[:30], key="saboteur-1", correct=scramble)
    add(store, sources[30:], key="saboteur-2", correct=scramble)
    routers = store.registry.list_versions("classifier", "router")
    done = run_refresh(store, options={"gate_margin_bleu": -100.0})
    assert done.state == "failed"
    assert done.error.startswith("refresh gate: dev BLEU ")
    assert "(it may lose at most -100)" in done.error
    assert done.scores["gate"] == "refused"
    assert done.result == {"module_version": 2, "active": False, "base_version": 1}
    assert store.registry.get_active("module", NEW_DOMAIN) == 1
    assert store.registry.list_versions("classifier", "router") == routers  # not retrained
    left = store.registry.list_corrections(CorrectionFilter(domain=NEW_DOMAIN))
    assert {r.used_in for r in left} == {None}


def test_one_key_alone_cannot_refresh_a_domain(store: Store) -> None:
    # 1,000 plausible corrections that flip one word ("god" -> "seigneur") from one key.
    flipped = LEXICON | {"god": "seigneur"}
    sources = fresh_sources(1000, avoid=own_sources(store), seed=5)
    add(store, sources, key="one-key", correct=lambda s: translate(s, flipped))
    done = run_refresh(store)
    assert done.state == "failed"
    assert "1000 left out because one API key may send at most 50%" in done.error
    assert done.scores["refresh"]["over_key_share"] == 1000
    assert done.result is None or not done.result.get("active")
    assert store.registry.list_versions("module", NEW_DOMAIN) == [1]


def test_anonymous_corrections_train_nothing_until_approved(store: Store) -> None:
    sources = fresh_sources(20, avoid=own_sources(store), seed=6)
    add(store, sources, key=None)
    assert due_refreshes(store, BACKBONE, min_new=1) == []
    with pytest.raises(InvalidInput, match="pending ones need"):
        run_refresh(store)
    store.registry.review_corrections(CorrectionFilter(domain=NEW_DOMAIN), approve=True)
    assert due_refreshes(store, BACKBONE, min_new=20) == [NEW_DOMAIN]


def test_enough_new_corrections_queue_a_refresh_by_themselves(store: Store) -> None:
    sources = fresh_sources(40, avoid=own_sources(store), seed=7)
    add(store, sources[:20], key="key-a")
    settings = worker_settings(refresh=RefreshSettings(min_new_corrections=41))
    assert Sidecar(store, settings).run(once=True) == 0  # 40 < 41: nothing to do
    add(store, sources[20:21], key="key-b")
    settings = worker_settings(refresh=RefreshSettings(min_new_corrections=21))
    assert Sidecar(store, settings).run(once=True) == 1
    job = max(store.registry.list_jobs(), key=lambda j: j.created_at)
    assert job.config["refresh"]["trigger"] == "corrections"
    assert job.config["refresh"]["original_data"]["job"]
    assert job.state in ("published", "failed") and job.scores["refresh"]["train"] > 0
    # However it ended, the same corrections do not queue it again.
    assert due_refreshes(store, BACKBONE, min_new=1) == []


def test_a_shipped_module_is_refreshed_with_the_data_its_provenance_names(
        store: Store, tmp_path: Path) -> None:
    """A shipped module names its data ("shared/data en-fr/domains/x/train"); the sidecar
    reads it under NMT_TRAINER__REFRESH__DATA_DIR, and says so when that is not set."""
    pairs = pairs_from_bytes(store.storage.read_bytes(job_key(
        next(j for j in store.registry.list_jobs() if j.domain == NEW_DOMAIN).id, TRAIN_FILE)))
    folder = tmp_path / "data" / "en-fr" / "domains" / NEW_DOMAIN
    folder.mkdir(parents=True)
    for split, chosen in (("train", pairs[8:]), ("dev", pairs[:8])):
        (folder / f"{split}.en").write_text("".join(f"{s}\n" for s, _ in chosen))
        (folder / f"{split}.fr").write_text("".join(f"{t}\n" for _, t in chosen))
    served = store.load("module", NEW_DOMAIN, 1)
    shipped = store.publish("module", NEW_DOMAIN, dict(served.files),
                            config=served.manifest.config,
                            backbone_fingerprint=served.manifest.backbone_fingerprint,
                            provenance={"data": f"shared/data en-fr/domains/{NEW_DOMAIN}/train"})
    store.activate("module", NEW_DOMAIN, shipped.version)
    sources = fresh_sources(20, avoid=[s for s, _ in pairs], seed=8)
    add(store, sources[:10], key="key-a")
    add(store, sources[10:], key="key-b")
    unset = run_refresh(store, **LENIENT)
    assert unset.state == "failed"
    assert "set NMT_TRAINER__REFRESH__DATA_DIR" in unset.error
    done = run_refresh(store, **LENIENT, data_dir=tmp_path / "data")
    assert done.state == "published", (done.error, done.scores)
    assert done.config["refresh"]["original_data"] == {"path": f"en-fr/domains/{NEW_DOMAIN}"}
    assert done.scores["refresh"]["contradict_own_data"] == 0
    refreshed = store.record("module", NEW_DOMAIN, done.result["module_version"]).manifest
    assert refreshed.provenance["original_data"] == {"path": f"en-fr/domains/{NEW_DOMAIN}"}
