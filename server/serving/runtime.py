"""Loading: the glue between the model store and the engine, and hot reload.

`Runtime` loads the backbone into an `Engine`, then keeps an immutable `ServingState`
(served domain -> module version, the classifier) in step with the registry:

- `refresh()` reads the active versions; every new or changed domain version is loaded
  from the store (verified against the serving backbone's fingerprint), registered in the
  engine as `"<domain>@<version>"` and copied into a device slot right away (on the engine
  thread), so the first request that uses it is fast. A new classifier version is loaded
  the same way (server/serving/router_loading.py: the direction's own router, or without
  one the router of a served direction of the same source language). Then the new state
  replaces the old one in one assignment.
- `server.serving.watch.watch_registry()` calls `refresh()` whenever the registry changes.
- Requests `hold()` the module ids of the state they were routed with and `release()`
  them when done (`server.serving.holds`): a version that left the state stays in the
  engine until no request holds it, then it is removed here. (The engine's loader can
  also reload any `"<domain>@<version>"` from the store, as a safety net.)

Damage stays local: a version that fails to load (for any reason: a flipped byte, an
unreadable file, a torch error) is reported (readiness, /domains) and the previous version
keeps serving; a domain without any loaded version is *broken*: its requests get 503 naming
it and the reason, every other domain serves, and the server stays ready. Failed loads are
retried with exponential backoff (server/serving/load_failures.py) and whenever the registry
changes (a good re-upload heals the domain without a restart). The poller survives any
exception (logged, counted in `nmt_registry_poll_errors_total`, retried next tick).

A module evicted from host memory is reloaded *before* its sentences run: the scheduler
asks `missing()` and `reload()` (reading, hashing and registering on a worker thread:
server/serving/read_back.py), and those sentences join a later batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from model_store import LoadedArtifact, Manifest, Store, StoreError
from model_store.compact import served_fingerprints
from server.core.errors import NotReady
from server.core.metrics import Metrics
from server.core.settings import EngineSettings
from server.decoding.search import Hypothesis, SearchOptions
from server.engine import host_paths
from server.engine.artifacts import build_engine, module_params
from server.engine.engine import Engine, EngineOptions, SentenceJob
from server.engine.families import Params, get_family
from server.engine.residency import ResidencyError
from server.execution.engine_thread import EngineThread
from server.routing.tenant_routers import TenantRouters
from server.serving.holds import ModuleHolds
from server.serving.load_failures import FailureBook, describe
from server.serving.read_back import read_back
from server.serving.readiness import readiness
from server.serving.router_loading import RouterLoader
from server.serving.state import DomainEntry, ModuleRef, ServingState
from server.settings import Settings
from server.textproc.languages import language_pair

log = logging.getLogger(__name__)


class Runtime:
    def __init__(self, store: Store, settings: Settings, *, metrics: Metrics,
                 engine_thread: EngineThread, backbone: str | None = None,
                 served: Sequence[str] = ()) -> None:
        self.store = store
        # the backbone (direction) to serve: its modules and router are this backbone's
        self.requested = backbone if backbone is not None else settings.backbone
        self.settings = settings
        self.metrics = metrics
        self.engine_thread = engine_thread
        self.engine: Engine | None = None
        self.backbone: Manifest | None = None
        self.state = ServingState()
        self.seen_event = -1
        self._lock = asyncio.Lock()
        self._holds = ModuleHolds()
        self._failed = FailureBook()  # (name, version) -> why, and when to retry
        self._tenant_routers = TenantRouters(store, settings.routing.classifier)
        # `served`: the server's backbones; one of the same source language may share
        # its router with this one (server/routing/shared_router.py)
        self._routers = RouterLoader(store, settings.routing.classifier, served=served,
                                     failed=self._failed, metrics=metrics)
        self._preloaded: dict[str, DomainEntry] = {}
        self._read_ahead: LoadedArtifact | None = None  # see read_backbone
        self._tasks: set[asyncio.Task[None]] = set()
        # unloaded by the residency limit (server/serving/residency.py): refreshes leave it
        # unloaded; the residency loads it again on its next request
        self.parked = False

    # -- loading -------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Bring the engine and the serving state in step with the registry."""
        async with self._lock:
            event_id = await asyncio.to_thread(self.store.registry.latest_event_id)
            if event_id != self.seen_event:
                self._failed.due_now()  # a change may be the fix: retry without waiting
            failures: dict[str, str] = {}
            module_failures: dict[str, str] = {}
            if self.engine is None and self.parked:
                self.seen_event = event_id  # loaded again (with the registry's news) on use
                return
            if self.engine is None:
                await self._load_backbone(failures)
            if self.engine is None:
                self._publish(ServingState(failures=failures))
                self.seen_event = event_id
                return
            desired = await asyncio.to_thread(self.store.active_domains, self.scope)
            wanted: set[tuple[str, int]] = set(desired.items())
            domains: dict[str, DomainEntry] = {}
            for name, version in sorted(desired.items()):
                entry = await self._domain(name, version, module_failures)
                if entry is not None:
                    domains[name] = entry
            pair = language_pair(self.backbone) if self.backbone is not None else None
            router = await self._routers.refresh(
                self.state.classifier, backbone=self.scope, domains=desired,
                source=pair.source if pair is not None else None, failures=failures,
                wanted=wanted)
            self._failed.forget_except({*wanted, BACKBONE_KEY})
            routers = await asyncio.to_thread(self._tenant_routers.refresh, self.scope)
            self._publish(ServingState(domains, router.classifier, failures, module_failures,
                                       desired, routers, router_note=router.note))
            self.seen_event = event_id
        await self._collect()

    async def _load_backbone(self, failures: dict[str, str]) -> None:
        """Read and verify the backbone (unless `read_backbone` has), then build its
        tensors on the engine thread (see `EngineThread`: one OpenMP team)."""
        if self._read_ahead is None and (problem := await self.read_backbone()) is not None:
            failures["backbone"] = problem
            return
        loaded, self._read_ahead = self._read_ahead, None
        assert loaded is not None  # read just now or by the residency
        try:
            self.engine = await self.engine_thread.run(self._build_engine, loaded.files)
            self.backbone = loaded.manifest
            self._failed.clear(BACKBONE_KEY)
            log.info("serving backbone %s", loaded.manifest.label)
        except Exception as error:  # retried with backoff; the server stays up
            failures["backbone"] = self._failed.record(BACKBONE_KEY, describe(error)).problem
            log.error("no backbone to serve: %s", error, exc_info=_trace(error))

    async def read_backbone(self) -> str | None:
        """Read and verify the backbone's files (a worker thread: file I/O and hashing),
        kept for the next load. The residency limit calls it before it unloads another
        backbone to make room, so that a damaged one fails here and costs the healthy one
        nothing. Why the files cannot be read (the failure recorded, with its backoff), or
        None."""
        waiting = self._failed.waiting(BACKBONE_KEY)
        if waiting is not None:
            return waiting.problem
        try:
            self._read_ahead = await asyncio.to_thread(self.store.load_backbone, self.requested)
        except Exception as error:  # retried with backoff; the server stays up
            log.error("no backbone to serve: %s", error, exc_info=_trace(error))
            return self._failed.record(BACKBONE_KEY, describe(error)).problem
        return None

    def forget_read_backbone(self) -> None:
        """No room was made after all: do not keep the files read in memory."""
        self._read_ahead = None

    def _build_engine(self, files: Mapping[str, bytes]) -> Engine:
        return build_engine(files, engine_options(self.settings.engine),
                            loader=self._engine_loader, observer=self.metrics.on_engine_event)

    async def _domain(self, name: str, version: int,
                      failures: dict[str, str]) -> DomainEntry | None:
        """The entry of an active version: the current one, or freshly loaded."""
        current = self.state.domains.get(name)
        if current is not None and current.version == version:
            return current
        failure = self._failed.waiting((name, version))
        if failure is None:
            try:
                entry = await self.preload(name, version)
                self._preloaded.pop(entry.module_id, None)
                return entry
            except Exception as error:  # any failure stays local to this domain
                failure = self._failed.record((name, version),
                                              f"version {version}: {describe(error)}")
                self.metrics.load_failures.labels(kind="module").inc()
                log.error("module %s@%d failed to load (attempt %d, next in %.0f s): %s",
                          name, version, failure.attempts,
                          failure.retry_at - time.monotonic(), error, exc_info=_trace(error))
        failures[name] = failure.problem
        return current  # the previous version keeps serving, if there is one

    async def preload(self, name: str, version: int) -> DomainEntry:
        """Load, verify (fingerprint, shapes), register and activate one module version,
        ahead of serving it: an activation checks the version this way before it flips the
        registry, and the refresh that follows finds it ready."""
        key = ModuleRef(name, version).key
        entry = self._preloaded.get(key)
        if entry is None:
            entry = await self._register(name, version)
        await self.engine_thread.run(self._engine().modules.activate, key)
        self._preloaded[key] = entry
        self._failed.clear((name, version))  # e.g. an operator's retry succeeded
        return entry

    async def _register(self, name: str, version: int) -> DomainEntry:
        """Read and verify a module version (a worker thread), then convert and register
        its tensors on the engine thread."""
        loaded = await asyncio.to_thread(self._load_artifact, name, version)
        return await self.engine_thread.run(self._register_loaded, name, version, loaded)

    def _register_loaded(self, name: str, version: int, loaded: LoadedArtifact) -> DomainEntry:
        engine = self._engine()
        config = dict(loaded.manifest.config)
        engine.register_module(ModuleRef(name, version).key, config, module_params(loaded.files))
        family = get_family(str(config.get("family")))
        size = family.parameter_count(engine.config, family.normalise(config))
        return DomainEntry(name, version, family.name, size, family.mixes_domains)

    def _load_artifact(self, name: str, version: int) -> LoadedArtifact:
        """A module version read and verified against the serving backbone."""
        # a compact re-store also serves the modules of the backbone it re-stores
        fingerprints = served_fingerprints(self.backbone) if self.backbone else None
        return self.store.load("module", name, version, expected_fingerprint=fingerprints,
                               backbone=self.scope)

    def _load_module(self, name: str, version: int) -> tuple[dict[str, Any], Params]:
        loaded = self._load_artifact(name, version)
        return dict(loaded.manifest.config), module_params(loaded.files)

    def _engine_loader(self, value: str) -> tuple[dict[str, Any], Params]:
        """The engine's loader, a safety net: reload an evicted `"<domain>@<version>"` from
        the store on the engine thread (the scheduler normally reloads it first, off it)."""
        self.metrics.module_reloads.labels(thread="engine").inc()
        log.warning("module %s was read on the engine thread, inside a batch", value)
        return self._load_module(*ModuleRef.parse(value))

    def current_engine(self) -> Engine:
        """The engine serving now (continuous batching's live rows join it; engine thread)."""
        return self._engine()

    @property
    def scope(self) -> str | None:
        """The backbone whose modules and router this runtime serves (the registry's
        `backbone` column); None before a backbone is loaded."""
        return self.backbone.name if self.backbone is not None else self.requested

    @property
    def available(self) -> bool:
        """Loaded, or being loaded, or unloaded by the residency limit (loaded on demand:
        a request retries a failed reload)."""
        return self.engine is not None or (self.backbone is not None and (
            self.parked or "backbone" not in self.state.failures))

    async def unload(self) -> None:
        """Drop the engine (backbone and modules) and park: the residency limit needs the
        memory. The caller makes sure that nothing runs on it (no request, nothing
        scheduled)."""
        async with self._lock:
            await self.engine_thread.run(self._drop_engine)

    def _drop_engine(self) -> None:
        # on the engine thread: the engine's tensors were made there and are freed there
        self.engine = None
        self.parked = True
        self.state = ServingState()
        self._holds = ModuleHolds()
        self._preloaded = {}

    def _engine(self) -> Engine:
        if self.engine is None:
            raise NotReady("no backbone is loaded: " + self.state.failures.get("backbone", ""))
        return self.engine

    # -- state, holds and retirement ---------------------------------------------------
    def _publish(self, state: ServingState) -> None:
        self._holds.replace(self.state.module_ids(), state.module_ids())
        self.state = state

    def hold(self, module_ids: Iterable[str]) -> bool:
        """Count in-flight use of modules; False when one was already unloaded (the
        caller routes again with the current state)."""
        return self._holds.hold(module_ids, served=self.state.module_ids())

    def release(self, module_ids: Iterable[str]) -> None:
        if self._holds.release(module_ids):
            task = asyncio.get_running_loop().create_task(self._collect())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _collect(self) -> None:
        """Remove retired versions that no request holds any more."""
        for value in self._holds.take_idle():
            await self.engine_thread.run(self._remove, value)

    def _remove(self, value: str) -> None:
        if self.engine is None or value in self.state.module_ids():  # served again: keep
            return
        try:
            self.engine.modules.remove(value)
            log.info("removed retired module %s", value)
        except ResidencyError as error:  # running again (a quick rollback): keep it
            log.info("kept module %s: %s", value, error)

    def in_flight(self, domain: str) -> list[str]:
        return self._holds.in_flight(domain)

    async def drain(self, domain: str, *, timeout: float) -> bool:
        """Wait until no request holds any version of `domain`; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.in_flight(domain):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        await self._collect()
        return True

    # -- serving -----------------------------------------------------------------------
    def run_batch(self, jobs: Sequence[SentenceJob],
                  options: SearchOptions) -> list[list[Hypothesis]]:
        """The scheduler's batch runner (called on the engine thread)."""
        return self._engine().translate(jobs, options)

    def retry_due(self) -> bool:
        """A failed load is due for another attempt (the poller then refreshes)."""
        return self._failed.retry_due()

    # -- reloading evicted modules (the scheduler's Residency) ------------------------
    def missing(self, module_ids: Iterable[str]) -> set[str]:
        """Modules in neither residency tier: running them now would read and hash their
        files on the engine thread, in the middle of a batch."""
        engine = self.engine
        if engine is None:
            return set()
        return {m for m in module_ids if not engine.modules.resident(m)}

    async def reload(self, module_id: str) -> None:
        """Read an evicted module back into host memory off the engine thread
        (server/serving/read_back.py); its sentences may join the very next batch."""
        self.metrics.module_reloads.labels(thread="worker").inc()
        started = time.perf_counter()
        await read_back(self._engine(), self.engine_thread,
                        lambda key: self._load_module(*ModuleRef.parse(key)), module_id)
        self.metrics.module_read_seconds.observe(time.perf_counter() - started)

    def residency(self) -> dict[str, int]:
        if self.engine is None:
            return {}
        snapshot = self.engine.modules.snapshot()
        return {"host": len(snapshot["host"]), "device": len(snapshot["device"]),
                "host_bytes": snapshot["host_bytes"]}

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, checks) of /health/ready (see `server.serving.readiness`)."""
        return readiness(self.state, backbone=self.backbone, engine_loaded=self.engine is not None,
                         mixture=self.settings.routing.mixture,
                         unloaded=(self.engine is None and self.backbone is not None
                                   and "backbone" not in self.state.failures))


BACKBONE_KEY = ("backbone", 0)


def _trace(error: BaseException) -> BaseException | None:
    """Log a traceback only for unexpected errors; store errors explain themselves."""
    return None if isinstance(error, (StoreError, ValueError, ResidencyError)) else error


def engine_options(settings: EngineSettings) -> EngineOptions:
    """The engine the server builds from its settings (benchmarks build the same one)."""
    path = host_paths.for_settings(settings)  # CPU: the host's path (logged at start-up)
    return EngineOptions(device=settings.device, dtype=path.dtype if path else settings.dtype,
                         int8=path.int8 if path else settings.int8,
                         quantized_engine=path.quantized_engine if path else None,
                         packed=settings.packed, module_int8=settings.module_int8,
                         module_bf16=settings.module_bf16,
                         module_grouped=settings.module_grouped, fixed_steps=settings.fixed_steps,
                         slots_per_bank=settings.slots_per_bank,
                         host_capacity=settings.host_capacity,
                         host_budget_bytes=settings.host_budget_bytes)
