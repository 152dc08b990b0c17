"""Registry rows of corrections (table `corrections`): a mixin of `Registry`.

The server checks a correction's plausibility before it is stored (server/corrections);
here it is a row. A correction's `fingerprint` is unique, so the same post-edit sent twice
is one row however the two requests race.
"""

from __future__ import annotations

import uuid
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Field
from sqlalchemy import ColumnElement, Connection, and_, func, insert, or_, select, update
from sqlalchemy import delete as sql_delete
from sqlalchemy.exc import IntegrityError

from .errors import ConflictError
from .tables import corrections, tenant_keys

CorrectionStatus = Literal["accepted", "pending", "approved", "rejected"]
# Statuses whose corrections may train: sent with a key, or approved by an admin.
TRAINABLE: tuple[CorrectionStatus, ...] = ("accepted", "approved")


# The one declaration of a correction's fields: NewCorrection (what the desk stores) and
# CorrectionRecord (what the registry gives back, and the admin API answers as it is:
# server/api/schemas_corrections.py CorrectionInfo) extend it; `corrections`
# (tables.py) has a column for each field (tests/contract/test_api_layer.py).
@dataclass(frozen=True)
class Correction:
    source: str
    machine: str | None  # what the server answered, when the client says
    corrected: str
    domain: str | None  # the domain the correction is for (the corrector's choice)
    routed: str | None  # where the original answer was routed ("ensemble", a domain, ...)
    direction: str  # "en-fr"
    backbone: str  # the backbone's name
    key_id: str | None
    key_name: str | None


@dataclass(frozen=True)
class NewCorrection(Correction):
    fingerprint: str  # unique: the same post-edit sent twice is one row


@dataclass(frozen=True)
class CorrectionRecord(Correction):
    id: str
    status: CorrectionStatus
    used_in: Annotated[int | None, Field(
        description="the module version a refresh trained with it")]
    created_at: datetime
    reviewed_at: datetime | None


RECORD_FIELDS = tuple(f.name for f in fields(CorrectionRecord))


@dataclass(frozen=True)
class CorrectionFilter:
    """Which corrections (every field that is set must match)."""

    domain: str | None = None
    key_id: str | None = None
    status: CorrectionStatus | None = None
    direction: str | None = None
    ids: Sequence[str] | None = None
    backbone: str | None = None
    unused: bool = False  # only those no refresh has used
    # only those sent with a key of this tenant (a tenant's admin reads its own)
    tenant: str | None = None
    # only those sent with no key or a key of no tenant: a shared domain's refresh trains
    # on these alone (a tenant's corrections of a shared domain stay the tenant's)
    untenanted: bool = False

    def where(self) -> ColumnElement[bool]:
        c = corrections.c
        parts: list[ColumnElement[bool]] = []
        for column, value in ((c.domain, self.domain), (c.key_id, self.key_id),
                              (c.status, self.status), (c.direction, self.direction),
                              (c.backbone, self.backbone)):
            if value is not None:
                parts.append(column == value)
        if self.unused:
            parts.append(c.used_in.is_(None))
        keys = tenant_keys.c
        if self.tenant is not None:
            parts.append(c.key_id.in_(select(keys.key_id).where(keys.tenant == self.tenant)))
        if self.untenanted:
            parts.append(or_(c.key_id.is_(None), c.key_id.not_in(select(keys.key_id))))
        if self.ids is not None:
            parts.append(c.id.in_(list(self.ids)))
        return and_(True, *parts)


class CorrectionRows:
    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    def add_correction(self, new: NewCorrection) -> CorrectionRecord:
        """Store a correction ("accepted" with a key, else "pending"); ConflictError when
        the same one (fingerprint) is stored already."""
        row = vars(new) | {
            "id": str(uuid.uuid4()), "status": "accepted" if new.key_id else "pending",
            "used_in": None, "created_at": datetime.now(UTC), "reviewed_at": None}
        try:
            with self._write() as conn:
                conn.execute(insert(corrections).values(row))
        except IntegrityError as exc:
            raise ConflictError("this correction was received already") from exc
        return _record(row)

    def has_correction(self, fingerprint: str) -> bool:
        with self._read() as conn:
            found = conn.execute(select(corrections.c.id).where(
                corrections.c.fingerprint == fingerprint)).first()
        return found is not None

    def list_corrections(self, which: CorrectionFilter = CorrectionFilter(), *,
                         limit: int | None = None, offset: int = 0) -> list[CorrectionRecord]:
        query = (select(corrections).where(which.where())
                 .order_by(corrections.c.created_at, corrections.c.id).offset(offset))
        if limit is not None:
            query = query.limit(limit)
        with self._read() as conn:
            return [_record(row) for row in conn.execute(query).mappings()]

    def count_corrections(self) -> dict[str, Counter[str]]:
        """domain ("" for none) -> status -> count; "new" counts trainable corrections no
        refresh has used yet."""
        c = corrections.c
        out: dict[str, Counter[str]] = {}
        with self._read() as conn:
            for domain, status, used, count in conn.execute(
                    select(c.domain, c.status, c.used_in.is_(None), func.count())
                    .group_by(c.domain, c.status, c.used_in.is_(None))):
                counts = out.setdefault(domain or "", Counter())
                counts[status] += count
                if status in TRAINABLE and used:
                    counts["new"] += count
        return out

    def count_new_corrections(self, domain: str, *, backbone: str,
                              since: datetime | None = None, untenanted: bool = False
                              ) -> int:
        """Trainable corrections of `domain` (made with `backbone`) no refresh has used,
        received after `since` (the last refresh job of the domain: a refused refresh is
        not retried until as many new ones came in). `untenanted`: those of keys of no
        tenant only (a shared domain's: see CorrectionFilter)."""
        c = corrections.c
        query = select(func.count()).where(
            c.domain == domain, c.backbone == backbone, c.status.in_(TRAINABLE),
            c.used_in.is_(None), CorrectionFilter(untenanted=untenanted).where())
        if since is not None:
            query = query.where(c.created_at > since)
        with self._read() as conn:
            return int(conn.execute(query).scalar() or 0)

    def delete_corrections(self, which: CorrectionFilter) -> int:
        with self._write() as conn:
            return int(conn.execute(sql_delete(corrections).where(which.where())).rowcount)

    def review_corrections(self, which: CorrectionFilter, *, approve: bool) -> int:
        """Approve or reject the pending corrections among `which`; how many changed."""
        status: CorrectionStatus = "approved" if approve else "rejected"
        with self._write() as conn:
            changed = conn.execute(
                update(corrections).where(which.where(), corrections.c.status == "pending")
                .values(status=status, reviewed_at=datetime.now(UTC)))
        return int(changed.rowcount)

    def mark_corrections_used(self, ids: Sequence[str], version: int) -> int:
        """A refresh published module `version` trained on these corrections."""
        with self._write() as conn:
            changed = conn.execute(update(corrections).where(corrections.c.id.in_(list(ids)))
                                   .values(used_in=version))
        return int(changed.rowcount)


def _record(row: Any) -> CorrectionRecord:
    return CorrectionRecord(**{name: row[name] for name in RECORD_FIELDS})
