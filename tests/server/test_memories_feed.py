"""Replicas following the memories' change feed (server/memories/book.py), on SQLite and
PostgreSQL: two books over one registry, as two servers hold them. A rename reaches the
other replica without rereading the memory's pairs; a replica that kept up goes on from
the feed after it is pruned, one that fell behind the pruning reloads its memories whole
and misses nothing; pruning again removes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from model_store import NewPair, Registry
from server.core.settings import MemorySettings
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
