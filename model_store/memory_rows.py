"""Registry rows of translation memories (tables `memories`, `memory_pairs`,
`memory_changes`): a mixin of `Registry`.

The server normalises and checks pairs before they are stored (server/memories); here
they are rows. Every write records what it changed in `memory_changes`, in a transaction
that one writer at a time holds (SQLite's BEGIN IMMEDIATE; on PostgreSQL an advisory lock
of the memories), so change ids grow in commit order and a replica that follows the feed
(`memory_changes_since`) never skips one; PostgreSQL also announces each change (NOTIFY
on `MEMORY_CHANNEL`). An import replaces or extends a memory in ONE transaction: readers
see the memory before it or after it, never half of it.

The feed is pruned to its last changes (`prune_memory_changes`); each pruning that removes
some leaves a "pruned" change naming the last id removed, so a replica that had not read
that far learns it missed changes and reloads its memories whole (server/memories/book.py).

A memory's version is the id of its latest change to its pairs ("pair" or "reload": its
creation, every pair written or removed, every import; not a rename): it grows with
every change to its content, it orders the states of all memories, and a replica knows
it from the feed it follows. Pruning keeps each memory's latest such change, so the
version outlives the changes pruned before it.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import Any, Literal

from sqlalchemy import Connection, Select, func, insert, select, update
from sqlalchemy import delete as sql_delete
from sqlalchemy.exc import IntegrityError

from .errors import ConflictError, NotFoundError
from .tables import memories, memory_changes, memory_gates, memory_imports, memory_pairs

MEMORY_CHANNEL = "nmt_memories"
MEMORY_LOCK_KEY = 0x6E6D_746D_656D_6F72  # "nmtmemor"
INSERT_CHUNK = 1000
PRUNED = 0  # the memory id of "pruned" changes (memory ids start at 1)
CONTENT_CHANGES = ("pair", "reload")  # the changes that give a memory its version
Replace = Literal["tuid", "source"]


@dataclass(frozen=True)
class MemoryRecord:
    id: int
    name: str
    backbone: str  # the direction it belongs to
    domain: str | None  # the domain whose requests use it (None: named per request)
    owner: str
    source_lang: str
    target_lang: str
    created_at: datetime
    updated_at: datetime
    pairs: int = 0
    version: int = 0  # the id of its latest change to its pairs (see the module's comment)


@dataclass(frozen=True)
class NewPair:
    source: str
    target: str
    source_key: str  # the normalised source's hash (exact matching)
    tuid: str | None = None
    origin: str = "api"  # "import", "api" or "correction"
    attributes: dict[str, Any] | None = None  # a TMX unit's props, notes, attributes


@dataclass(frozen=True)
class PairRecord:
    id: int
    memory_id: int
    tuid: str | None
    source: str
    target: str
    source_key: str
    origin: str
    attributes: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class MemoryChange:
    id: int
    memory_id: int
    pair_id: int | None  # None: the whole memory ("reload", "memory", "delete")
    # "pair" (written or removed: reread it), "reload" (reread the memory and its pairs),
    # "memory" (renamed: reread the memory, its pairs are as they were), "delete", and
    # "pruned" (memory_id PRUNED; pair_id: the last change id removed from the feed)
    action: str

    @property
    def pruned_through(self) -> int | None:
        """For a "pruned" change, the last change id the feed no longer holds."""
        return self.pair_id if self.action == "pruned" else None


def _now() -> datetime:
    return datetime.now(UTC)


class MemoryRows:
    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    @contextmanager
    def _memory_write(self) -> Iterator[Connection]:
        with self._write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(MEMORY_LOCK_KEY)))
            yield conn

    # -- memories ------------------------------------------------------------------------
    def create_memory(self, name: str, *, backbone: str, domain: str | None = None,
                      owner: str = "shared", source_lang: str = "",
                      target_lang: str = "") -> MemoryRecord:
        """ConflictError when the backbone has a memory of that name, or one of `domain`."""
        now = _now()
        values: dict[str, Any] = {
            "name": name, "backbone": backbone, "domain": domain, "owner": owner,
            "source_lang": source_lang, "target_lang": target_lang, "created_at": now,
            "updated_at": now}
        try:
            with self._memory_write() as conn:
                for column, value, what in ((memories.c.name, name, "named"),
                                            (memories.c.domain, domain, "of domain")):
                    if value is not None and conn.execute(select(memories.c.id).where(
                            memories.c.backbone == backbone, column == value)).first():
                        raise ConflictError(f"a memory {what} {value!r} exists already")
                memory_id = int(conn.execute(insert(memories).values(values)
                                             .returning(memories.c.id)).scalar_one())
                version = self._changed(conn, memory_id, None, "reload")
        except IntegrityError as exc:  # a concurrent writer took the name or the domain
            raise ConflictError(f"memory {name!r} changed concurrently; retry") from exc
        return MemoryRecord(id=memory_id, version=version, **values)

    def get_memory(self, memory_id: int) -> MemoryRecord | None:
        found = self._memories(memories.c.id == memory_id)
        return found[0] if found else None

    def find_memory(self, name: str, *, backbone: str) -> MemoryRecord | None:
        found = self._memories(memories.c.backbone == backbone, memories.c.name == name)
        return found[0] if found else None

    def list_memories(self, *, backbone: str | None = None) -> list[MemoryRecord]:
        """Every memory (of `backbone`, when given), by name, with its pair count."""
        where = () if backbone is None else (memories.c.backbone == backbone,)
        return self._memories(*where)

    def _memories(self, *where: Any) -> list[MemoryRecord]:
        counts = (select(memory_pairs.c.memory_id, func.count().label("pairs"))
                  .group_by(memory_pairs.c.memory_id).subquery())
        versions = _latest_content_changes().subquery()
        query = (select(memories, func.coalesce(counts.c.pairs, 0).label("pairs"),
                        func.coalesce(versions.c.version, 0).label("version"))
                 .outerjoin(counts, counts.c.memory_id == memories.c.id)
                 .outerjoin(versions, versions.c.memory_id == memories.c.id)
                 .where(*where).order_by(memories.c.backbone, memories.c.name))
        with self._read() as conn:
            return [MemoryRecord(**dict(row)) for row in conn.execute(query).mappings()]

    def rename_memory(self, memory_id: int, name: str) -> MemoryRecord:
        """NotFoundError for an unknown memory; ConflictError when its backbone has a
        memory of that name. The feed's "memory" change makes replicas reread its name."""
        try:
            with self._memory_write() as conn:
                row = conn.execute(select(memories.c.backbone, memories.c.name)
                                   .where(memories.c.id == memory_id)).first()
                if row is None:
                    raise NotFoundError("memory", memory_id)
                if row.name != name:
                    if conn.execute(select(memories.c.id).where(
                            memories.c.backbone == row.backbone,
                            memories.c.name == name)).first():
                        raise ConflictError(f"a memory named {name!r} exists already")
                    conn.execute(update(memories).where(memories.c.id == memory_id)
                                 .values(name=name, updated_at=_now()))
                    self._changed(conn, memory_id, None, "memory")
        except IntegrityError as exc:  # a concurrent writer took the name
            raise ConflictError(f"memory {name!r} changed concurrently; retry") from exc
        renamed = self.get_memory(memory_id)
        if renamed is None:  # deleted since
            raise NotFoundError("memory", memory_id)
        return renamed

    def delete_memory(self, memory_id: int) -> bool:
        with self._memory_write() as conn:
            gone = conn.execute(sql_delete(memories).where(memories.c.id == memory_id))
            if not gone.rowcount:
                return False
            conn.execute(sql_delete(memory_pairs).where(memory_pairs.c.memory_id == memory_id))
            conn.execute(sql_delete(memory_imports)
                         .where(memory_imports.c.memory_id == memory_id))
            conn.execute(sql_delete(memory_gates).where(memory_gates.c.memory_id == memory_id))
            self._changed(conn, memory_id, None, "delete")
        return True

    # -- single pairs --------------------------------------------------------------------
    def add_pair(self, memory_id: int, pair: NewPair, *,
                 replace: Replace | None = None) -> PairRecord:
        """Add a pair; `replace`: first remove the memory's pairs with the same tuid (the
        pair's own) or the same normalised source. NotFoundError for an unknown memory."""
        now = _now()
        with self._memory_write() as conn:
            self._touch(conn, memory_id, now)
            if replace is not None:
                column = memory_pairs.c.tuid if replace == "tuid" else memory_pairs.c.source_key
                value = pair.tuid if replace == "tuid" else pair.source_key
                if value is not None:
                    old = conn.execute(sql_delete(memory_pairs).where(
                        memory_pairs.c.memory_id == memory_id, column == value
                    ).returning(memory_pairs.c.id)).scalars().all()
                    for pair_id in old:
                        self._changed(conn, memory_id, int(pair_id), "pair")
            values = _pair_values(memory_id, pair, now)
            pair_id = int(conn.execute(insert(memory_pairs).values(values)
                                       .returning(memory_pairs.c.id)).scalar_one())
            self._changed(conn, memory_id, pair_id, "pair")
        return _pair({"id": pair_id, **values})

    def replace_pair(self, memory_id: int, pair_id: int, pair: NewPair) -> PairRecord | None:
        """Overwrite one pair (None: the memory has no such pair); a tuid or attributes
        that `pair` leaves unset keep their values."""
        now = _now()
        values = _pair_values(memory_id, pair, now)
        del values["created_at"]
        for key in ("tuid", "attributes_json"):
            if values[key] is None:
                del values[key]
        with self._memory_write() as conn:
            where = (memory_pairs.c.memory_id == memory_id, memory_pairs.c.id == pair_id)
            if not conn.execute(update(memory_pairs).where(*where).values(values)).rowcount:
                return None
            self._touch(conn, memory_id, now)
            self._changed(conn, memory_id, pair_id, "pair")
            row = conn.execute(select(memory_pairs).where(*where)).mappings().one()
        return _pair(row)

    def delete_pair(self, memory_id: int, pair_id: int) -> bool:
        with self._memory_write() as conn:
            gone = conn.execute(sql_delete(memory_pairs).where(
                memory_pairs.c.memory_id == memory_id, memory_pairs.c.id == pair_id))
            if not gone.rowcount:
                return False
            self._touch(conn, memory_id, _now())
            self._changed(conn, memory_id, pair_id, "pair")
        return True

    def get_pair(self, memory_id: int, pair_id: int) -> PairRecord | None:
        with self._read() as conn:
            row = conn.execute(select(memory_pairs).where(
                memory_pairs.c.memory_id == memory_id, memory_pairs.c.id == pair_id)
            ).mappings().first()
        return None if row is None else _pair(row)

    def pairs_by_id(self, pair_ids: Iterable[int]) -> list[PairRecord]:
        wanted = sorted(set(pair_ids))
        out: list[PairRecord] = []
        with self._read() as conn:
            for start in range(0, len(wanted), INSERT_CHUNK):
                chunk = wanted[start: start + INSERT_CHUNK]
                out += [_pair(row) for row in conn.execute(select(memory_pairs).where(
                    memory_pairs.c.id.in_(chunk))).mappings()]
        return out

    def pairs_after(self, memory_id: int, after_id: int = 0, *,
                    limit: int = 10_000) -> list[PairRecord]:
        """The memory's pairs with ids above `after_id`, in id order (pages of `limit`)."""
        query = (select(memory_pairs).where(memory_pairs.c.memory_id == memory_id,
                                            memory_pairs.c.id > after_id)
                 .order_by(memory_pairs.c.id).limit(limit))
        with self._read() as conn:
            return [_pair(row) for row in conn.execute(query).mappings()]

    # -- imports -------------------------------------------------------------------------
    def import_pairs(self, memory_id: int, pairs: Iterable[NewPair], *,
                     replace_all: bool = False) -> int:
        """Add `pairs` (after removing every pair first, with `replace_all`) in ONE
        transaction; one "reload" change. NotFoundError for an unknown memory."""
        now = _now()
        count = 0
        with self._memory_write() as conn:
            self._touch(conn, memory_id, now)
            if replace_all:
                conn.execute(sql_delete(memory_pairs)
                             .where(memory_pairs.c.memory_id == memory_id))
            source = iter(pairs)
            while chunk := [_pair_values(memory_id, p, now) for p in islice(source,
                                                                              INSERT_CHUNK)]:
                conn.execute(insert(memory_pairs), chunk)
                count += len(chunk)
            self._changed(conn, memory_id, None, "reload")
        return count

    # -- the change feed -----------------------------------------------------------------
    def latest_memory_change(self) -> int:
        with self._read() as conn:
            latest = conn.execute(select(func.max(memory_changes.c.id))).scalar()
        return 0 if latest is None else int(latest)

    def memory_changes_since(self, change_id: int, *,
                             limit: int = 10_000) -> list[MemoryChange]:
        query = (select(memory_changes.c.id, memory_changes.c.memory_id,
                        memory_changes.c.pair_id, memory_changes.c.action)
                 .where(memory_changes.c.id > change_id).order_by(memory_changes.c.id)
                 .limit(limit))
        with self._read() as conn:
            return [MemoryChange(**dict(row)) for row in conn.execute(query).mappings()]

    def prune_memory_changes(self, *, keep: int) -> int:
        """Remove the feed's changes but those of the last `keep` ids (not counting
        "pruned" changes, so pruning again without new changes removes nothing) and each
        memory's latest change to its pairs (its version); how many were removed. Those
        that were leave a "pruned" change behind."""
        with self._memory_write() as conn:
            latest = conn.execute(select(func.max(memory_changes.c.id))
                                  .where(memory_changes.c.action != "pruned")).scalar()
            through = (0 if latest is None else int(latest)) - keep
            if through <= 0:
                return 0
            versions = select(_latest_content_changes().subquery().c.version)
            removed = conn.execute(sql_delete(memory_changes).where(
                memory_changes.c.id <= through, memory_changes.c.id.not_in(versions))
            ).rowcount
            if removed:
                self._changed(conn, PRUNED, through, "pruned")
        return int(removed)

    @staticmethod
    def _touch(conn: Connection, memory_id: int, now: datetime) -> None:
        if not conn.execute(update(memories).where(memories.c.id == memory_id)
                            .values(updated_at=now)).rowcount:
            raise NotFoundError("memory", memory_id)

    @staticmethod
    def _changed(conn: Connection, memory_id: int, pair_id: int | None, action: str) -> int:
        change_id = int(conn.execute(insert(memory_changes).values(
            memory_id=memory_id, pair_id=pair_id, action=action, at=_now()
        ).returning(memory_changes.c.id)).scalar_one())
        if conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_notify(MEMORY_CHANNEL, str(change_id))))
        return change_id


