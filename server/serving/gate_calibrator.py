"""The background task that calibrates the memories' gates serving asked for
(server/memories/calibrated_gates.py's wanted list; the method: gate_calibration.py).

Calibration decodes through the direction's scheduler like any request (the engine runs
on its own thread, batched with the traffic), one memory at a time, holding the module
it calibrates for so that it is not unloaded midway. A memory removed, or a module no
longer served, by the time its turn comes is skipped (serving asks again if needed).

Before calibrating, the registry is asked (model_store/memory_gate_rows.py): a
calibration another replica made, or this one before a restart, for the same memory,
module and backbone fingerprint is used when it still holds, without decoding anything;
each calibration made is written there for the others. And once per engine loaded (at
start, after being parked), the registry's calibrations for its backbone that hold are
read at once, so that serving uses them from its first requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref

from server.core.settings import DecodingSettings
from server.decoding.search import Hypothesis
from server.engine.engine import SentenceJob
from server.memories.book import MemoryBook
from server.memories.calibrated_gates import Calibration, Wanted
from server.scheduling.scheduler import Scheduler
from server.serving.gate_calibration import calibrate
from server.serving.request_limits import search_options
from server.serving.requests import DecodingRequest
from server.serving.runtime import Runtime

log = logging.getLogger(__name__)
DEADLINE_S = 3600.0  # calibration waits its turn behind requests: no hurry


class GateCalibrator:
    def __init__(self, book: MemoryBook, runtime: Runtime, scheduler: Scheduler,
                 decoding: DecodingSettings) -> None:
        self.book, self.runtime, self.scheduler = book, runtime, scheduler
        self.decoding = decoding
        self.options = search_options(DecodingRequest(), decoding)
        self._read_for: weakref.ref[object] | None = None  # the engine `read_stored` read for

    async def keep_calibrated(self, interval_s: float = 1.0) -> None:
        """Work through the wanted list every `interval_s` until cancelled; a failed
        calibration is logged (serving asks for it again)."""
        while True:
            try:
                await self.read_stored()
            except Exception:  # the wanted list still reads them, one by one
                log.exception("reading the stored memory gates failed")
            await asyncio.sleep(interval_s)
            await self.run_wanted()

    async def read_stored(self) -> int:
        """Once per engine: the registry's calibrations for its backbone that hold for the
        memories as they are now; how many."""
        engine, backbone, gates = self.runtime.engine, self.runtime.backbone, self.book.gates
        if engine is None or backbone is None or not self.book.settings.retrieval.calibrate \
                or (self._read_for is not None and self._read_for() is engine):
            return 0
        self._read_for = weakref.ref(engine)
        rows = await asyncio.to_thread(self.book.registry.backbone_memory_gates,
                                       backbone.backbone_fingerprint)
        if self.runtime.engine is not engine:
            return 0  # parked meanwhile
        gates.follow(engine)
        used = 0
        for row in rows:
            memory, stored = self.book.view.by_id.get(row.memory_id), Calibration.of_record(row)
            if memory is not None and gates.holds(stored, memory.version, len(memory.index)):
                gates.put(stored, engine, stored=True)
                used += 1
        if used:
            log.info("%d memory gates read from the registry", used)
        return used

    async def run_wanted(self) -> int:
        """Calibrate every memory asked for since the last call; how many were."""
        done = 0
        for wanted in self.book.gates.take_wanted():
            try:
                done += await self.calibrate_one(wanted)
            except Exception:
                log.exception("calibrating the gate of memory %d failed", wanted.memory_id)
            finally:
                self.book.gates.finished(wanted)
        return done

    async def calibrate_one(self, wanted: Wanted) -> bool:
        """Whether it calibrated (False: skipped, or the registry's calibration holds)."""
        engine, runtime, gates = self.runtime.engine, self.runtime, self.book.gates
        memory = self.book.view.by_id.get(wanted.memory_id)
        if engine is None or memory is None or runtime.backbone is None:
            return False
        fingerprint = runtime.backbone.backbone_fingerprint  # the engine's (set together)
        version, pairs = memory.version, len(memory.index)
        row = await asyncio.to_thread(self.book.registry.memory_gate, wanted.memory_id,
                                      wanted.module_id, fingerprint)
        stored = Calibration.of_record(row) if row is not None else None
        if stored is not None and gates.holds(stored, version, pairs):
            gates.put(stored, engine, stored=True)
            log.info("memory %s with module %s: gate %g, as calibrated on %d pairs "
                     "(registry)", memory.record.name, wanted.module_id or "none",
                     stored.gate, stored.pairs)
            return False
        held = [wanted.module_id] if wanted.module_id is not None else []
        if not runtime.hold(held):
            return False  # the module was retired meanwhile
        try:
            found = await calibrate(engine, memory.index, wanted.module_id,
                                    self.book.settings.retrieval, self._decode,
                                    memory_id=wanted.memory_id, version=version,
                                    decoding=self.decoding)
        finally:
            runtime.release(held)
        gates.put(found, engine)
        try:  # for the other replicas and the next start; this one has it already
            await asyncio.to_thread(self.book.registry.put_memory_gate,
                                    found.record(fingerprint))
        except Exception:
            log.exception("storing the gate of memory %d failed", wanted.memory_id)
        log.info("memory %s with module %s: gate %g (held-out BLEU %s; off %s; %d pairs, "
                 "%.1f s)", memory.record.name, wanted.module_id or "none", found.gate,
                 dict(found.scores), found.off, found.held_out, found.seconds)
        return True

    async def _decode(self, jobs: list[SentenceJob]) -> list[list[Hypothesis]]:
        futures = self.scheduler.submit(jobs, self.options,
                                        deadline=time.monotonic() + DEADLINE_S, admitted=True)
        try:
            return list(await asyncio.gather(*futures))
        finally:
            for future in futures:
                future.cancel()  # withdraws what has not run (no-op for finished ones)
