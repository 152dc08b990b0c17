"""Registry rows of the memories' calibrated gates (table `memory_gates`): a mixin of
`Registry`.

A calibration (server/serving/gate_calibration.py) is stored per (memory, module it
decodes with, backbone fingerprint), so every replica serving that backbone uses it and
none calibrates it again after a restart; whether it still holds for the memory as it is
now is the server's rule (server/memories/calibrated_gates.py). A newer calibration of
the same key replaces the row; deleting the memory deletes its rows.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select

from .memory_rows import MEMORY_LOCK_KEY
from .tables import memories, memory_gates


@dataclass(frozen=True)
class GateRecord:
    memory_id: int
    module_id: str | None  # None: the backbone alone
    backbone_fingerprint: str
    version: int  # the memory's version it was calibrated on
    pairs: int  # and its pair count
    gate: float
    off: float  # held-out BLEU with retrieval off
    scores: tuple[tuple[float, float], ...]  # (gate, held-out BLEU) per candidate
    held_out: int
    seconds: float
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


class MemoryGateRows:
    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    def put_memory_gate(self, record: GateRecord) -> bool:
        """Store (or replace) a calibration; False when its memory no longer exists (it
        was deleted while calibrating: nothing is stored)."""
        with self._write() as conn:
            if conn.dialect.name == "postgresql":  # one at a time with deletions
                conn.execute(select(func.pg_advisory_xact_lock(MEMORY_LOCK_KEY)))
            exists = conn.execute(select(memories.c.id)
                                  .where(memories.c.id == record.memory_id)).first()
            if exists is None:
                return False
            conn.execute(delete(memory_gates).where(_key(record.memory_id, record.module_id,
                                                         record.backbone_fingerprint)))
            conn.execute(insert(memory_gates).values(
                memory_id=record.memory_id, module_id=record.module_id or "",
                backbone_fingerprint=record.backbone_fingerprint, version=record.version,
                pairs=record.pairs, gate=record.gate, off=record.off,
                scores_json=json.dumps([list(s) for s in record.scores]),
                held_out=record.held_out, seconds=record.seconds,
                created_at=record.created_at))
        return True

    def memory_gate(self, memory_id: int, module_id: str | None,
                    backbone_fingerprint: str) -> GateRecord | None:
        with self._read() as conn:
            row = conn.execute(select(memory_gates).where(
                _key(memory_id, module_id, backbone_fingerprint))).mappings().first()
        return None if row is None else _record(row)

    def memory_gates(self, memory_id: int) -> list[GateRecord]:
        """A memory's calibrations, every module and backbone (by module, then backbone)."""
        with self._read() as conn:
            rows = conn.execute(select(memory_gates)
                                .where(memory_gates.c.memory_id == memory_id)
                                .order_by(memory_gates.c.module_id,
                                          memory_gates.c.backbone_fingerprint)).mappings()
            return [_record(row) for row in rows]

    def backbone_memory_gates(self, backbone_fingerprint: str) -> list[GateRecord]:
        """Every calibration made on one backbone (what a server loading it reads)."""
        with self._read() as conn:
            rows = conn.execute(select(memory_gates).where(
                memory_gates.c.backbone_fingerprint == backbone_fingerprint)
                .order_by(memory_gates.c.memory_id, memory_gates.c.module_id)).mappings()
            return [_record(row) for row in rows]


def _key(memory_id: int, module_id: str | None, backbone_fingerprint: str) -> Any:
    return ((memory_gates.c.memory_id == memory_id)
            & (memory_gates.c.module_id == (module_id or ""))
            & (memory_gates.c.backbone_fingerprint == backbone_fingerprint))


def _record(row: Any) -> GateRecord:
    return GateRecord(
        memory_id=int(row["memory_id"]), module_id=row["module_id"] or None,
        backbone_fingerprint=row["backbone_fingerprint"], version=int(row["version"]),
        pairs=int(row["pairs"]), gate=float(row["gate"]), off=float(row["off"]),
        scores=tuple((float(g), float(b)) for g, b in json.loads(row["scores_json"])),
        held_out=int(row["held_out"]), seconds=float(row["seconds"]),
        created_at=row["created_at"])
