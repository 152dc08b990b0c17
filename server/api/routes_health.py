"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from server.api.deps import MetricsDep, RuntimeDep
from server.api.schemas import ErrorResponse
from server.api.schemas_served import LiveResponse, ReadyResponse
from server.operations.lifecycle import Lifecycle
from server.operations.replica import replica_name
from server.operations.watchdog import Watchdog
from server.serving.directions import Directions

router = APIRouter(tags=["health"])


@router.get("/health/live", response_model=LiveResponse,
            responses={503: {"model": ErrorResponse,
                             "description": "the scheduler or the engine is dead or stuck"}})
async def live(request: Request) -> LiveResponse | JSONResponse:
    """The event loop answers, the scheduler's batching loop runs and beats, and no engine
    call has been stuck past `NMT_LIVENESS_STALL_S` (server/operations/watchdog.py)."""
    watchdog: Watchdog | None = getattr(request.app.state, "watchdog", None)
    problems = watchdog.problems() if watchdog is not None else []
    if problems:
        return JSONResponse({"error": {"code": "not_alive", "message": "; ".join(problems)}},
                            status_code=503)
    return LiveResponse(status="alive")


@router.get("/health/ready", response_model=ReadyResponse,
            responses={503: {"model": ErrorResponse, "description": "not ready (see checks)"}})
async def ready(request: Request, runtime: RuntimeDep) -> ReadyResponse | JSONResponse:
    """Ready when the backbone is loaded (with several directions: when any direction
    serves; `checks.directions` has a line per direction) and the server is not draining
    for shutdown; 503 otherwise. Damage stays local: a broken domain or classifier, or
    another direction's backbone, is listed in `checks`, not fatal. `checks` says what is
    loaded (or absent, or failed, or broken); `replica` and `registry_revision` say which
    process answered and how far it has applied the registry's changes (replicas converge
    on the same revision)."""
    is_ready, checks = runtime.readiness()
    directions: Directions | None = getattr(request.app.state, "directions", None)
    if directions is not None and len(directions.all) > 1:  # the default one's checks, and
        is_ready, checks["directions"] = directions.readiness()  # a line per direction
    replica, revision = replica_name(), runtime.seen_event
    lifecycle: Lifecycle = request.app.state.lifecycle
    if lifecycle.draining:
        checks["draining"] = "shutting down: finishing in-flight requests, taking no new ones"
        return JSONResponse({"error": {"code": "not_ready", "message": (
            "not ready: the server is shutting down (see checks)")}, "replica": replica,
            "registry_revision": revision, "checks": checks}, status_code=503)
    if is_ready:
        return ReadyResponse(status="ready", replica=replica, registry_revision=revision,
                             checks=checks)
    failed = [name for name, value in checks.items()
              if isinstance(value, str) and value.startswith("failed")]
    failed += [f"module {name}" for name, value in checks["modules"].items()
               if "failed" in value and not value.startswith("loaded")]
    message = "not ready: " + (", ".join(failed) or "loading") + " (see checks)"
    return JSONResponse({"error": {"code": "not_ready", "message": message},
                         "replica": replica, "registry_revision": revision, "checks": checks},
                        status_code=503)


@router.get("/metrics", response_class=Response)
async def metrics(runtime: RuntimeDep, collectors: MetricsDep) -> Response:
    """Prometheus text exposition of this server's collectors."""
    collectors.set_resident(runtime.residency())
    return Response(collectors.render(), media_type=CONTENT_TYPE_LATEST)
