"""Liveness: is the work still moving? (`GET /health/live`)

The event loop answering a probe is not enough: if the batching loop died or an engine call
hangs, every request times out while the process looks healthy. The watchdog fails
liveness, so that the orchestrator restarts the process, when

- a scheduler's batching loop (the default direction's or another direction's) has ended
  (it only ends on a bug), or its heartbeat is older than `stall_s` while the engine is
  idle (the loop beats on every pass and at least every `HEARTBEAT_S` when idle; while a
  batch runs it waits on the engine, whose own bound applies);
- the engine thread is shut down, or one engine call has run longer than `stall_s`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from server.execution.engine_thread import EngineThread
from server.scheduling.scheduler import Scheduler


@dataclass(frozen=True)
class Watchdog:
    scheduler: Scheduler  # the default direction's
    engine_thread: EngineThread
    stall_s: float
    others: Mapping[str, Scheduler] = field(default_factory=dict)  # backbone -> scheduler

    def problems(self) -> list[str]:
        """Why the server is not alive; empty when it is."""
        found: list[str] = []
        busy = self.engine_thread.busy_for()
        if self.engine_thread.closed:
            found.append("engine thread: shut down")
        elif busy > self.stall_s:
            found.append(f"engine thread: one call has run for {busy:.0f} s (bound "
                         f"{self.stall_s:g} s, NMT_LIVENESS_STALL_S)")
        schedulers = {"scheduler": self.scheduler,
                      **{f"scheduler of {name}": s for name, s in self.others.items()}}
        for label, scheduler in schedulers.items():
            if not scheduler.alive:
                found.append(f"{label}: " + (scheduler.failure or "not running"))
            elif busy == 0.0:
                silent = time.monotonic() - scheduler.heartbeat
                if silent > self.stall_s:
                    found.append(f"{label}: no heartbeat for {silent:.0f} s (bound "
                                 f"{self.stall_s:g} s, NMT_LIVENESS_STALL_S)")
        return found
