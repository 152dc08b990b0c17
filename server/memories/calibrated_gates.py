"""Each memory's calibrated gate, per module it decodes with (server/serving/
gate_calibration.py chooses it): kept with the memory's version and size, the module and
the backbone it was calibrated for, and used only while they still hold.

A calibration holds while the backbone is the same engine, the module is the same
version (module ids name their version), and the memory's pair count is within
`calibration_growth` of the count it was calibrated on (a memory that takes a correction
now and then keeps its gate; one that doubled is calibrated again). Serving asks for a
gate (`gate`); one missing or no longer valid is put on the wanted list that the
background calibrator (server/serving/gate_calibrator.py) works through, and the
settings' gate serves until it is done. Memories under MIN_PAIRS pairs are never
calibrated: too few held-out pairs to score.

Calibrations are also kept in the registry (model_store/memory_gate_rows.py), keyed by
the backbone's fingerprint: the calibrator first looks there, so a calibration made by
any replica, or before a restart, is used as soon as it holds under the same rules, and
only one that no replica has made (or that no longer holds) is calibrated. The lookup
in serving reads only this process's results: no database query per sentence.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from model_store import GateRecord
from server.core.memory_settings import RetrievalSettings

MIN_PAIRS = 20  # smaller memories use the settings' gate

Key = tuple[int, str | None]  # (memory id, module id; None: the backbone alone)


@dataclass(frozen=True)
class Calibration:
    memory_id: int
    module_id: str | None
    version: int  # the memory's version it was calibrated on
    pairs: int  # and its pair count
    gate: float  # the gate chosen
    off: float  # held-out BLEU with retrieval off
    scores: tuple[tuple[float, float], ...]  # (gate, held-out BLEU) per candidate
    held_out: int  # pairs scored
    seconds: float  # what it cost

    def record(self, backbone_fingerprint: str) -> GateRecord:
        """The registry's row of it, for the backbone it was calibrated on."""
        return GateRecord(self.memory_id, self.module_id, backbone_fingerprint, self.version,
                          self.pairs, self.gate, self.off, self.scores, self.held_out,
                          self.seconds)

    @classmethod
    def of_record(cls, record: GateRecord) -> Calibration:
        return cls(record.memory_id, record.module_id, record.version, record.pairs,
                   record.gate, record.off, record.scores, record.held_out, record.seconds)


@dataclass(frozen=True)
class GateChoice:
    gate: float
    calibrated: bool  # the memory's own calibration (else the settings' gate)


@dataclass(frozen=True)
class Wanted:
    memory_id: int
    module_id: str | None


class CalibratedGates:
    """One direction's calibrations; safe to use from request and worker threads."""

    def __init__(self, settings: RetrievalSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._found: dict[Key, Calibration] = {}
        self._wanted: dict[Key, Wanted] = {}  # in the order asked
        self._running: set[Key] = set()  # taken by the calibrator, not finished yet
        self._engine: weakref.ref[object] | None = None  # the backbone calibrated with
        self.made = 0  # calibrations run in this process
        self.reused = 0  # and read from the registry instead

    def gate(self, memory_id: int, version: int, pairs: int, module_id: str | None,
             engine: object) -> GateChoice:
        """The gate for a memory (its version and pair count now) decoding with
        `module_id` on `engine`."""
        settings = self.settings
        fallback = GateChoice(settings.gate, False)
        if not settings.calibrate or pairs < MIN_PAIRS:
            return fallback
        key = (memory_id, module_id)
        with self._lock:
            self._follow(engine)
            found = self._found.get(key)
            if found is not None and self.holds(found, version, pairs):
                return GateChoice(found.gate, True)
            if key not in self._running:
                self._wanted.setdefault(key, Wanted(memory_id, module_id))
            return fallback

    def holds(self, found: Calibration, version: int, pairs: int) -> bool:
        """Whether a calibration still holds for the memory as it is now (same backbone
        and module: checked by the caller)."""
        if found.version == version:
            return True
        return abs(pairs - found.pairs) <= self.settings.calibration_growth * found.pairs

    def take_wanted(self) -> list[Wanted]:
        """The calibrations asked for, each once until `finished` (asked again after)."""
        with self._lock:
            wanted = list(self._wanted.values())
            self._wanted.clear()
            self._running.update((w.memory_id, w.module_id) for w in wanted)
            return wanted

    def finished(self, wanted: Wanted) -> None:
        """A calibration taken is done, failed or skipped: serving may ask for it again."""
        with self._lock:
            self._running.discard((wanted.memory_id, wanted.module_id))

    def put(self, calibration: Calibration, engine: object, *, stored: bool = False) -> None:
        """A calibration made on `engine` (dropped when that is no longer the backbone);
        `stored`: read from the registry, not run here."""
        with self._lock:
            if self._engine is not None and self._engine() is not engine:
                return  # the backbone changed while it ran
            self._engine = weakref.ref(engine)
            if stored:
                self.reused += 1
            else:
                self.made += 1
            self._found[(calibration.memory_id, calibration.module_id)] = calibration

    def found(self, memory_id: int, module_id: str | None) -> Calibration | None:
        with self._lock:
            return self._found.get((memory_id, module_id))

    def follow(self, engine: object) -> None:
        """Serve from `engine` from now on (its calibrations are yet to be put)."""
        with self._lock:
            self._follow(engine)

    def _follow(self, engine: object) -> None:
        """A new backbone invalidates every calibration (inside the lock)."""
        if self._engine is None or self._engine() is not engine:
            self._found.clear()
            self._engine = weakref.ref(engine)