def _latest_content_changes() -> Select[tuple[int, int]]:
    """(memory_id, version) of every memory that exists: its latest change to its pairs."""
    return (select(memory_changes.c.memory_id,
                   func.max(memory_changes.c.id).label("version"))
            .where(memory_changes.c.action.in_(CONTENT_CHANGES),
                   memory_changes.c.memory_id.in_(select(memories.c.id)))
            .group_by(memory_changes.c.memory_id))


def _pair_values(memory_id: int, pair: NewPair, now: datetime) -> dict[str, Any]:
    attributes = (json.dumps(pair.attributes, ensure_ascii=False)
                  if pair.attributes else None)
    return {"memory_id": memory_id, "tuid": pair.tuid, "source": pair.source,
            "target": pair.target, "source_key": pair.source_key, "origin": pair.origin,
            "attributes_json": attributes, "created_at": now, "updated_at": now}


def _pair(row: Any) -> PairRecord:
    attributes = row["attributes_json"]
    return PairRecord(
        id=int(row["id"]), memory_id=int(row["memory_id"]), tuid=row["tuid"],
        source=row["source"], target=row["target"], source_key=row["source_key"],
        origin=row["origin"], attributes=json.loads(attributes) if attributes else None,
        created_at=row["created_at"], updated_at=row["updated_at"])
