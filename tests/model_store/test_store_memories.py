"""Translation memories in the registry, on SQLite and PostgreSQL: memories, pairs, the
change feed replicas follow, all-or-nothing imports, import job rows."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from model_store import ConflictError, NewPair, NotFoundError, Registry, Store
from model_store.transfer import copy_registry


def pair(source: str, target: str, **extra: object) -> NewPair:
    key = hashlib.sha256(source.encode()).hexdigest()
    return NewPair(source=source, target=target, source_key=key, **extra)  # type: ignore[arg-type]


def test_memories_are_named_per_backbone_and_a_domain_has_one(store: Store) -> None:
    registry = store.registry
    acme = registry.create_memory("acme", backbone="en-fr", source_lang="en", target_lang="fr")
    registry.create_memory("acme", backbone="fr-en")  # another direction: another memory
    registry.create_memory("medical", backbone="en-fr", domain="medical")
    with pytest.raises(ConflictError):
        registry.create_memory("acme", backbone="en-fr")
    with pytest.raises(ConflictError):
        registry.create_memory("other", backbone="en-fr", domain="medical")

    found = registry.find_memory("acme", backbone="en-fr")
    assert found is not None and found.id == acme.id and found.owner == "shared"
    assert [m.name for m in registry.list_memories(backbone="en-fr")] == ["acme", "medical"]
    assert len(registry.list_memories()) == 3


def test_pairs_are_added_replaced_and_deleted_and_every_change_is_in_the_feed(
        store: Store) -> None:
    registry = store.registry
    memory = registry.create_memory("acme", backbone="b")
    start = registry.latest_memory_change()
    first = registry.add_pair(memory.id, pair("Hello.", "Bonjour.", tuid="t1"))
    again = registry.add_pair(memory.id, pair("Hello!", "Salut !", tuid="t1"), replace="tuid")
    assert registry.get_pair(memory.id, first.id) is None  # replaced by tuid
    changed = registry.replace_pair(memory.id, again.id, pair("Hello!", "Bonjour !"))
    assert changed is not None and changed.target == "Bonjour !"
    assert registry.replace_pair(memory.id, 10**6, pair("x", "y")) is None
    extra = registry.add_pair(memory.id, pair("Bye.", "Au revoir.", attributes={"notes": ["n"]}))
    assert registry.delete_pair(memory.id, extra.id)
    assert not registry.delete_pair(memory.id, extra.id)

    changes = registry.memory_changes_since(start)
    assert [c.id for c in changes] == sorted(c.id for c in changes)
    assert [(c.pair_id, c.action) for c in changes] == [
        (first.id, "pair"), (first.id, "pair"), (again.id, "pair"), (again.id, "pair"),
        (extra.id, "pair"), (extra.id, "pair")]
    assert [p.target for p in registry.pairs_after(memory.id)] == ["Bonjour !"]
    listed = registry.get_memory(memory.id)
    assert listed is not None and listed.pairs == 1
    with pytest.raises(NotFoundError):
        registry.add_pair(10**6, pair("a", "b"))


def test_an_import_lands_whole_or_not_at_all(store: Store) -> None:
    registry = store.registry
    memory = registry.create_memory("acme", backbone="b")
    registry.add_pair(memory.id, pair("Old.", "Ancien."))

    def failing() -> object:
        yield pair("One.", "Un.")
        raise ValueError("the file ended midway")

    with pytest.raises(ValueError):
        registry.import_pairs(memory.id, failing())  # type: ignore[arg-type]
    assert [p.source for p in registry.pairs_after(memory.id)] == ["Old."]

    before = registry.latest_memory_change()
    count = registry.import_pairs(memory.id, (pair(f"S{i}.", f"T{i}.",
                                                    attributes={"props": {"x": str(i)}})
                                              for i in range(2500)), replace_all=True)
    assert count == 2500
    pairs = registry.pairs_after(memory.id, limit=3)
    assert [p.source for p in pairs] == ["S0.", "S1.", "S2."]
    assert pairs[1].attributes == {"props": {"x": "1"}} and pairs[1].origin == "api"
    assert [c.action for c in registry.memory_changes_since(before)] == ["reload"]


def test_deleting_a_memory_removes_its_pairs_and_is_announced(store: Store) -> None:
    registry = store.registry
    memory = registry.create_memory("acme", backbone="b")
    kept = registry.create_memory("kept", backbone="b")
    registry.import_pairs(memory.id, [pair("A.", "A.")])
    registry.import_pairs(kept.id, [pair("B.", "B.")])
    job = registry.create_memory_import(memory.id, format="tmx", mode="append", filename="a")
    before = registry.latest_memory_change()
    assert registry.delete_memory(memory.id)
    assert not registry.delete_memory(memory.id)
    assert registry.get_memory(memory.id) is None
    assert registry.pairs_after(memory.id) == []
    assert registry.get_memory_import(job.id) is None
    assert [p.source for p in registry.pairs_after(kept.id)] == ["B."]
    assert [(c.memory_id, c.action) for c in registry.memory_changes_since(before)] == [
        (memory.id, "delete")]


def test_import_job_rows_keep_progress_and_report(store: Store) -> None:
    registry = store.registry
    memory = registry.create_memory("acme", backbone="b")
    job = registry.create_memory_import(memory.id, format="tmx", mode="append",
                                        filename="acme.tmx")
    assert job.state == "queued" and job.progress == 0.0
    registry.update_memory_import(job.id, state="running", progress=1.7)
    running = registry.get_memory_import(job.id)
    assert running is not None and running.state == "running" and running.progress == 1.0
    registry.update_memory_import(job.id, state="done", report={"pairs": 3, "skipped": {}})
    done = registry.get_memory_import(job.id)
    assert done is not None and done.report == {"pairs": 3, "skipped": {}}
    assert registry.get_memory_import("nope") is None


def test_claims_keep_an_owners_bound_when_replicas_claim_at_once(
        store: Store, registry_url: str) -> None:
    """Replica B (another registry on the same database) claims when replica A's claim
    and another row fill the owner's places: B is refused and writes no row. Claims one
    after another fill the bound exactly; so do eight threads claiming at once (one
    claimant at a time counts and writes, so overlapping claims neither pass the bound nor
    all give up), and a refused claim leaves no row."""
    registry = store.registry
    memory = registry.create_memory("acme", backbone="b")
    first = registry.claim_memory_import(memory.id, owner="shared", limit=2, format="tmx",
                                         mode="append", filename="1.tmx")
    assert first is not None
    racing = registry.create_memory_import(memory.id, format="tmx", mode="append",
                                           filename="a.tmx")  # another replica's
    other = Registry(registry_url)
    try:
        assert other.claim_memory_import(memory.id, owner="shared", limit=2, format="tmx",
                                         mode="append", filename="b.tmx") is None
    finally:
        other.close()
    assert [job.id for job in registry.unfinished_memory_imports("shared")] == [
        first.id, racing.id]
    for job in (first, racing):
        registry.update_memory_import(job.id, state="done")

    def claim(number: int) -> str | None:
        job = registry.claim_memory_import(memory.id, owner="shared", limit=3,
                                           format="tmx", mode="append",
                                           filename=f"{number}.tmx")
        return None if job is None else job.id

    serial = [claim(n) for n in range(4)]
    assert all(serial[:3]) and serial[3] is None
    for job_id in serial[:3]:
        registry.update_memory_import(str(job_id), state="done")
    with ThreadPoolExecutor(8) as pool:
        won = [job_id for job_id in pool.map(claim, range(8)) if job_id is not None]
    assert len(won) == 3
    assert sorted(job.id for job in registry.unfinished_memory_imports("shared")) == \
        sorted(won)


def test_a_copied_registry_keeps_its_memories_and_their_ids_go_on(
        tmp_path: Path, registry_url: str) -> None:
    source_url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    source = Registry(source_url)
    memory = source.create_memory("acme", backbone="b", source_lang="en", target_lang="fr")
    first = source.add_pair(memory.id, pair("One.", "Un."))
    source.close()
    copied = copy_registry(source_url, registry_url)
    assert (copied["memories"], copied["memory_pairs"], copied["memory_changes"]) == (1, 1, 2)
    target = Registry(registry_url)
    try:
        changes = target.latest_memory_change()
        second = target.add_pair(memory.id, pair("Two.", "Deux."))  # no id collision
        assert second.id > first.id and target.latest_memory_change() > changes
        assert target.create_memory("other", backbone="b").id > memory.id
    finally:
        target.close()


def test_a_memory_is_renamed_unless_its_backbone_has_the_name(store: Store) -> None:
    registry = store.registry
    acme = registry.create_memory("acme", backbone="b", domain="law")
    registry.create_memory("taken", backbone="b")
    registry.create_memory("free", backbone="other")  # another direction's name is free
    registry.add_pair(acme.id, pair("One.", "Un."))
    before = registry.latest_memory_change()
    renamed = registry.rename_memory(acme.id, "free")
    assert (renamed.id, renamed.name, renamed.domain, renamed.pairs) == (acme.id, "free",
                                                                         "law", 1)
    assert registry.find_memory("acme", backbone="b") is None
    assert [(c.memory_id, c.pair_id, c.action)
            for c in registry.memory_changes_since(before)] == [(acme.id, None, "memory")]
    with pytest.raises(ConflictError):
        registry.rename_memory(acme.id, "taken")
    same = registry.latest_memory_change()
    assert registry.rename_memory(acme.id, "free").name == "free"  # no change: no entry
    assert registry.latest_memory_change() == same
    with pytest.raises(NotFoundError):
        registry.rename_memory(999, "other")


def test_the_feed_is_pruned_to_its_last_changes_and_says_how_far(store: Store) -> None:
    registry = store.registry
    memory = registry.create_memory("acme", backbone="b")
    for number in range(6):
        registry.add_pair(memory.id, pair(f"S{number}.", f"T{number}."))
    changes = registry.memory_changes_since(0)
    assert len(changes) == 7
    assert registry.prune_memory_changes(keep=10) == 0  # fewer than kept: nothing goes
    assert registry.prune_memory_changes(keep=2) == 5
    left = registry.memory_changes_since(0)
    assert [c.id for c in left[:2]] == [c.id for c in changes[-2:]]
    marker = left[-1]
    assert (marker.action, marker.pruned_through) == ("pruned", changes[-3].id)
    assert left[0].pruned_through is None
    assert registry.prune_memory_changes(keep=2) == 0  # again, no new change: nothing
    assert registry.memory_changes_since(0) == left
    registry.add_pair(memory.id, pair("S6.", "T6."))
    assert registry.prune_memory_changes(keep=1) == 3  # the older marker goes too
    left = registry.memory_changes_since(0)
    assert [c.action for c in left] == ["pair", "pruned"]
    assert left[-1].pruned_through == left[0].id - 1
