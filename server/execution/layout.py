"""The process's execution layout, set up and taken down by one call each from the lifespan.

Which thread runs what, on which CPUs, at which priority:

- the engine thread (`EngineThread`) runs every torch op, with its OpenMP team; it keeps
  the process's CPU priority and, with `front_cpus`, CPUs of its own (placement.py);
- the event loop's thread, and every thread it starts afterwards (preparation threads,
  `asyncio.to_thread` workers, sync routes), run `front_niceness` nice levels lower
  (priorities.py) and, with `front_cpus`, on the front's CPUs;
- the text worker process (`TextWorker`, text_worker.py), which does large requests'
  text work, is started from the front once it is lowered and pinned: it inherits the
  front's CPUs and lowers itself to the front's priority;
- glibc keeps the memory decoding frees (allocator.py), and Python's thread switch
  interval is short while the server runs, so that the engine thread gets the GIL back
  quickly after each torch op.

Order matters: the allocator is set before the engine allocates anything, and the engine
thread is started (and pinned) before the event loop's thread is lowered and pinned, and
the text worker after, since a new thread or process inherits its creator's priority and
CPU mask.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass

from server.execution.allocator import keep_freed_memory
from server.execution.engine_thread import EngineThread
from server.execution.placement import pin_this_thread, plan_placement, this_threads_cpus
from server.execution.priorities import lower_own_priority
from server.execution.settings import ExecutionSettings
from server.execution.text_worker import TextWorker


@dataclass
class ExecutionLayout:
    """What `start` changed, so that `stop` can undo it."""

    engine_thread: EngineThread
    text_worker: TextWorker
    switch_interval_s: float  # Python's, before the server set its own
    loop_cpus: frozenset[int] | None  # the event loop thread's CPUs before it was pinned

    @classmethod
    def start(cls, settings: ExecutionSettings) -> ExecutionLayout:
        """Run on the event loop's thread, before any other thread or process starts."""
        if settings.keep_freed_memory:  # before the engine allocates anything
            keep_freed_memory()
        # the engine thread re-takes the GIL after every torch op: keep its wait short
        # while the event loop is busy (ExecutionSettings.gil_switch_interval_ms)
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(settings.gil_switch_interval_ms / 1000)
        placement = plan_placement(settings.front_cpus)
        engine_thread = EngineThread(cpus=placement.engine if placement else None)
        # below the engine from here on: this thread (the event loop) and every thread it
        # starts later; the engine thread, started above, and its OpenMP team keep the
        # process's priority (and, with front_cpus, CPUs of their own)
        lower_own_priority(settings.front_niceness)
        loop_cpus = this_threads_cpus() if placement is not None else None
        if placement is not None:
            pin_this_thread(placement.front)
        text_worker = TextWorker()
        if settings.start_text_worker:  # in the background: the first large request's
            text_worker.start()          # wait would otherwise be its start (1.6 s here)
        return cls(engine_thread, text_worker, switch_interval, loop_cpus)

    async def stop(self) -> None:
        """Once nothing submits engine or text work any more: the text worker process and
        the engine thread end (their queued calls are cancelled), and the event loop's
        thread gets back its switch interval and CPUs (it may outlive the app: tests,
        embedding). Its priority cannot be raised again without privilege, so it stays
        lowered."""
        self.text_worker.close()
        await asyncio.to_thread(self.engine_thread.shutdown)
        sys.setswitchinterval(self.switch_interval_s)
        if self.loop_cpus is not None:
            pin_this_thread(self.loop_cpus)
