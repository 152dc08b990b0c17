"""Registry rows of named glossaries (table `glossaries`): a mixin of `Registry`.

Entries are validated by the server before they are stored; here they are rows.
`entries_json` holds a list of [source, target] pairs, or, for a glossary with forbidden
target terms (imported from TBX), {"entries": [...], "forbidden": [...]}: both read back,
so rows written before forbidden terms existed need no migration.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update
from sqlalchemy import delete as sql_delete
from sqlalchemy.exc import IntegrityError

from .errors import ConflictError
from .tables import glossaries


@dataclass(frozen=True)
class GlossaryRecord:
    name: str
    entries: list[tuple[str, str]]
    default_for: str | None  # the domain that uses it when a request names no glossary
    created_at: datetime
    updated_at: datetime
    backbone: str = ""  # the direction whose domain `default_for` names
    forbidden: tuple[str, ...] = ()  # target terms the output must not hold


class GlossaryRows:
    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def scope(self, kind: str, backbone: str | None) -> str: ...

    def put_glossary(self, name: str, entries: Sequence[tuple[str, str]], *,
                     default_for: str | None, backbone: str | None = None,
                     forbidden: Sequence[str] = ()) -> tuple[GlossaryRecord, bool]:
        """Create or replace; True when it was created. ConflictError when another
        glossary is the default of `default_for` (a domain of `backbone`, default: the
        default backbone)."""
        now = datetime.now(UTC)
        pairs = [list(e) for e in entries]
        stored: Any = {"entries": pairs, "forbidden": list(forbidden)} if forbidden else pairs
        values: dict[str, Any] = {
            "entries_json": json.dumps(stored, ensure_ascii=False),
            "default_for": default_for, "updated_at": now,
            "backbone": self.scope("module", backbone)}
        try:
            return self._put(name, values, default_for=default_for, now=now)
        except IntegrityError as exc:  # a concurrent writer took the name or the domain
            raise ConflictError(f"glossary {name!r} changed concurrently; retry") from exc

    def _put(self, name: str, values: dict[str, Any], *, default_for: str | None,
             now: datetime) -> tuple[GlossaryRecord, bool]:
        with self._write() as conn:
            if default_for is not None:
                holder = conn.execute(select(glossaries.c.name).where(
                    glossaries.c.backbone == values["backbone"],
                    glossaries.c.default_for == default_for)).scalar()
                if holder is not None and holder != name:
                    raise ConflictError(f"glossary {holder!r} is already the default of "
                                        f"domain {default_for!r}")
            where = glossaries.c.name == name
            created = conn.execute(update(glossaries).where(where).values(values)).rowcount == 0
            if created:
                conn.execute(insert(glossaries).values(name=name, created_at=now, **values))
            row = conn.execute(select(glossaries).where(where)).mappings().one()
        return glossary_from_row(row), created

    def get_glossary(self, name: str) -> GlossaryRecord | None:
        with self._read() as conn:
            row = conn.execute(select(glossaries).where(glossaries.c.name == name)
                               ).mappings().first()
        return None if row is None else glossary_from_row(row)

    def glossary_defaults(self, *, backbone: str | None = None) -> dict[str, GlossaryRecord]:
        """Every domain's default glossary of `backbone` (default: the default backbone),
        by domain (one read for all of them)."""
        scope = self.scope("module", backbone)
        with self._read() as conn:
            rows = conn.execute(select(glossaries).where(
                glossaries.c.backbone == scope, glossaries.c.default_for.is_not(None))
                                ).mappings()
            return {str(row["default_for"]): glossary_from_row(row) for row in rows}

    def list_glossaries(self) -> list[GlossaryRecord]:
        with self._read() as conn:
            rows = conn.execute(select(glossaries).order_by(glossaries.c.name)).mappings()
            return [glossary_from_row(row) for row in rows]

    def delete_glossary(self, name: str) -> bool:
        with self._write() as conn:
            deleted = conn.execute(sql_delete(glossaries).where(glossaries.c.name == name))
        return bool(deleted.rowcount)


def glossary_from_row(row: Any) -> GlossaryRecord:
    stored = json.loads(row["entries_json"])
    pairs, forbidden = ((stored["entries"], stored.get("forbidden", []))
                        if isinstance(stored, dict) else (stored, []))
    entries = [(str(s), str(t)) for s, t in pairs]
    return GlossaryRecord(str(row["name"]), entries, row["default_for"], row["created_at"],
                          row["updated_at"], str(row["backbone"]),
                          tuple(str(term) for term in forbidden))
