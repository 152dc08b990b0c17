"""How many backbones stay in memory: `NMT_DIRECTIONS__RESIDENT` (docs/DIRECTIONS.md).

A server of more directions than its memory (a GPU's, usually) holds keeps at most
`resident` backbones loaded. Every request of a direction `use()`s its backbone: a loaded
one is counted in use while the request runs; an unloaded one waits for room. Room is made
by unloading the least recently used loaded backbone that no request uses (OpenNMT-py's
server unloads its least recently used models the same way); when every loaded one is in
use, the least recently used stops taking new requests (they queue behind the one that
waits) and is unloaded as soon as its last request ends, so no direction waits forever for
another's steady traffic. An unloaded backbone keeps its place in the registry and the
store: it is loaded again (verified, with its active modules and router) on its next
request.

Loading and unloading run one at a time, and every tensor is made and freed on the engine
thread (`Runtime.refresh` and `Runtime.unload` run their torch work there). A backbone's
files are read and verified before another is unloaded for it, so a damaged backbone fails
only its own direction's requests (503 naming why; retried with the runtime's backoff on
the next request) and never costs a healthy one its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from server.core.errors import NotReady
from server.core.metrics import Metrics
from server.scheduling.continuous import ContinuousScheduler
from server.scheduling.scheduler import Scheduler
from server.serving.requests import ItemResult
from server.serving.runtime import Runtime
from server.serving.translation import Translator

IDLE_POLL_S = 0.005  # how often an unload checks that the scheduler's last batch has ended


@dataclass
class Member:
    runtime: Runtime
    scheduler: Scheduler
    users: int = 0  # requests using the loaded backbone now
    last_used: int = 0  # the residency's clock at its last request
    draining: bool = False  # chosen to be unloaded: new requests wait
    loading: bool = False  # its engine is set before its modules: new requests wait

    @property
    def name(self) -> str:
        return self.runtime.scope or ""


class BackboneResidency:
    """At most `limit` of the added directions' backbones loaded at once."""

    def __init__(self, limit: int, *, metrics: Metrics, wait_s: float) -> None:
        if limit < 1:
            raise ValueError(f"a residency limit of {limit}: at least 1 backbone must fit")
        self.limit = limit
        self.metrics = metrics
        self.wait_s = wait_s
        self._members: dict[int, Member] = {}  # id(runtime) -> member
        self._lock = asyncio.Lock()  # one load or unload at a time
        self._changed = asyncio.Event()  # a request ended
        self._clock = itertools.count(1)

    def add(self, runtime: Runtime, scheduler: Scheduler) -> None:
        """A direction under the limit: parked until `admit` or its first request loads it."""
        runtime.parked = True
        self._members[id(runtime)] = Member(runtime, scheduler)

    async def admit(self, runtime: Runtime) -> None:
        """Load at start-up (making room as a request would); a failure is recorded in the
        runtime's state (readiness) and retried on the direction's next request."""
        with contextlib.suppress(NotReady):
            async with self.use(runtime):
                pass

    def loaded(self) -> list[str]:
        """The loaded backbones, most recently used first."""
        members = sorted(self._members.values(), key=lambda m: -m.last_used)
        return [m.name for m in members if m.runtime.engine is not None]

    @contextlib.asynccontextmanager
    async def use(self, runtime: Runtime) -> AsyncIterator[None]:
        """Hold `runtime`'s backbone loaded while the block runs (loading it first)."""
        member = self._members[id(runtime)]
        member.last_used = next(self._clock)
        if runtime.engine is not None and not member.draining and not member.loading:
            member.users += 1
        else:
            await self._make_resident(member)  # counts the use
        try:
            yield
        finally:
            member.users -= 1
            self._changed.set()

    async def _make_resident(self, member: Member) -> None:
        deadline = time.monotonic() + self.wait_s
        await self._wait(self._lock.acquire(), deadline, member)
        try:
            read = False
            while member.runtime.engine is None:
                loaded = [m for m in self._members.values() if m.runtime.engine is not None]
                if len(loaded) < self.limit:
                    await self._load(member)
                    continue
                if not read:
                    if await member.runtime.read_backbone() is not None:
                        await self._load(member)  # reports why (no retry yet); nothing unloaded
                    read = True
                # the least recently used, an idle one before any in use
                victim = min(loaded, key=lambda m: (m.users > 0, m.last_used))
                await self._unload(victim, deadline, waiting=member)
            member.users += 1
        finally:
            member.runtime.forget_read_backbone()
            self._lock.release()

    async def _load(self, member: Member) -> None:
        runtime = member.runtime
        runtime.parked = False
        member.loading = True
        try:
            await runtime.refresh()
        finally:
            member.loading = False
        if runtime.engine is None:
            runtime.parked = True  # the next request tries again (after the backoff)
            raise NotReady(f"backbone {member.name!r} could not be loaded: "
                           f"{runtime.state.failures.get('backbone', 'unknown error')}")
        self.metrics.backbone_loads.labels(backbone=member.name).inc()
        self._report()

    async def _unload(self, victim: Member, deadline: float, *, waiting: Member) -> None:
        """Unload `victim` once its requests have ended and its scheduler is idle."""
        victim.draining = True
        try:
            while victim.users or not victim.scheduler.idle:
                self._changed.clear()
                if victim.users:
                    await self._wait(self._changed.wait(), deadline, waiting)
                else:  # a cancelled request's batch still runs: it ends shortly
                    await self._wait(asyncio.sleep(IDLE_POLL_S), deadline, waiting)
            scheduler = victim.scheduler
            if isinstance(scheduler, ContinuousScheduler):
                await scheduler.engine_thread.run(scheduler.live.forget)
            await victim.runtime.unload()
            await victim.scheduler.engine_thread.run(gc.collect)  # free it now, there
        finally:
            victim.draining = False
        self.metrics.backbone_unloads.labels(backbone=victim.name).inc()
        self._report()

    async def _wait(self, awaitable: Any, deadline: float, member: Member) -> None:
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await awaitable
        except TimeoutError:
            raise NotReady(
                f"backbone {member.name!r} is not loaded and no room was made for it within "
                f"{self.wait_s:g} s: at most {self.limit} backbones stay loaded "
                f"(NMT_DIRECTIONS__RESIDENT) and the others are busy; retry") from None

    def _report(self) -> None:
        self.metrics.backbones_resident.set(
            sum(m.runtime.engine is not None for m in self._members.values()))


class ResidentTranslator(Translator):
    """A direction's translator under the residency limit: every request holds its
    backbone loaded (loading it first, see `BackboneResidency.use`)."""

    def __init__(self, *args: Any, residency: BackboneResidency, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.residency = residency

    async def translate(self, *args: Any, **kwargs: Any) -> list[ItemResult]:
        async with self.residency.use(self.runtime):
            return await super().translate(*args, **kwargs)
