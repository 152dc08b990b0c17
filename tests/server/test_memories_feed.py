"""Replicas following the memories' change feed (server/memories/book.py), on SQLite and
PostgreSQL: two books over one registry, as two servers hold them. A rename reaches the
other replica without rereading the memory's pairs; a replica that kept up goes on from
the feed after it is pruned, one that fell behind the pruning reloads its memories whole
and misses nothing; pruning again removes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from model_store import NewPair, Registry
from server.core.memory_settings import MemorySettings
from server.memories.book import MemoryBook, MemoryChoice
from server.memories.normalisation import source_key

BACKBONE = "en-fr"


def pair(source: str, target: str) -> NewPair:
    return NewPair(source=source, target=target, source_key=source_key(source))


@pytest.fixture
def registry(registry_url: str) -> Iterator[Registry]:
    opened = Registry(registry_url)
    try:
        yield opened
    finally:
        opened.close()


def book(registry: Registry, keep: int = 3) -> MemoryBook:
    return MemoryBook(registry, MemorySettings(feed_keep=keep), backbone=BACKBONE)


def answer(book: MemoryBook, name: str, text: str) -> str | None:
    memories = book.in_play(MemoryChoice(names=(name,)), None)
    found = book.lookup(memories)(text)
    return None if found is None else found.entry.target


def test_a_rename_reaches_the_other_replica_with_the_pairs_it_had(
        registry: Registry) -> None:
    memory = registry.create_memory("acme", backbone=BACKBONE)
    registry.add_pair(memory.id, pair("Open the file.", "Ouvrez le fichier."))
    other = book(registry)
    index = other.view.by_name["acme"].index
    registry.rename_memory(memory.id, "acme-legal")
    assert other.sync() == 1
    assert "acme" not in other.view.by_name
    assert other.view.by_name["acme-legal"].index is index  # not reloaded
    assert answer(other, "acme-legal", "Open the file.") == "Ouvrez le fichier."


def test_replicas_behind_the_pruned_feed_reload_and_the_others_go_on(
        registry: Registry) -> None:
    memory = registry.create_memory("acme", backbone=BACKBONE)
    current, behind = book(registry), book(registry)
    for number in range(5):
        registry.add_pair(memory.id, pair(f"Sentence {number}.", f"Phrase {number}."))
    current.sync()
    view = current.view
    removed = registry.add_pair(memory.id, pair("Gone soon.", "Bientôt partie."))
    registry.delete_pair(memory.id, removed.id)
    registry.add_pair(memory.id, pair("Last one.", "La dernière."))
    assert current.prune() > 0  # the feed keeps its last 3 changes
    assert current.prune() == 0

    assert current.sync() == 4  # the three kept and the "pruned" change: read on
    assert current.view is view  # no reload: it had read everything that was pruned
    assert current.seen == registry.latest_memory_change()

    assert behind.seen < registry.memory_changes_since(0)[0].id - 1
    assert behind.sync() == 1  # one reload, whatever it had missed
    assert behind.seen == registry.latest_memory_change()
    for replica in (current, behind):
        assert answer(replica, "acme", "Sentence 0.") == "Phrase 0."
        assert answer(replica, "acme", "Last one.") == "La dernière."
        assert answer(replica, "acme", "Gone soon.") is None
    registry.add_pair(memory.id, pair("After.", "Après."))
    assert behind.sync() == 1 and answer(behind, "acme", "After.") == "Après."


def test_a_memorys_version_grows_with_each_change_to_its_pairs_and_outlives_pruning(
        registry: Registry) -> None:
    acme = registry.create_memory("acme", backbone=BACKBONE)
    other = registry.create_memory("other", backbone=BACKBONE)
    assert 0 < acme.version < other.version

    def version(memory_id: int) -> int:
        found = registry.get_memory(memory_id)
        assert found is not None
        return found.version

    seen = [version(acme.id)]
    added = registry.add_pair(acme.id, pair("Open the file.", "Ouvrez le fichier."))
    seen.append(version(acme.id))
    registry.replace_pair(acme.id, added.id, pair("Open the file.", "Ouvrez ce fichier."))
    seen.append(version(acme.id))
    registry.import_pairs(acme.id, [pair("Close it.", "Fermez-le.")])
    seen.append(version(acme.id))
    registry.delete_pair(acme.id, added.id)
    seen.append(version(acme.id))
    assert seen[0] == acme.version and seen == sorted(set(seen))  # grows at every change
    assert seen[-1] == registry.latest_memory_change()
    registry.rename_memory(acme.id, "acme-legal")
    assert version(acme.id) == seen[-1]  # a rename leaves the pairs as they were
    assert version(other.id) == other.version  # acme's changes are not other's

    for number in range(5):
        registry.add_pair(acme.id, pair(f"Sentence {number}.", f"Phrase {number}."))
    last = version(acme.id)
    assert registry.prune_memory_changes(keep=2) > 0
    assert other.version < registry.memory_changes_since(0)[1].id  # pruned all around it
    assert [(m.name, m.version) for m in registry.list_memories(backbone=BACKBONE)] == [
        ("acme-legal", last), ("other", other.version)]
    assert registry.prune_memory_changes(keep=2) == 0  # what it keeps stays kept

    registry.delete_memory(other.id)  # a deleted memory's version goes at the next pruning
    for number in range(3):
        registry.add_pair(acme.id, pair(f"More {number}.", f"Encore {number}."))
    assert registry.prune_memory_changes(keep=2) > 0
    assert other.version not in {c.id for c in registry.memory_changes_since(0)}
    assert version(acme.id) == registry.latest_memory_change() - 1  # before the mark


def test_a_replicas_matches_say_the_version_of_the_memory_they_came_from(
        registry: Registry) -> None:
    memory = registry.create_memory("acme", backbone=BACKBONE)
    registry.add_pair(memory.id, pair("Open the file.", "Ouvrez le fichier."))
    replica = book(registry)

    def registered() -> int:
        found = registry.get_memory(memory.id)
        assert found is not None
        return found.version

    def exact_version() -> int:
        memories = replica.in_play(MemoryChoice(names=(memory.name,)), None)
        found = replica.lookup(memories)("Open the file.")
        assert found is not None
        return found.version

    assert exact_version() == registered()
    registry.add_pair(memory.id, pair("Open the window.", "Ouvrez la fenêtre."))
    assert exact_version() < registered()  # the state it answers from, not yet the new one
    replica.sync()
    assert exact_version() == registered()
    [fuzzy] = replica.fuzzy(replica.in_play(MemoryChoice(names=("acme",)), None),
                            "Open the windows.")
    assert fuzzy.version == registered()
    registry.rename_memory(memory.id, "acme-legal")
    registry.import_pairs(memory.id, [pair("Open the file.", "Ouvre le fichier.")],
                          replace_all=True)  # a reload, whole
    replica.sync()
    memory = replica.view.by_name["acme-legal"].record
    assert exact_version() == registered() == registry.latest_memory_change()
