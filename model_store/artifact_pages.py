"""Artifact rows a page at a time (a mixin of `Registry`), and the row's record type.

A store of 10,000 modules is listed by name, `limit` names after a cursor (the last name
of the previous page), each page read through the primary key (backbone, kind, name,
version): no call reads the whole table.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from contract.manifest import ArtifactKind, Manifest

from .tables import active, artifacts


@dataclass(frozen=True)
class ArtifactRecord:
    """One `artifacts` row: a visible artifact and where its bytes live."""

    kind: ArtifactKind
    name: str
    version: int
    location: str
    fingerprint: str
    manifest: Manifest
    created_at: datetime
    backbone: str = ""  # the backbone a module or classifier belongs to ("" for backbones)


def record_of(row: Any) -> ArtifactRecord:
    return ArtifactRecord(
        kind=row["kind"],
        name=row["name"],
        version=row["version"],
        location=row["location"],
        fingerprint=row["fingerprint"],
        manifest=Manifest.model_validate_json(row["manifest_json"]),
        created_at=row["created_at"],
        backbone=row["backbone"],
    )


@dataclass(frozen=True)
class ArtifactPage:
    """Every version of up to `limit` names, in name then version order; `active`: those
    names' active versions; `next_after`: the cursor of the next page (None: the last)."""

    records: list[ArtifactRecord]
    active: dict[str, int]
    next_after: str | None


class ArtifactPages:
    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def scope(self, kind: str, backbone: str | None) -> str: ...

    def artifact_page(self, kind: ArtifactKind, *, backbone: str | None = None,
                      after: str | None = None, limit: int = 100) -> ArtifactPage:
        """The names of `kind` (of `backbone`) after `after`, `limit` of them."""
        if limit < 1:
            raise ValueError(f"a page of {limit} names: at least 1")
        scope = self.scope(kind, backbone)
        where = [artifacts.c.backbone == scope, artifacts.c.kind == kind]
        if after is not None:
            where.append(artifacts.c.name > after)
        names_query = (select(artifacts.c.name).where(*where).distinct()
                       .order_by(artifacts.c.name).limit(limit + 1))
        with self._read() as conn:
            names: Sequence[str] = [str(n) for n in conn.execute(names_query).scalars()]
            more = len(names) > limit
            names = names[:limit]
            if not names:
                return ArtifactPage([], {}, None)
            rows = conn.execute(
                select(artifacts).where(artifacts.c.backbone == scope,
                                        artifacts.c.kind == kind, artifacts.c.name.in_(names))
                .order_by(artifacts.c.name, artifacts.c.version)).mappings()
            records = [record_of(row) for row in rows]
            served = conn.execute(select(active.c.name, active.c.version).where(
                active.c.backbone == scope, active.c.kind == kind, active.c.name.in_(names)))
            versions = {str(name): int(version) for name, version in served}
        return ArtifactPage(records, versions, names[-1] if more else None)
