"""Typed dependencies: the objects the lifespan put on `app.state`, and admin auth. Every
`Depends` provider of the native API and its `Annotated` alias is here (routes hold
routes; tests/contract/test_api_layer.py); tests replace any of them with
`app.dependency_overrides`.

The getters are `async def` although they never wait: FastAPI runs a plain `def`
dependency in its thread pool, and at saturation a third of the event loop thread's py-spy
samples were those thread hand-offs (two per request, each waking a worker thread beside
the engine's)."""

from __future__ import annotations

import hmac
import math
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from server.access import AccessGuard
from server.core.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from server.core.metrics import Metrics
from server.core.tenancy import OPERATOR, TenantScope, current_scope, enter_scope
from server.corrections.desk import CorrectionDesk
from server.documents.jobs import DocumentJobs
from server.documents.service import DocumentService
from server.memories.admin import MemoryAdmin
from server.serving.admin import DomainAdmin
from server.serving.admin_jobs import JobAdmin
from server.serving.batch_jobs import BatchJobs
from server.serving.directions import Direction, Directions
from server.serving.glossaries import GlossaryBook
from server.serving.residency import BackboneResidency
from server.serving.runtime import Runtime
from server.serving.translation import Translator
from server.settings import Settings

bearer = HTTPBearer(auto_error=False, description="NMT_ADMIN_TOKEN")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False,
                              description="an API key (needed with NMT_ACCESS__API_KEYS)")


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_translator(request: Request) -> Translator:
    translator: Translator = request.app.state.translator
    return translator


async def get_directions(request: Request) -> Directions | None:
    """Every served direction (None in an app whose lifespan has not run)."""
    directions: Directions | None = getattr(request.app.state, "directions", None)
    return directions


BackboneQuery = Annotated[str | None, Query(
    max_length=64, description="the direction (backbone name, as GET /languages lists it) "
                               "to administer; default: the default direction")]


async def get_direction(request: Request, backbone: BackboneQuery = None) -> Direction | None:
    """The direction an admin call names with `?backbone=`; None: the default one."""
    if backbone is None:
        return None
    directions: Directions | None = getattr(request.app.state, "directions", None)
    found = directions.by_name(backbone) if directions is not None else None
    if found is None:
        served = ", ".join(d.name for d in directions.all) if directions else "none"
        raise NotFound(f"backbone {backbone!r} is not served; served: {served}",
                       field="backbone")
    return found


AdminDirectionDep = Annotated[Direction | None, Depends(get_direction)]


async def resident_direction(request: Request,
                             direction: AdminDirectionDep) -> AsyncIterator[Direction | None]:
    """The admin call's direction, its backbone held loaded while the call runs (under
    NMT_DIRECTIONS__RESIDENT: uploads are verified against it, jobs read its shapes)."""
    residency: BackboneResidency | None = getattr(request.app.state, "residency", None)
    if residency is None:
        yield direction
        return
    runtime = direction.runtime if direction is not None else request.app.state.runtime
    async with residency.use(runtime):
        yield direction


ResidentDirectionDep = Annotated[Direction | None, Depends(resident_direction)]


async def get_admin(request: Request, direction: ResidentDirectionDep) -> DomainAdmin:
    if direction is not None:
        return direction.admin
    admin: DomainAdmin = request.app.state.admin
    return admin


async def get_glossaries(request: Request, direction: AdminDirectionDep) -> GlossaryBook:
    if direction is not None:
        return direction.glossaries
    glossaries: GlossaryBook = request.app.state.glossaries
    return glossaries


async def get_memory_admin(request: Request, direction: AdminDirectionDep) -> MemoryAdmin:
    """The translation memories of the call's direction (`?backbone=`; default: the
    default direction's); 403 when memories are off."""
    chosen = direction or request.app.state.directions.default
    admin = chosen.memory_admin(request.app.state.memory_imports)
    if admin is None:
        raise Forbidden("translation memories are off on this server "
                        "(NMT_MEMORIES__ENABLED=false)")
    return admin


async def get_access(request: Request) -> AccessGuard:
    access: AccessGuard = request.app.state.access
    return access


