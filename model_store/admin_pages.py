"""The admin lists a page at a time (a mixin of `Registry`): API keys and training jobs
oldest first, glossaries and memories by name; `limit` entries past a cursor (the last
entry's sort key), filtered to what the caller sees in the WHERE clause (tenant_owners.py).

A page is one query in the cursor's order with LIMIT `limit` + 1 (the extra row says
whether more follow), read through an index (revision 0010): a page costs about the same
at 10 or 10,000 rows, the last as the first. Names sort in the database's collation
(SQLite: by code point), the same order the cursor is compared in.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Connection, RowMapping, Select, and_, func, or_, select

from .api_keys import ApiKeyRecord, api_key_from_row
from .glossary_rows import GlossaryRecord, glossary_from_row
from .jobs import Job, JobState, job_from_row
from .memory_rows import CONTENT_CHANGES, MemoryRecord
from .tables import api_keys, glossaries, jobs, memories, memory_changes, memory_pairs, tenant_keys
from .tenant_owners import owned_by, seen_by

T = TypeVar("T")
CreatedKey = tuple[datetime, str]  # (created_at, id): the cursor of lists oldest first


@dataclass(frozen=True)
class Page(Generic[T]):
    """Up to `limit` entries in the list's order; `more`: entries follow the last one."""

    entries: list[T]
    more: bool


@dataclass(frozen=True)
class Viewer:
    """Whom a list is filtered for: a tenant's caller (`tenant` None: a caller of no
    tenant). A page for no viewer holds every entry, as the operator sees them."""

    tenant: str | None


def past(columns: Sequence[ColumnElement[Any]], key: Sequence[Any]) -> ColumnElement[bool]:
    """Rows whose `columns` sort after `key` (lexicographically), written so that the first
    column alone bounds the index range (`a >= x AND (a > x OR b > y)`)."""
    first, head = columns[0], key[0]
    beyond: ColumnElement[bool] = first > head
    if len(columns) == 1:
        return beyond
    return and_(first >= head, or_(beyond, past(columns[1:], key[1:])))


def keyset(query: Select[Any], columns: Sequence[ColumnElement[Any]],
           after: Sequence[Any] | None, limit: int) -> Select[Any]:
    """`query`'s rows past `after` in `columns` order: `limit` of them and one more."""
    if limit < 1:
        raise ValueError(f"a page of {limit} entries: at least 1")
    if after is not None:
        query = query.where(past(columns, after))
    return query.order_by(*columns).limit(limit + 1)


def _rows(conn: Connection, query: Select[Any], limit: int) -> tuple[list[RowMapping], bool]:
    rows = list(conn.execute(query).mappings())
    return rows[:limit], len(rows) > limit


class AdminPages:
    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    def api_key_page(self, *, tenant: str | None = None, after: CreatedKey | None = None,
                     limit: int = 100) -> Page[ApiKeyRecord]:
        """Keys oldest first (revoked ones too); `tenant`: that tenant's keys only."""
        query = select(api_keys)
        if tenant is not None:
            query = query.where(api_keys.c.id.in_(
                select(tenant_keys.c.key_id).where(tenant_keys.c.tenant == tenant)))
        query = keyset(query, [api_keys.c.created_at, api_keys.c.id], after, limit)
        with self._read() as conn:
            rows, more = _rows(conn, query, limit)
        return Page([api_key_from_row(row) for row in rows], more)

    def job_page(self, *, state: JobState | None = None, viewer: Viewer | None = None,
                 after: CreatedKey | None = None, limit: int = 100) -> Page[Job]:
        """Training jobs oldest first (in `state`, when given); a viewer's: the jobs of
        the domains its tenant owns (of shared domains, for a caller of no tenant)."""
        query = select(jobs)
        if state is not None:
            query = query.where(jobs.c.state == state)
        if viewer is not None:
            query = query.where(owned_by("domain", jobs.c.domain, viewer.tenant))
        query = keyset(query, [jobs.c.created_at, jobs.c.id], after, limit)
        with self._read() as conn:
            rows, more = _rows(conn, query, limit)
        return Page([job_from_row(row) for row in rows], more)

    def glossary_page(self, *, viewer: Viewer | None = None, after: str | None = None,
                      limit: int = 100) -> Page[GlossaryRecord]:
        """Glossaries (of every direction) by name; a viewer's: the shared ones and its
        tenant's."""
        query = select(glossaries)
        if viewer is not None:
            query = query.where(seen_by("glossary", glossaries.c.name, viewer.tenant))
        query = keyset(query, [glossaries.c.name], None if after is None else [after], limit)
        with self._read() as conn:
            rows, more = _rows(conn, query, limit)
        return Page([glossary_from_row(row) for row in rows], more)

    def memory_page(self, *, backbone: str, viewer: Viewer | None = None,
                    after: str | None = None, limit: int = 100) -> Page[MemoryRecord]:
        """`backbone`'s memories by name, with their pair counts and versions; a
        viewer's: the shared ones and its tenant's."""
        query = select(memories).where(memories.c.backbone == backbone)
        if viewer is not None:
            query = query.where(seen_by("memory", memories.c.name, viewer.tenant))
        query = keyset(query, [memories.c.name], None if after is None else [after], limit)
        with self._read() as conn:
            rows, more = _rows(conn, query, limit)
            ids = [int(row["id"]) for row in rows]
            # counted for this page's memories only (the whole list counts every pair)
            pairs = {int(memory): int(count) for memory, count in conn.execute(
                select(memory_pairs.c.memory_id, func.count())
                .where(memory_pairs.c.memory_id.in_(ids))
                .group_by(memory_pairs.c.memory_id))}
            versions = {int(memory): int(change) for memory, change in conn.execute(
                select(memory_changes.c.memory_id, func.max(memory_changes.c.id))
                .where(memory_changes.c.memory_id.in_(ids),
                       memory_changes.c.action.in_(CONTENT_CHANGES))
                .group_by(memory_changes.c.memory_id))}
        return Page([MemoryRecord(**dict(row), pairs=pairs.get(row["id"], 0),
                                  version=versions.get(row["id"], 0)) for row in rows], more)
