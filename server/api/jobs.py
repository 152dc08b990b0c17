"""Admin endpoints of the training sidecar (bearer token `NMT_ADMIN_TOKEN`):
`POST /admin/domains` adds a domain from parallel text (202 + a job), `GET /admin/jobs`
and `GET /admin/jobs/{job_id}` follow the jobs. Training itself runs in the sidecar
(`python -m trainer`); see server/serving/admin_jobs.py and trainer/sidecar/worker.py."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from model_store import Job, JobState
from server.api.deps import ResidentDirectionDep, SettingsDep, require_admin
from server.api.schemas import ErrorResponse
from server.core.errors import InvalidInput, TooLarge
from server.serving.admin_jobs import DomainUpload, JobAdmin

router = APIRouter(prefix="/admin", tags=["admin", "jobs"], dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse,
                                    "description": "wrong token, or admin disabled"}})
FIELDS = ("name", "train", "dev", "config")
USAGE = ("send multipart/form-data with the fields name, train (a file), dev (a file, "
         "optional) and config (JSON text, optional)")
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


class JobResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    domain: str
    state: JobState = Field(description="queued, running, evaluating, published or failed")
    progress: float = Field(description="0..1")
    loss: float | None = Field(description="latest training loss")
    scores: dict[str, Any] = Field(description="training progress, then the gate's dev "
                                               "BLEU/chrF of the module and the backbone")
    error: str | None = Field(description="why the job failed (or the last retried error)")
    config: dict[str, Any]
    result: dict[str, Any] | None = Field(description="published versions and notes")
    worker: str | None
    attempts: int
    created_at: datetime
    updated_at: datetime
    heartbeat_at: datetime | None


class JobListResponse(BaseModel):
    jobs: list[JobResponse]


def get_job_admin(request: Request, settings: SettingsDep,
                  direction: ResidentDirectionDep) -> JobAdmin:
    runtime = direction.runtime if direction is not None else request.app.state.runtime
    return JobAdmin(request.app.state.store, runtime,
                    min_pairs=settings.limits.min_domain_pairs)


JobAdminDep = Annotated[JobAdmin, Depends(get_job_admin)]


def job_response(job: Job) -> JobResponse:
    return JobResponse(
        id=job.id, domain=job.domain, state=job.state, progress=job.progress, loss=job.loss,
        scores=job.scores, error=job.error, config=job.config, result=job.result,
        worker=job.worker, attempts=job.attempts, created_at=job.created_at,
        updated_at=job.updated_at, heartbeat_at=job.heartbeat_at)


@router.post("/domains", response_model=JobResponse, status_code=status.HTTP_202_ACCEPTED,
             openapi_extra=FORM_BODY,
             responses={409: {"model": ErrorResponse}, 413: {"model": ErrorResponse},
                        422: {"model": ErrorResponse}, 503: {"model": ErrorResponse}})
async def add_domain(request: Request, response: Response, jobs: JobAdminDep,
                     settings: SettingsDep) -> JobResponse:
    """Add a domain from parallel text: validates the upload, queues a training job for the
    sidecar and answers at once; follow it at `Location` (`/admin/jobs/{id}`)."""
    upload = await read_domain_upload(request, limit=settings.limits.max_domain_upload_bytes)
    job = await jobs.submit(upload)
    response.headers["Location"] = f"/admin/jobs/{job.id}"
    return job_response(job)


@router.get("/jobs", response_model=JobListResponse)
async def list_jobs(jobs: JobAdminDep, state: Annotated[JobState | None, Query(
        description="only jobs in this state")] = None) -> JobListResponse:
    """Every training job, oldest first."""
    return JobListResponse(jobs=[job_response(job) for job in await jobs.list_jobs(state)])


@router.get("/jobs/{job_id}", response_model=JobResponse,
            responses={404: {"model": ErrorResponse}})
async def get_job(job_id: Annotated[str, Path(max_length=64, description="the job's id")],
                  jobs: JobAdminDep) -> JobResponse:
    """A job's state, progress, loss, dev scores and (when failed) the reason."""
    return job_response(await jobs.get(job_id))


async def read_domain_upload(request: Request, *, limit: int) -> DomainUpload:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        raise InvalidInput(f"unsupported content type {content_type or 'none'!r}: {USAGE}",
                           field="body")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"upload of {declared} bytes; at most {limit} "
                       "(NMT_LIMITS__MAX_DOMAIN_UPLOAD_BYTES)", field="body")
    parser = MultiPartParser(request.headers, _capped(request.stream(), limit),
                             max_files=2, max_fields=2)
    try:
        form = await parser.parse()
    except MultiPartException as error:
        raise InvalidInput(f"malformed upload ({error.message}): {USAGE}", field="body") from None
    try:
        return await _upload_of(form)
    finally:
        await form.close()


async def _upload_of(form: FormData) -> DomainUpload:
    unknown = sorted(set(form.keys()) - set(FIELDS))
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(unknown)}: {USAGE}", field=unknown[0])
    name = form.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"the field 'name' is required: {USAGE}", field="name")
    config = form.get("config")
    if config is not None and not isinstance(config, str):
        raise InvalidInput("the field 'config' must be JSON text, not a file", field="config")
    train = await _file(form, "train")
    if train is None:
        raise InvalidInput(f"the file field 'train' is required: {USAGE}", field="train")
    return DomainUpload(name=name, train=train, dev=await _file(form, "dev"), config=config)


async def _file(form: FormData, field: str) -> bytes | None:
    value = form.get(field)
    if value is None:
        return None
    if not isinstance(value, UploadFile):
        raise InvalidInput(f"the field {field!r} must be a file part (curl -F "
                           f"{field}=@{field}.tsv)", field=field)
    return await value.read()


async def _capped(stream: AsyncIterator[bytes], limit: int) -> AsyncGenerator[bytes, None]:
    """The body, refused (413) as soon as it exceeds `limit` bytes (chunked uploads have
    no Content-Length to check up front)."""
    seen = 0
    async for chunk in stream:
        seen += len(chunk)
        if seen > limit:
            raise TooLarge(f"upload larger than {limit} bytes "
                           "(NMT_LIMITS__MAX_DOMAIN_UPLOAD_BYTES)", field="body")
        yield chunk