SettingsDep = Annotated[Settings, Depends(get_settings)]
AccessDep = Annotated[AccessGuard, Depends(get_access)]
ApiKeyDep = Annotated[str | None, Depends(api_key_header)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
TranslatorDep = Annotated[Translator, Depends(get_translator)]
DirectionsDep = Annotated[Directions | None, Depends(get_directions)]
AdminDep = Annotated[DomainAdmin, Depends(get_admin)]
GlossaryDep = Annotated[GlossaryBook, Depends(get_glossaries)]
MemoryAdminDep = Annotated[MemoryAdmin, Depends(get_memory_admin)]


async def get_job_admin(request: Request, settings: SettingsDep,
                        direction: ResidentDirectionDep) -> JobAdmin:
    """The training jobs of the admin call's direction (its backbone held loaded)."""
    runtime = direction.runtime if direction is not None else request.app.state.runtime
    return JobAdmin(request.app.state.store, runtime,
                    min_pairs=settings.limits.min_domain_pairs)


async def get_desk(request: Request) -> CorrectionDesk:
    desk: CorrectionDesk = request.app.state.corrections
    return desk


DEADLINE_HEADER = "X-NMT-Deadline"


async def client_deadline(request: Request) -> float | None:
    """The deadline in seconds the client asked for (`X-NMT-Deadline`), if any: at most
    the server's own; a request that cannot meet it behind the queued work is refused at
    once (504 with Retry-After)."""
    raw = request.headers.get(DEADLINE_HEADER)
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidInput(f"{DEADLINE_HEADER} must be a positive number of seconds, not "
                           f"{raw[:40]!r}", field=DEADLINE_HEADER)
    return seconds


async def get_batch_jobs(request: Request) -> BatchJobs[Any]:
    jobs: BatchJobs[Any] = request.app.state.batch_jobs
    return jobs


async def get_document_jobs(request: Request) -> DocumentJobs:
    jobs: DocumentJobs = request.app.state.document_jobs
    return jobs


DocumentJobsDep = Annotated[DocumentJobs, Depends(get_document_jobs)]
BatchJobsDep = Annotated[BatchJobs[Any], Depends(get_batch_jobs)]
ClientDeadlineDep = Annotated[float | None, Depends(client_deadline)]


async def get_documents(jobs: DocumentJobsDep) -> DocumentService:
    return jobs.service


JobAdminDep = Annotated[JobAdmin, Depends(get_job_admin)]
DeskDep = Annotated[CorrectionDesk, Depends(get_desk)]
DocumentsDep = Annotated[DocumentService, Depends(get_documents)]


async def require_admin(request: Request, settings: SettingsDep,
                        credentials: Annotated[HTTPAuthorizationCredentials | None,
                                               Depends(bearer)]) -> None:
    """Admin endpoints: 403 when admin is disabled (no NMT_ADMIN_TOKEN), 401 without a
    well-formed bearer token, 403 with a wrong one (constant-time comparison). The
    operator's token manages everything; a tenant admin's API key, sent as the bearer
    token, manages its tenant's resources only (the scope, server/core/tenancy.py)."""
    token = settings.admin_secret()
    if token is None:
        raise Forbidden("the admin API is disabled: set NMT_ADMIN_TOKEN to enable it")
    if credentials is None or not credentials.credentials:
        raise Unauthorized("admin endpoints need an 'Authorization: Bearer <token>' header")
    if hmac.compare_digest(credentials.credentials.encode(), token.encode()):
        enter_scope(OPERATOR)
        return
    access: AccessGuard | None = getattr(request.app.state, "access", None)
    if access is None or await access.admin_scope(credentials.credentials) is None:
        raise Forbidden("the admin token is not valid")


async def require_operator() -> None:
    """Admin endpoints of the operator only (after `require_admin`): 403 for a tenant's
    admin."""
    if not current_scope().operator:
        raise Forbidden("only the operator (NMT_ADMIN_TOKEN) may do this")


async def listing_scope(access: AccessDep, api_key: ApiKeyDep) -> TenantScope:
    """The scope of a public list (domains, languages): the tenant of the key sent, if
    any (no key, or keys off: the shared resources only)."""
    return await access.scope_of(api_key)


ListingScopeDep = Annotated[TenantScope, Depends(listing_scope)]
