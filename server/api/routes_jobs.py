"""Admin endpoints of the training sidecar (bearer token `NMT_ADMIN_TOKEN`):
`POST /admin/domains` adds a domain from parallel text (202 + a job), `GET /admin/jobs`
and `GET /admin/jobs/{job_id}` follow the jobs. Training itself runs in the sidecar
(`python -m trainer`); see server/serving/admin_jobs.py and trainer/sidecar/worker.py."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status

from model_store import JobState
from server.api.admin_views import job_response
from server.api.deps import AccessDep, JobAdminDep, SettingsDep, require_admin
from server.api.domain_upload import read_domain_upload
from server.api.list_pages import (
    DEFAULT_LIMIT,
    ListAfter,
    ListLimit,
    created_cursor,
    created_key,
    next_after,
    viewer_of,
)
from server.api.schemas import ErrorResponse
from server.api.schemas_jobs import JobListResponse, JobResponse
from server.api.tenant_claims import claim_created
from server.core.errors import NotFound
from server.core.tenancy import current_scope

router = APIRouter(prefix="/admin", tags=["admin", "jobs"], dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse,
                                    "description": "wrong token, or admin disabled"}})
FORM_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "multipart/form-data": {"schema": {"type": "object", "required": ["name", "train"],
                                       "properties": {
        "name": {"type": "string", "description": "the new domain's name"},
        "train": {"type": "string", "format": "binary",
                  "description": "UTF-8 TSV: source<TAB>target per line"},
        "dev": {"type": "string", "format": "binary",
                "description": "same format; default: held out of train"},
        "config": {"type": "string", "description": "JSON: family, its options, training "
                                                    "settings, gate_margin_bleu"}}}}}}}


@router.post("/domains", response_model=JobResponse, status_code=status.HTTP_202_ACCEPTED,
             openapi_extra=FORM_BODY,
             responses={409: {"model": ErrorResponse}, 413: {"model": ErrorResponse},
                        422: {"model": ErrorResponse}, 503: {"model": ErrorResponse}})
async def add_domain(request: Request, response: Response, jobs: JobAdminDep,
                     settings: SettingsDep, access: AccessDep) -> JobResponse:
    """Add a domain from parallel text: validates the upload, queues a training job for the
    sidecar and answers at once; follow it at `Location` (`/admin/jobs/{id}`)."""
    upload = await read_domain_upload(request, limit=settings.limits.max_domain_upload_bytes)
    current_scope().check_manages("domain", upload.name)  # a tenant's admin: its own
    job = await jobs.submit(upload)
    await claim_created(access, "domain", upload.name)
    response.headers["Location"] = f"/admin/jobs/{job.id}"
    return job_response(job)


@router.get("/jobs", response_model=JobListResponse)
async def list_jobs(jobs: JobAdminDep, state: Annotated[JobState | None, Query(
        description="only jobs in this state")] = None, limit: ListLimit = DEFAULT_LIMIT,
                    after: ListAfter = None) -> JobListResponse:
    """The training jobs, oldest first, a page at a time (`next_after`: the next page's
    cursor); a tenant's admin: those of its own domains. 422: `after` that is no cursor
    of this list."""
    page = await jobs.job_page(state=state, viewer=viewer_of(current_scope()),
                               after=created_key(after), limit=limit)
    return JobListResponse(jobs=[job_response(job) for job in page.entries],
                           next_after=next_after(page, lambda j: created_cursor(j.created_at,
                                                                                 j.id)))


@router.get("/jobs/{job_id}", response_model=JobResponse,
            responses={404: {"model": ErrorResponse}})
async def get_job(job_id: Annotated[str, Path(max_length=64, description="the job's id")],
                  jobs: JobAdminDep) -> JobResponse:
    """A job's state, progress, loss, dev scores and (when failed) the reason."""
    job = await jobs.get(job_id)
    if not current_scope().follows_job_of("domain", job.domain):  # as unknown ids
        raise NotFound(f"no training job {job_id!r}", field="job_id")
    return job_response(job)
