"""Registry rows of memory import jobs (table `memory_imports`): a mixin of `Registry`.

A job runs in the server that accepted its upload (server/memories/imports.py); its row
is how any replica answers "how far is it": state, progress (0 to 1) and the report
(pairs imported, units skipped by reason). A job whose row has not moved for
`STALE_AFTER` while unfinished lost its server (a restart): it reads as failed.
"""

from __future__ import annotations

import json
import uuid
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, Select, func, insert, select, update

from .tables import memories, memory_imports

ImportState = Literal["queued", "running", "done", "failed"]
STALE_AFTER = timedelta(minutes=10)
IMPORT_CLAIM_LOCK_KEY = 0x6E6D_7469_6D63_6C6D  # "nmtimclm": any fixed 64-bit number
INTERRUPTED = "interrupted: the server running the import stopped; upload the file again"


@dataclass(frozen=True)
class MemoryImport:
    id: str
    memory_id: int
    state: ImportState
    progress: float
    format: str  # "tmx", "tsv", "xliff"
    mode: str  # "append" or "replace"
    filename: str
    report: dict[str, Any]
    error: str | None
    created_at: datetime
    updated_at: datetime


class MemoryImportRows:
    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    def create_memory_import(self, memory_id: int, *, format: str, mode: str,
                             filename: str) -> MemoryImport:
        row = _new_row(memory_id, format=format, mode=mode, filename=filename)
        with self._write() as conn:
            conn.execute(insert(memory_imports).values(row))
        return _job(row)

    def claim_memory_import(self, memory_id: int, *, owner: str, limit: int, format: str,
                            mode: str, filename: str) -> MemoryImport | None:
        """`create_memory_import` within `owner`'s bound of `limit` unfinished imports over
        every replica, or None (no row written). The count and the new row are one
        transaction that one claimant holds at a time (SQLite's BEGIN IMMEDIATE; on
        PostgreSQL an advisory lock), so the bound is never passed and a claim is refused
        only when the bound is full, however many replicas claim at once."""
        row = _new_row(memory_id, format=format, mode=mode, filename=filename)
        with self._write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(IMPORT_CLAIM_LOCK_KEY)))
            if len(conn.execute(_unfinished(owner)).all()) >= limit:
                return None
            conn.execute(insert(memory_imports).values(row))
        return _job(row)

    def update_memory_import(self, job_id: str, *, state: ImportState | None = None,
                             progress: float | None = None,
                             report: dict[str, Any] | None = None,
                             error: str | None = None) -> None:
        values: dict[str, Any] = {"updated_at": datetime.now(UTC)}
        if state is not None:
            values["state"] = state
        if progress is not None:
            values["progress"] = min(1.0, max(0.0, progress))
        if report is not None:
            values["report_json"] = json.dumps(report, sort_keys=True)
        if error is not None:
            values["error"] = error
        with self._write() as conn:
            conn.execute(update(memory_imports).where(memory_imports.c.id == job_id)
                         .values(values))

    def unfinished_memory_imports(self, owner: str) -> list[MemoryImport]:
        """The queued and running jobs of `owner`'s memories (the shared ones, or a
        tenant's), less those whose server was lost (stale rows)."""
        with self._read() as conn:
            return [_job(row) for row in conn.execute(_unfinished(owner)).mappings()]

    def get_memory_import(self, job_id: str) -> MemoryImport | None:
        with self._read() as conn:
            row = conn.execute(select(memory_imports).where(memory_imports.c.id == job_id)
                               ).mappings().first()
        if row is None:
            return None
        job = _job(row)
        if job.state in ("queued", "running") and \
                datetime.now(UTC) - job.updated_at > STALE_AFTER:
            return replace(job, state="failed", error=INTERRUPTED)
        return job


def _new_row(memory_id: int, *, format: str, mode: str, filename: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {"id": str(uuid.uuid4()), "memory_id": memory_id, "state": "queued",
            "progress": 0.0, "format": format, "mode": mode, "filename": filename[:255],
            "report_json": "{}", "error": None, "created_at": now, "updated_at": now}


def _unfinished(owner: str) -> Select[Any]:
    """The unfinished rows of `owner`'s memories, oldest first (stale rows left out)."""
    fresh = datetime.now(UTC) - STALE_AFTER
    return (select(memory_imports)
            .join(memories, memories.c.id == memory_imports.c.memory_id)
            .where(memories.c.owner == owner,
                   memory_imports.c.state.in_(("queued", "running")),
                   memory_imports.c.updated_at > fresh)
            .order_by(memory_imports.c.created_at, memory_imports.c.id))


def _job(row: Any) -> MemoryImport:
    return MemoryImport(
        id=row["id"], memory_id=int(row["memory_id"]), state=row["state"],
        progress=float(row["progress"]), format=row["format"], mode=row["mode"],
        filename=row["filename"], report=json.loads(row["report_json"] or "{}"),
        error=row["error"], created_at=row["created_at"], updated_at=row["updated_at"])
