"""Admin endpoints under /admin (bearer token `NMT_ADMIN_TOKEN`): domain versions, upload,
activation and rollback, deletion.

Training a new domain from data (`POST /admin/domains`) and following its job
(`GET /admin/jobs/{id}`) belong to the training sidecar: their router lives in
`server/api/routes_jobs.py` (see server/api/__init__.py, TRAINING SIDECAR).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, status

from server.api.deps import AccessDep, AdminDep, SettingsDep, require_admin
from server.api.schemas import MAX_NAME_CHARS, ErrorResponse
from server.api.schemas_admin import (
    ActivateRequest,
    AdminDomain,
    AdminDomainsResponse,
    DeleteResponse,
    VersionInfo,
    VersionResponse,
)
from server.api.tenant_claims import claim_created
from server.api.uploads import receive_archive
from server.core.tenancy import current_scope

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse,
                                    "description": "wrong token, or admin disabled"}})
DEFAULT_PAGE, MAX_PAGE = 100, 1000  # domains per page of GET /admin/domains
PageLimit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="domains per page")]
PageAfter = Annotated[str | None, Query(
    max_length=MAX_NAME_CHARS, description="the `next_after` of the previous page: the "
                                           "domains named after it")]
DomainPath = Annotated[str, Path(max_length=MAX_NAME_CHARS, description="the domain's name")]
UPLOAD_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "application/gzip": {"schema": {"type": "string", "format": "binary"}},
    "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
        "file": {"type": "string", "format": "binary"}}}}}}}


@router.get("/domains", response_model=AdminDomainsResponse)
async def list_domains(admin: AdminDep, limit: PageLimit = DEFAULT_PAGE,
                       after: PageAfter = None) -> AdminDomainsResponse:
    """The domains, in name order, a page at a time, each with all its versions and which
    one is active; `next_after` is the cursor of the next page (null: the last). A
    tenant's admin sees the shared ones and its tenant's: its page may hold fewer."""
    scope = current_scope()
    page, next_after = await admin.list_domains(after=after, limit=limit)
    listed = [d for d in page if scope.sees("domain", d.name)]
    return AdminDomainsResponse(domains=[
        AdminDomain(name=d.name, active_version=d.active_version, versions=[
            VersionInfo(version=v.version, created_at=v.created_at, family=v.family,
                        active=v.active, scores=dict(v.scores)) for v in d.versions])
        for d in listed], next_after=next_after)


@router.post("/domains/{name}/versions", response_model=VersionResponse,
             status_code=status.HTTP_201_CREATED, openapi_extra=UPLOAD_BODY,
             responses={413: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def upload_version(name: DomainPath, request: Request, admin: AdminDep, settings: SettingsDep,
                         access: AccessDep,
                         activate: Annotated[bool, Query(
                             description="serve it right away")] = False) -> VersionResponse:
    """Upload a prebuilt module artifact (tar.gz body, or multipart field `file`). It is
    verified (hashes, backbone fingerprint, tensor shapes) before it is published. A
    tenant's admin uploads its tenant's domains (named `<tenant>-...`)."""
    current_scope().check_manages("domain", name)
    archive = await receive_archive(request, limit=settings.limits.max_upload_bytes)
    try:
        manifest = await admin.upload(name, archive, activate=activate)
    finally:
        archive.close()
    await claim_created(access, "domain", name)
    entry = admin.runtime.state.domains.get(name)
    served = entry is not None and entry.version == manifest.version
    return VersionResponse(name=name, version=manifest.version, active=served,
                           family=str(manifest.config.get("family", "")),
                           size=entry.size if entry is not None and served else None)


@router.post("/domains/{name}/activate", response_model=VersionResponse,
             responses={404: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def activate_version(name: DomainPath, body: ActivateRequest,
                           admin: AdminDep) -> VersionResponse:
    """Serve a version (roll forward or back); answers once it is loaded and served."""
    current_scope().check_manages("domain", name)
    entry = await admin.activate(name, body.version)
    return VersionResponse(name=name, version=entry.version, active=True, family=entry.family,
                           size=entry.size)


@router.delete("/domains/{name}", response_model=DeleteResponse,
               responses={404: {"model": ErrorResponse}})
async def delete_domain(name: DomainPath, admin: AdminDep) -> DeleteResponse:
    """Stop serving a domain once in-flight requests using it finish; artifacts stay."""
    current_scope().check_manages("domain", name)
    deleted = await admin.delete(name)
    return DeleteResponse(name=deleted.name, deactivated_version=deleted.deactivated_version,
                          drained=deleted.drained)
