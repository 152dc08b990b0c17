"""Evicted modules read back before their sentences run: the scheduler's side of module
residency (server/engine/residency.py holds the tiers).

A sentence whose module is resident in no tier starts the module's read when it is queued
(one read per module, on a worker thread: `Residency.reload`) and waits while the read
runs; meanwhile every other sentence decodes. Once the read is done it joins a batch,
resident or not: if its module was evicted again in the meantime, the engine's own loader
reads it inside the batch rather than starve it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from server.scheduling.batching import Pending

log = logging.getLogger(__name__)
# How long a batch about to start waits for the reads of its queued sentences' modules.
# Closed-loop clients send their next sentence as their answer comes, so a cold one
# arrives as the next batch forms, and its read (milliseconds) would otherwise miss that
# batch by a hair and wait a whole batch more (and the batch would run a sentence short).
READ_WAIT_S = 0.05


class Residency(Protocol):
    """Where the scheduler learns that a module must be read back before it can run."""

    def missing(self, module_ids: Iterable[str]) -> set[str]:
        """The modules that are resident in no tier."""
        ...

    async def reload(self, module_id: str) -> None:
        """Read the module back into memory, off the engine thread."""
        ...


class ModuleReads:
    """The reads in flight, one per module. `done` runs after each (the batching loop's
    wake-up); `failed(module_id, error)` after one that failed (its sentences fail)."""

    def __init__(self, residency: Residency | None, *, done: Callable[[], None],
                 failed: Callable[[str, Exception], None]) -> None:
        self.residency = residency
        self.running: dict[str, asyncio.Task[None]] = {}  # module id -> its read
        self._done, self._failed = done, failed

    def held_back(self, item: Pending) -> bool:
        """True while `item` must wait for its modules to be read back (started here)."""
        if self.residency is None or not item.modules:
            return False
        if any(module_id in self.running for module_id in item.modules):
            return True  # its read still runs: no batch may read the module meanwhile
        if item.reloaded:
            return False
        missing = self.residency.missing(item.modules)
        if not missing:
            return False
        for module_id in missing - self.running.keys():
            self.running[module_id] = asyncio.get_running_loop().create_task(
                self._read(module_id))
        item.reloaded = True  # after this read it runs, resident or not
        return True

    def awaited(self, items: Iterable[Pending]) -> bool:
        """Whether a read in flight holds back one of `items`."""
        running = self.running
        return bool(running) and any(m in running for item in items for m in item.modules)

    async def _read(self, module_id: str) -> None:
        assert self.residency is not None
        try:
            await self.residency.reload(module_id)
        except Exception as error:  # its sentences fail (503); nothing else does
            log.error("reloading module %s failed: %s", module_id, error)
            self._failed(module_id, error)
        finally:
            del self.running[module_id]
            self._done()
