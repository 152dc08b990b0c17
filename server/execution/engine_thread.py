"""The engine thread: the one thread that runs model compute, and its OpenMP team."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from server.execution.placement import place_engine_thread

T = TypeVar("T")


class EngineThread:
    """The one thread that runs model compute (torch parallelises inside each call).

    Everything that creates or touches engine tensors (building the backbone, converting
    and registering a module, batches, copying a module into a slot) goes through `run`,
    so those operations never overlap, and so the process has exactly one OpenMP thread
    team. Every other thread that ran a parallel torch op would get a team of its own;
    with more OpenMP threads than cores, libgomp stops spinning between parallel regions
    and every small decoding op pays a futex wake-up: measured here, beam-4 batches ran
    1.5x slower once a second team existed.
    """

    def __init__(self, cpus: frozenset[int] | None = None) -> None:
        """`cpus`: the CPUs the engine thread and its OpenMP team keep to (placed before
        the team exists, server/execution/placement.py); None: any the process may use."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nmt-engine")
        # started now, so that it gets its creator's CPU priority before the serving
        # threads are lowered (server/execution/priorities.py)
        self._executor.submit(place_engine_thread, cpus).result()
        self._busy_since: float | None = None  # monotonic start of the call running now
        self._closed = False

    async def run(self, function: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._timed,
                                          functools.partial(function, *args))

    def call(self, function: Callable[..., T], *args: object) -> T:
        """`run` for a worker thread (never the event loop, never the engine thread): waits
        for `function` to run on the engine thread and returns its result."""
        return self._executor.submit(self._timed, functools.partial(function, *args)).result()

    def _timed(self, call: Callable[[], T]) -> T:
        """Runs on the engine thread: records how long the current call has been running,
        for the liveness watchdog."""
        self._busy_since = time.monotonic()
        try:
            return call()
        finally:
            self._busy_since = None

    def busy_for(self) -> float:
        """Seconds the current engine call has been running (0 when idle)."""
        started = self._busy_since
        return 0.0 if started is None else time.monotonic() - started

    @property
    def closed(self) -> bool:
        return self._closed

    def shutdown(self) -> None:
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
