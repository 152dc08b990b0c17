"""Admin endpoints of corrections (bearer token `NMT_ADMIN_TOKEN`): list, export (JSON
lines), delete a key's or a domain's corrections at once (privacy requests), approve or
reject anonymous ones in bulk, counts per domain (the web page's Operate view), and a
refresh of a domain's module from its corrections (a training job,
trainer/corrections/refresh_job.py). A tenant's admin manages the corrections of its
own domains: it names one (`domain`) in every call."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import StreamingResponse

from model_store.correction_rows import CorrectionFilter, CorrectionStatus
from server.api.admin_views import correction_info, correction_line, job_response, last_refresh
from server.api.deps import AdminDirectionDep, DeskDep, require_admin
from server.api.schemas import ErrorResponse
from server.api.schemas_corrections import (
    CorrectionList,
    CorrectionSummary,
    Deleted,
    DomainCounts,
    RefreshRequest,
    Reviewed,
    ReviewRequest,
)
from server.api.schemas_jobs import JobResponse
from server.core.errors import Forbidden, InvalidInput, NotReady
from server.core.tenancy import current_scope
from server.corrections.refreshes import last_refresh_jobs
from server.serving.refresh_jobs import submit_refresh

router = APIRouter(prefix="/admin/corrections", tags=["admin", "corrections"],
                   dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse,
                                    "description": "wrong token, or admin disabled"}})
MAX_LISTED = 1000
MAX_OFFSET = 2**63 - 1  # SQL OFFSET is a signed 64-bit integer (SQLite and PostgreSQL)
Domain = Annotated[str | None, Query(max_length=64, description="the domain's corrections")]
KeyId = Annotated[str | None, Query(max_length=36, description="an API key's id (GET "
                                                               "/admin/keys)")]
Status = Annotated[CorrectionStatus | None, Query(description="accepted, pending, approved "
                                                              "or rejected")]


@router.get("", response_model=CorrectionList)
async def list_corrections(
        desk: DeskDep, domain: Domain = None, key_id: KeyId = None, status: Status = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 100,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0) -> CorrectionList:
    """Corrections, oldest first."""
    which = _readable(CorrectionFilter(domain=domain, key_id=key_id, status=status))
    records = await asyncio.to_thread(desk.registry.list_corrections, which, limit=limit,
                                      offset=offset)
    return CorrectionList(corrections=[correction_info(r) for r in records])


@router.get("/export", response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}}}})
async def export_corrections(desk: DeskDep, domain: Domain = None, key_id: KeyId = None,
                             status: Status = None) -> StreamingResponse:
    """Every matching correction, one JSON object a line."""
    which = _readable(CorrectionFilter(domain=domain, key_id=key_id, status=status))
    records = await asyncio.to_thread(desk.registry.list_corrections, which)
    return StreamingResponse(map(correction_line, records), media_type="application/x-ndjson",
                             headers={"Content-Disposition":
                                      'attachment; filename="corrections.jsonl"'})


@router.get("/summary", response_model=CorrectionSummary)
async def summary(desk: DeskDep, request: Request) -> CorrectionSummary:
    """Counts per domain, and each domain's last refresh with its gate's scores."""
    counts = await asyncio.to_thread(desk.registry.count_corrections)
    jobs = await asyncio.to_thread(last_refresh_jobs, request.app.state.store)
    scope = current_scope()
    if not scope.operator:  # a tenant's admin: its own domains'
        counts = {d: c for d, c in counts.items() if scope.owner("domain", d) == scope.tenant}
        jobs = {d: j for d, j in jobs.items() if scope.owner("domain", d) == scope.tenant}
    return CorrectionSummary(domains={d: DomainCounts(**c) for d, c in sorted(counts.items())},
                             refreshes={d: last_refresh(job) for d, job in jobs.items()})


@router.delete("", response_model=Deleted, responses={422: {"model": ErrorResponse}})
async def delete_corrections(desk: DeskDep, domain: Domain = None,
                             key_id: KeyId = None) -> Deleted:
    """Delete every correction of a key (`key_id`) or of a domain (`domain`), or of both."""
    if domain is None and key_id is None:
        raise InvalidInput("say whose corrections to delete: key_id and/or domain",
                           field="key_id")
    _own(domain)
    which = CorrectionFilter(domain=domain, key_id=key_id)
    return Deleted(deleted=await asyncio.to_thread(desk.registry.delete_corrections, which))


@router.post("/review", response_model=Reviewed, responses={422: {"model": ErrorResponse}})
async def review(body: ReviewRequest, desk: DeskDep) -> Reviewed:
    """Approve (they may train from now on) or reject pending (anonymous) corrections."""
    chosen = sum((body.ids is not None, body.domain is not None, body.all))
    if chosen != 1:
        raise InvalidInput("name the pending corrections with exactly one of ids, domain "
                           "or all: true", field="ids")
    _own(body.domain)
    which = CorrectionFilter(ids=body.ids, domain=body.domain)
    changed = await asyncio.to_thread(desk.review, which, approve=body.action == "approve")
    return Reviewed(changed=changed)


@router.post("/refresh", response_model=JobResponse, status_code=status.HTTP_202_ACCEPTED,
             responses={404: {"model": ErrorResponse}, 409: {"model": ErrorResponse},
                        422: {"model": ErrorResponse}, 503: {"model": ErrorResponse}})
async def refresh(body: RefreshRequest, request: Request, response: Response,
                  direction: AdminDirectionDep) -> JobResponse:
    """Queue a refresh of the domain's module from its new usable corrections (accepted,
    or approved); follow the job at `Location` (`/admin/jobs/{id}`): its scores show the
    corrections chosen and the gate, its error why a refresh was refused."""
    _own(body.domain)
    runtime = direction.runtime if direction is not None else request.app.state.runtime
    backbone = runtime.backbone
    if backbone is None:
        raise NotReady("no backbone is loaded; see /health/ready")
    job = await asyncio.to_thread(submit_refresh, request.app.state.store, body.domain,
                                  backbone=backbone, trigger="admin", options=body.options,
                                  require_new=True)
    response.headers["Location"] = f"/admin/jobs/{job.id}"
    return job_response(job)


def _own(domain: str | None) -> None:
    """A tenant's admin works on the corrections of one of its own domains (404 for
    another tenant's, 403 for a shared one or none named); the operator on any."""
    scope = current_scope()
    if scope.operator:
        return
    if domain is None:
        raise Forbidden(f"a tenant's admin names one of its domains ({scope.tenant}-...) "
                        "with `domain`", field="domain")
    scope.check_manages("domain", domain)


def _readable(which: CorrectionFilter) -> CorrectionFilter:
    """What a tenant's admin may read: every correction of one of its own domains (404
    for another tenant's), else (a shared domain, or none named) its own keys'
    corrections only; the operator reads all."""
    scope = current_scope()
    if scope.operator:
        return which
    if which.domain is not None and scope.owner("domain", which.domain) is not None:
        scope.check_manages("domain", which.domain)
        return which
    return replace(which, tenant=scope.tenant)
