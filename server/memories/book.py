"""A direction's translation memories in memory, in step with the registry.

Every replica keeps the pairs of its directions' memories indexed (index.py) and follows
the registry's change feed (`memory_changes`): `sync` rereads exactly the pairs and
memories that changed since the last change it applied; `keep_fresh` runs it every
`poll_interval_s` (NMT_MEMORIES__POLL_INTERVAL_S) and at once when PostgreSQL announces a
change, so a pair written through one replica answers on every other within a second.
Writes made through this replica sync before their answer.

The feed keeps only its last `feed_keep` changes (NMT_MEMORIES__FEED_KEEP): every replica
prunes it every PRUNE_EVERY_S (pruning is idempotent, so several replicas may), and a
replica that finds the feed pruned past what it had read (it was stopped, or fell that
far behind) reloads its memories whole instead of missing changes.

Each memory carries its version (model_store/memory_rows.py): the id of the latest
change to its pairs this replica applied, so a match says which state of the memory
answered.

A request's memories (`in_play`): those it names (`"memory": "acme"` or a list), then
the memory of the domain it was routed to; `"memory": false`: none. Exact matches come
from the first memory in that order that holds the source; fuzzy matches from all,
best first.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from model_store import MemoryRecord, PairRecord, Registry
from model_store.memory_rows import CONTENT_CHANGES
from model_store.notify import ChangeWaiter, SleepingWaiter
from server.core.errors import NotFound
from server.core.memory_settings import MemorySettings
from server.core.tenancy import current_scope
from server.memories.calibrated_gates import CalibratedGates
from server.memories.document_matches import Hit, Lookup
from server.memories.index import Entry, PairIndex, Scored, entry
from server.memories.normalisation import normalised

log = logging.getLogger(__name__)
PAGE = 10_000
PRUNE_EVERY_S = 300.0


@dataclass(frozen=True)
class MemoryChoice:
    """What a request asked for: `names` it named, or `off` ("memory": false)."""

    names: tuple[str, ...] = ()
    off: bool = False
    field: str = "memory"


@dataclass(frozen=True)
class MemoryMatch:
    score: float  # 100: exact
    memory: str
    source: str
    target: str
    tuid: str | None
    origin: str
    pair_id: int
    version: int  # the memory's version that answered


@dataclass(eq=False)
class Loaded:
    record: MemoryRecord
    index: PairIndex
    # its version in this replica: raised in place, as its index changes in place, when a
    # change to its pairs is applied
    version: int


@dataclass(frozen=True)
class View:
    """The memories at one moment: replaced whole when one is added, reloaded, removed."""

    by_id: dict[int, Loaded] = field(default_factory=dict)

    @cached_property
    def by_name(self) -> dict[str, Loaded]:
        return {m.record.name: m for m in self.by_id.values()}

    def of_domain(self, domain: str) -> Loaded | None:
        return next((m for m in self.by_id.values() if m.record.domain == domain), None)


def as_entry(pair: PairRecord) -> Entry:
    return entry(pair.id, pair.source, pair.target, tuid=pair.tuid, origin=pair.origin,
                 key=pair.source_key)


def as_match(memory: Loaded, found: Scored) -> MemoryMatch:
    e = found.entry
    return MemoryMatch(found.score, memory.record.name, e.source, e.target, e.tuid,
                       e.origin, e.id, memory.version)


class MemoryBook:
    def __init__(self, registry: Registry, settings: MemorySettings, *,
                 backbone: str) -> None:
        self.registry = registry
        self.settings = settings
        self.backbone = backbone
        # each memory's gate per module, calibrated from its own pairs (retrieval)
        self.gates = CalibratedGates(settings.retrieval)
        self.view = View()
        self.seen = 0  # the last change applied
        self._syncing = threading.Lock()
        self.reload_all()

    # -- keeping in step -----------------------------------------------------------------
    def reload_all(self) -> None:
        with self._syncing:
            self._reload_all()

    def _reload_all(self) -> None:
        seen = self.registry.latest_memory_change()
        loaded = {r.id: self._load(r) for r in
                  self.registry.list_memories(backbone=self.backbone)}
        self.view = View(loaded)
        self.seen = seen

    def sync(self) -> int:
        """Apply the registry's changes since the last one applied; how many (a reload
        after the feed was pruned past them counts as one)."""
        with self._syncing:
            applied = 0
            while changes := self.registry.memory_changes_since(self.seen, limit=PAGE):
                if any((c.pruned_through or 0) > self.seen for c in changes):
                    log.info("the memories' change feed was pruned past change %d: "
                             "reloading every memory", self.seen)
                    self._reload_all()
                    applied += 1
                    continue
                whole = {c.memory_id for c in changes
                         if c.pair_id is None and c.action != "memory"}
                renamed = {c.memory_id for c in changes if c.action == "memory"} - whole
                pairs: dict[int, set[int]] = defaultdict(set)
                versions: dict[int, int] = {}
                for change in changes:
                    if (change.action == "pair" and change.pair_id is not None
                            and change.memory_id not in whole):
                        pairs[change.memory_id].add(change.pair_id)
                    if change.action in CONTENT_CHANGES:
                        versions[change.memory_id] = change.id  # in id order: the last
                self._reload(whole)
                self._reread_records(renamed)
                self._reread(pairs)
                for memory_id, version in versions.items():
                    loaded = self.view.by_id.get(memory_id)
                    if loaded is not None and loaded.version < version:
                        loaded.version = version
                self.seen = changes[-1].id
                applied += len(changes)
            return applied

    def prune(self) -> int:
        """Prune the registry's change feed to its last `feed_keep` changes."""
        return self.registry.prune_memory_changes(keep=self.settings.feed_keep)

    async def keep_fresh(self, changes: ChangeWaiter | None = None) -> None:
        """`sync` on a worker thread whenever a change is announced, or every poll
        interval, until cancelled; a failed read is logged and retried."""
        changes = changes or SleepingWaiter()
        next_prune = time.monotonic()
        while True:
            await changes.wait(self.settings.poll_interval_s)
            try:
                await asyncio.to_thread(self.sync)
                if time.monotonic() >= next_prune:
                    next_prune = time.monotonic() + PRUNE_EVERY_S
                    await asyncio.to_thread(self.prune)
            except Exception:
                log.exception("reading or pruning the memories' change feed failed")

    def _load(self, record: MemoryRecord) -> Loaded:
        index = PairIndex()
        after = 0
        while page := self.registry.pairs_after(record.id, after, limit=PAGE):
            for pair in page:
                index.put(as_entry(pair))
            after = page[-1].id
        return Loaded(record, index, record.version)

    def _reload(self, memory_ids: set[int]) -> None:
        if not memory_ids:
            return
        by_id = dict(self.view.by_id)
        for memory_id in memory_ids:
            record = self.registry.get_memory(memory_id)
            if record is None or record.backbone != self.backbone:
                by_id.pop(memory_id, None)
            else:
                by_id[memory_id] = self._load(record)
        self.view = View(by_id)

    def _reread_records(self, memory_ids: set[int]) -> None:
        """Memories renamed: their records anew, their indexes as they are."""
        if not memory_ids:
            return
        by_id = dict(self.view.by_id)
        for memory_id in memory_ids & set(by_id):
            record = self.registry.get_memory(memory_id)
            if record is None or record.backbone != self.backbone:
                by_id.pop(memory_id, None)
            else:
                kept = by_id[memory_id]
                by_id[memory_id] = Loaded(record, kept.index, kept.version)
        self.view = View(by_id)

    def _reread(self, pairs: dict[int, set[int]]) -> None:
        wanted = {i for memory_id, ids in pairs.items() if memory_id in self.view.by_id
                  for i in ids}
        found = {p.id: p for p in self.registry.pairs_by_id(wanted)}
        for memory_id, ids in pairs.items():
            loaded = self.view.by_id.get(memory_id)
            if loaded is None:
                continue
            for pair_id in ids:
                pair = found.get(pair_id)
                if pair is None or pair.memory_id != memory_id:
                    loaded.index.remove(pair_id)
                else:
                    loaded.index.put(as_entry(pair))

    # -- a request's memories -------------------------------------------------------------
    def in_play(self, choice: MemoryChoice, domain: str | None) -> list[Loaded]:
        """The memories a request uses, in the order exact matches are looked up; 404
        for a name this direction has no memory of."""
        if choice.off:
            return []
        view = self.view
        named = current_scope().visible("memory", view.by_name)  # others' do not exist
        chosen: list[Loaded] = []
        for name in choice.names:
            if name not in named:
                known = ", ".join(sorted(named)) or "none"
                raise NotFound(f"unknown memory {name[:64]!r}; memories of this direction: "
                               f"{known}", field=choice.field)
            chosen.append(named[name])
        own = view.of_domain(domain) if domain is not None else None
        if own is not None and own not in chosen:
            chosen.append(own)
        return [m for m in chosen if len(m.index)]

    @staticmethod
    def lookup(memories: Sequence[Loaded]) -> Lookup:
        def find(text: str) -> Hit | None:
            if not normalised(text):
                return None
            for memory in memories:
                found = memory.index.exact(text)
                if found is not None:
                    return Hit(memory.record.name, found, memory.version)
            return None
        return find

    def fuzzy(self, memories: Sequence[Loaded], text: str) -> list[MemoryMatch]:
        """Fuzzy matches of `text` in `memories`, best first (at most max_matches)."""
        limit = self.settings.max_matches
        if not memories or limit == 0 or len(text) > self.settings.max_fuzzy_chars:
            return []
        found = [as_match(m, scored) for m in memories
                 for scored in m.index.fuzzy(text, threshold=self.settings.fuzzy_threshold,
                                             limit=limit)]
        found.sort(key=lambda match: -match.score)  # stable: memory order among ties
        return found[:limit]

    @staticmethod
    def neighbours(memories: Sequence[Loaded], text: str, *, min_score: float,
                   limit: int) -> list[tuple[Loaded, Entry]]:
        """The pairs of `memories` whose sources are most like `text` (at least
        `min_score`), best first, each with its memory: what retrieval during decoding
        forces through the model."""
        found = [(m, scored) for m in memories
                 for scored in m.index.fuzzy(text, threshold=min_score, limit=limit)]
        found.sort(key=lambda pair: -pair[1].score)
        return [(m, scored.entry) for m, scored in found[:limit]]
