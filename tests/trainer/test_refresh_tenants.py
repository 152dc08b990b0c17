"""A tenant's corrections of a shared domain are the tenant's: stored and trainable for
nothing shared. The refresh of the shared domain neither counts them (no refresh is due
from them) nor chooses them to train on; once the domain is the tenant's own, they
count like any."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from model_store import Store
from server.core.errors import InvalidInput
from server.serving.refresh_jobs import due_refreshes, submit_refresh
from tests.trainer.refresh_fixtures import add, fresh_sources
from tests.trainer.sidecar_store import BACKBONE, build_store
from trainer.corrections.correction_set import CorrectionSet
from trainer.corrections.refresh_job import choose_corrections, earlier_corrections
from trainer.jobs.refresh_settings import RefreshSettings

SHARED = "medical"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    root = build_store(tmp_path / "store", examples=False, router=False)
    opened = Store.open(root, builtin_dir=None)
    opened.registry.create_tenant("acme")
    for key in ("acme-1", "acme-2"):
        opened.registry.add_tenant_key(key, "acme", "member")
    return opened


def test_a_tenants_corrections_never_train_a_shared_domain(store: Store,
                                                           tmp_path: Path) -> None:
    with store:
        sources = fresh_sources(40, avoid=[], seed=3)
        theirs = add(store, sources[:10], key="acme-1", domain=SHARED) \
            + add(store, sources[10:20], key="acme-2", domain=SHARED)
        assert due_refreshes(store, BACKBONE, min_new=1) == []
        backbone = store.record("backbone", BACKBONE).manifest
        with pytest.raises(InvalidInput, match="no new usable corrections"):
            submit_refresh(store, SHARED, backbone=backbone, trigger="admin",
                           require_new=True)
        ours = add(store, sources[20:30], key="key-a", domain=SHARED) \
            + add(store, sources[30:], key="key-b", domain=SHARED)
        assert due_refreshes(store, BACKBONE, min_new=20) == [SHARED]
        chosen = choose_corrections(store, SHARED, BACKBONE, tmp_path / "run", dev=[],
                                    own=[], settings=RefreshSettings(), seed=1)
        picked = {r.id for r in chosen.train + chosen.held_out + chosen.merged
                  + chosen.over_share}
        assert picked == {r.id for r in ours}
        assert not picked & {r.id for r in theirs}
        # the earlier-corrections replay of a shared domain skips them too
        store.registry.mark_corrections_used([r.id for r in theirs + ours], 2)
        replayed = earlier_corrections(store, SHARED, BACKBONE, chosen=CorrectionSet(),
                                       dev=[], limit=100, rng=random.Random(1))
        assert {s for s, _ in replayed} == set(sources[20:])
        # a domain given to the tenant counts its keys' corrections like any
        add(store, fresh_sources(5, avoid=sources, seed=4), key="acme-1", domain="law")
        assert due_refreshes(store, BACKBONE, min_new=5) == []
        store.registry.claim_resource("domain", "law", "acme")
        assert due_refreshes(store, BACKBONE, min_new=5) == ["law"]
