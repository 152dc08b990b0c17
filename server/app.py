"""`create_app(settings)`: the FastAPI application. The lifespan builds the store, the
runtime (engine + served modules + classifier), the scheduler, the translator and the
registry poller (woken by NOTIFY where the registry is PostgreSQL), and puts them on
`app.state`; routes reach them through `api/deps.py`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from model_store.memory_rows import MEMORY_CHANNEL
from model_store.notify import change_waiter
from server.access import AccessGuard
from server.api import (
    ADMIN_LISTENER_EXTRA,
    ADMIN_ROUTERS,
    PUBLIC_ROUTERS,
    PUBLIC_WITHOUT_ADMIN,
)
from server.api.body_limit import BodyLimitMiddleware
from server.api.errors import install_error_handlers
from server.api.middleware import MetricsMiddleware
from server.api.modernmt.method_override import MethodOverrideMiddleware
from server.api.openapi_security import document_api_keys
from server.core.errors import Draining
from server.core.metrics import Metrics
from server.corrections.desk import CorrectionDesk
from server.documents.jobs import DocumentJobs, job_root
from server.documents.service import DocumentService
from server.engine import host_paths
from server.execution.layout import ExecutionLayout
from server.execution.training_share import TrainingShare, keep_training_share
from server.memories.imports import MemoryImports
from server.operations.lifecycle import RETRY_AFTER_S, DrainMiddleware, Lifecycle
from server.operations.replica import ReplicaHeaderMiddleware
from server.operations.watchdog import Watchdog
from server.quality.estimators import QUALITY_DIR, EstimatorBook
from server.quality.review import QualityReview
from server.scheduling.clients import ClientMiddleware
from server.scheduling.scheduler import Scheduler
from server.serving.batch_jobs import BatchJobs
from server.serving.directions import (
    Directions,
    open_direction,
    residency_for,
    served_backbones,
)
from server.serving.gate_calibrator import GateCalibrator
from server.serving.watch import watch_registry
from server.settings import Settings
from server.textproc.languages import LanguageDetectors
from server.web import install_web

DESCRIPTION = """One frozen Transformer backbone shared by hot-swappable domain modules.
Requests name a domain, a mixture of domains, or let the classifier route them.
Admin endpoints need `Authorization: Bearer $NMT_ADMIN_TOKEN`. See docs/API.md."""

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    metrics: Metrics = app.state.metrics
    cpu_path = host_paths.for_settings(settings.engine)  # an impossible choice stops here
    if cpu_path is not None:
        log.info("engine CPU path: %s", cpu_path.describe())
        metrics.cpu_path.labels(path=cpu_path.path,
                                quantized_engine=cpu_path.quantized_engine).set(1)
    # which thread runs what, on which CPUs, at which priority (server/execution/)
    layout = ExecutionLayout.start(settings.execution)
    engine_thread = layout.engine_thread
    store = await asyncio.to_thread(settings.open_store)
    backbones = await asyncio.to_thread(served_backbones, store, settings.backbone,
                                        every=settings.all_backbones)
    # the default direction first: the one requests without languages use, as before
    # directions existed; its objects are also app.state's runtime, translator, ...
    # one review for every direction: it scores each sentence with the estimator of the
    # backbone that translated it (EstimatorBook, keyed by the backbone's fingerprint)
    quality = QualityReview(
        engine_thread, settings.quality, metrics=metrics,
        max_beam=settings.decoding.max_beam_size, languages=app.state.language_detectors,
        estimators=EstimatorBook([settings.store_dir / QUALITY_DIR,
                                  settings.builtin_dir / QUALITY_DIR])
    ) if settings.quality.enabled else None
    # NMT_DIRECTIONS__RESIDENT: at most that many of them loaded at once (None: every one)
    residency = residency_for(settings, metrics, len(backbones))
    served = [name for name in backbones if name is not None]  # None: the only one
    default = await open_direction(store, settings, backbone=backbones[0], metrics=metrics,
                                   engine_thread=engine_thread, quality=quality,
                                   residency=residency, text_worker=layout.text_worker,
                                   served=served)
    opened = [default]
    for name in backbones[1:]:
        opened.append(await open_direction(
            store, settings, backbone=name, metrics=metrics, engine_thread=engine_thread,
            preparation=default.translator.preparation, quality=quality,
            residency=residency, served=served))
    app.state.residency = residency
    app.state.directions = Directions(opened, app.state.language_detectors)
    app.state.store = store
    app.state.access = AccessGuard(store.registry, settings.access, metrics=metrics)
    app.state.runtime = default.runtime
    app.state.scheduler = default.scheduler
    app.state.engine_thread = engine_thread
    app.state.glossaries = default.glossaries
    app.state.translator = default.translator
    documents = DocumentService(app.state.translator, settings.documents,
                                app.state.directions)
    app.state.document_jobs = DocumentJobs(
        job_root(settings.store_dir, settings.documents.jobs_dir), documents)
    await app.state.document_jobs.start()
    app.state.batch_jobs = BatchJobs[Any](ttl_s=settings.scheduler.batch_job_ttl_s,
                                          per_client=settings.scheduler.max_batch_jobs)
    books = [d.memories for d in opened if d.memories is not None]
    app.state.memory_imports = MemoryImports(
        store.registry, settings.memories, after=lambda: [book.sync() for book in books])
    app.state.corrections = CorrectionDesk(
        store.registry, default.runtime, default.translator.policy,
        app.state.language_detectors, settings.corrections,
        memories=default.memory_admin(app.state.memory_imports))
    app.state.admin = default.admin
    app.state.watchdog = Watchdog(default.scheduler, engine_thread,
                                  stall_s=settings.liveness_stall_s,
                                  others={d.name: d.scheduler for d in opened[1:]})
    waiters = [change_waiter(store.registry.url) for _ in opened]
    background = [
        asyncio.create_task(watch_registry(d.runtime, settings.poll_interval_s, changes=w),
                            name=f"nmt-registry-poller-{i}")
        for i, (d, w) in enumerate(zip(opened, waiters, strict=True))]
    app.state.training_share = TrainingShare(engine_thread,
                                             settings.execution.training_cpus)
    background.append(asyncio.create_task(
        keep_training_share(app.state.training_share, store.registry,
                            settings.poll_interval_s), name="nmt-training-share"))
    background += [asyncio.create_task(d.glossaries.keep_defaults_fresh(),
                                       name=f"nmt-glossary-defaults-{i}")
                   for i, d in enumerate(opened)]
    memory_waiters = [change_waiter(store.registry.url, MEMORY_CHANNEL) for _ in books]
    background += [asyncio.create_task(book.keep_fresh(waiter), name=f"nmt-memories-{i}")
                   for i, (book, waiter) in enumerate(zip(books, memory_waiters, strict=True))]
    background += [asyncio.create_task(GateCalibrator(
        d.memories, d.runtime, d.scheduler, settings.decoding).keep_calibrated(),
        name=f"nmt-memory-gates-{i}") for i, d in enumerate(opened) if d.memories is not None]
    app.state.lifecycle.at_bound.append(functools.partial(
        answer_the_rest, app, [d.scheduler for d in opened]))
    try:
        yield
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await app.state.document_jobs.stop()
        await app.state.batch_jobs.stop()
        await app.state.memory_imports.stop()
        for waiter in [*waiters, *memory_waiters]:
            await waiter.close()
        for direction in opened:
            await direction.scheduler.stop()
        app.state.translator.preparation.close()
        await layout.stop()
        store.close()


async def answer_the_rest(app: FastAPI, schedulers: list[Scheduler]) -> None:
    """The drain bound passed (server/operations/lifecycle.py): document jobs go back to
    their queue, batch jobs fail, and every sentence still waiting is answered 503."""
    await app.state.document_jobs.stop()
    await app.state.batch_jobs.stop()
    for scheduler in schedulers:
        scheduler.refuse_waiting(Draining(
            "the server is shutting down and stopped waiting for this work "
            "(NMT_SHUTDOWN_DRAIN_S); retry on another replica", retry_after=RETRY_AFTER_S))


UPLOAD_PATH = re.compile(
    r"/admin/domains(/[^/]+/versions)?|/translate/file|/libretranslate/translate_file|(/deepl)?/v2/document"
    r"|/admin/memories/[^/]+/import")


def streams_own_upload(method: str, path: str) -> bool:
    """Module, domain, document and memory uploads stream their bodies under their own
    limits."""
    return method == "POST" and UPLOAD_PATH.fullmatch(path) is not None


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    metrics = Metrics()
    app = FastAPI(title="nmt-server", version="0.1.0", description=DESCRIPTION,
                  lifespan=lifespan)
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.lifecycle = Lifecycle()
    app.state.language_detectors = LanguageDetectors()
    install_error_handlers(app, metrics)
    app.add_middleware(ClientMiddleware)  # innermost: the routes run in its context
    app.add_middleware(BodyLimitMiddleware, limit=settings.limits.max_body_bytes,
                       streams_itself=streams_own_upload, metrics=metrics)
    app.add_middleware(DrainMiddleware, lifecycle=app.state.lifecycle)  # before any body
    app.add_middleware(MetricsMiddleware, metrics=metrics)  # counts the 413s and 503s too
    app.add_middleware(ReplicaHeaderMiddleware)
    app.add_middleware(MethodOverrideMiddleware)  # ModernMT's client: POST + the method
    separate_admin = settings.admin_port is not None
    for router in ([*PUBLIC_ROUTERS, *PUBLIC_WITHOUT_ADMIN] if separate_admin
                   else [*PUBLIC_ROUTERS, *ADMIN_ROUTERS]):
        app.include_router(router)
    install_web(app)
    document_api_keys(app, required=settings.access.api_keys)
    return app


def create_admin_app(app: FastAPI) -> FastAPI:
    """The admin listener's app (`NMT_ADMIN_PORT`): the /admin routes (and the ModernMT
    door, memories included: server/api/__init__.py) over the main app's
    state (store, runtime, metrics), which the main app's lifespan builds; it has no
    lifespan of its own and is served only once the main app has started."""
    settings: Settings = app.state.settings
    admin = FastAPI(title="nmt-server admin", version="0.1.0", description=DESCRIPTION)
    admin.state = app.state
    install_error_handlers(admin, app.state.metrics)
    admin.add_middleware(BodyLimitMiddleware, limit=settings.limits.max_body_bytes,
                         streams_itself=streams_own_upload, metrics=app.state.metrics)
    admin.add_middleware(DrainMiddleware, lifecycle=app.state.lifecycle)
    admin.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    admin.add_middleware(ReplicaHeaderMiddleware)
    admin.add_middleware(MethodOverrideMiddleware)  # the ModernMT door is here too
    for router in [*ADMIN_ROUTERS, *ADMIN_LISTENER_EXTRA]:
        admin.include_router(router)
    return admin
