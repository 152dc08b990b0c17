"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from server.api.deps import MetricsDep, RuntimeDep
from server.api.schemas import ErrorResponse, LiveResponse, ReadyResponse
from server.replica import replica_name

router = APIRouter(tags=["health"])


@router.get("/health/live", response_model=LiveResponse)
async def live() -> LiveResponse:
    """The process is up and its event loop answers."""
    return LiveResponse(status="alive")


@router.get("/health/ready", response_model=ReadyResponse,
            responses={503: {"model": ErrorResponse, "description": "not ready (see checks)"}})
async def ready(runtime: RuntimeDep) -> ReadyResponse | JSONResponse:
    """Ready when the backbone, the classifier (if one is active) and every active domain
    module are loaded; 503 otherwise. `checks` says what is loaded (or absent, or failed);
    `replica` and `registry_revision` say which process answered and how far it has applied
    the registry's changes (replicas converge on the same revision)."""
    is_ready, checks = runtime.readiness()
    replica, revision = replica_name(), runtime.seen_event
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
