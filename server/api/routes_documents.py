"""Whole documents: `POST /translate/file` answers the translated file in its own format,
or, for a large one, 202 with a job: `GET /translate/file/jobs/{id}` follows it,
`GET /translate/file/jobs/{id}/result` fetches the file. The work is
server/documents/service.py and jobs.py; this module maps HTTP onto them."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from server.api.deps import AccessDep, ApiKeyDep, SettingsDep
from server.api.document_upload import DocumentUpload, read_document_upload
from server.api.routes_translate import until_disconnected
from server.api.schemas import ErrorResponse, Routing
from server.core.errors import InvalidInput
from server.documents.direction import DocumentRequest, detection_summary, open_directed
from server.documents.formats import FORMATS, supported_extensions
from server.documents.jobs import DocumentJob, DocumentJobs
from server.documents.quality_report import QUALITY_HEADER
from server.documents.service import (
    DocumentService,
    TranslatedDocument,
    routing_summary,
)
from server.routing.policy import DomainSpec, RoutingDecision
from server.textproc.languages import Detection

router = APIRouter(tags=["documents"])
FIELDS = ("domain", "glossary_id", "source", "target", "overwrite")
USAGE = ("send multipart/form-data with the file part 'file' (" +
         ", ".join(supported_extensions()) + ") and optionally the fields domain, "
         "glossary_id, source, target, overwrite")
ROUTING_HEADER = "X-NMT-Routing"
DETECTED_HEADER = "X-NMT-Detected"  # source=auto: {"language", "confidence"}
MAX_WAIT_S = 60.0
FORM_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
        "file": {"type": "string", "format": "binary",
                 "description": "the document: " + ", ".join(supported_extensions())},
        "domain": {"type": "string", "description": "a domain, generic, auto (default: the "
                   "classifier routes the whole document once), or JSON weights"},
        "glossary_id": {"type": "string", "description": "a stored glossary"},
        "source": {"type": "string", "description": "source language code, or auto (the "
                   "document's language is detected); with target it picks the direction "
                   "(default: the default direction's)"},
        "target": {"type": "string", "description": "target language code (default: the "
                                                    "default direction's)"},
        "overwrite": {"type": "boolean", "description": "po/xliff: also retranslate "
                                                        "entries that have a translation"}}}}}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (400, "a language no served direction translates (given or detected)"),
        (404, "unknown domain or glossary"),
        (413, "the file, or the text in it, is larger than the limits"),
        (415, "not a supported file type (the message lists them)"),
        (422, "a file its format refuses (malformed, truncated, undecodable, an XML DTD), "
              "or a bad field"),
        (429, "the queue is full, or the API key's allowance is used up"),
        (503, "not ready"), (504, "the deadline passed"))}


class JobProgress(BaseModel):
    done: int = Field(description="segments translated")
    total: int = Field(description="segments in the file")
    fraction: float = Field(description="done / total (1 for an empty file)")


class ErrorDetail(BaseModel):
    code: str
    message: str


class DetectedLanguage(BaseModel):
    language: str
    confidence: float = Field(description="0..1")


class DocumentJobResponse(BaseModel):
    id: str
    state: Literal["queued", "running", "done", "failed"]
    filename: str = Field(description="the uploaded file's name")
    output_name: str = Field(description="the translated file's name")
    characters: int = Field(description="characters to translate")
    progress: JobProgress
    routing: Routing | None = Field(description="the document's routing, once done")
    detected: DetectedLanguage | None = Field(
        default=None, description="source=auto: the document's detected language")
    quality: dict[str, Any] | None = Field(
        default=None, description="once done: the units' quality, as the result's "
                                  "X-NMT-Quality header (docs/API.md, Documents)")
    error: ErrorDetail | None = Field(description="why it failed")
    result_url: str | None = Field(description="where the file is, once done")
    created_at: datetime
    updated_at: datetime


async def get_jobs(request: Request) -> DocumentJobs:
    jobs: DocumentJobs = request.app.state.document_jobs
    return jobs


async def get_documents(jobs: Annotated[DocumentJobs, Depends(get_jobs)]) -> DocumentService:
    return jobs.service


JobsDep = Annotated[DocumentJobs, Depends(get_jobs)]
DocumentsDep = Annotated[DocumentService, Depends(get_documents)]
JobId = Annotated[str, Path(max_length=64, description="the job's id")]


@router.post("/translate/file", responses={
    200: {"description": "the translated file, in the format it came in",
          "content": {fmt.media_type: {} for fmt in FORMATS}},
    202: {"model": DocumentJobResponse, "description": "a large file: a job (Location)"},
    **ERRORS}, openapi_extra=FORM_BODY)
async def translate_file(request: Request, documents: DocumentsDep, jobs: JobsDep,
                         settings: SettingsDep, access: AccessDep,
                         api_key: ApiKeyDep) -> Response:
    """Translate a whole file. Answers the file (`<name>.<target><ext>`, same format,
    same encoding) with the document's routing decision in the `X-NMT-Routing` header;
    a file with more than `NMT_DOCUMENTS__SYNC_CHARS` characters to translate answers
    202 with a job instead (follow `Location`). `source`/`target` pick the direction
    (backbone); `source=auto` detects the document's language (`X-NMT-Detected`)."""
    upload = await read_document_upload(request, limit=settings.documents.max_bytes,
                                        fields=FIELDS, usage=USAGE)
    directed = await open_directed(documents, upload.filename, upload.data,
                                   document_request(upload))
    document = directed.document
    await access.check(api_key, chars=document.chars)
    if document.chars > settings.documents.sync_chars:
        job = await jobs.submit(document, upload.data, detected=directed.detected)
        return JSONResponse(job_response(job).model_dump(mode="json"), status_code=202,
                            headers={"Location": job_path(job.id)})
    result = await until_disconnected(request, documents.translate(document))
    return file_response(result, directed.detected)


@router.get("/translate/file/jobs/{job_id}", response_model=DocumentJobResponse,
            responses={404: {"model": ErrorResponse, "description": "unknown job"}})
async def get_job(job_id: JobId, jobs: JobsDep, wait: Annotated[float, Query(
        ge=0, le=MAX_WAIT_S, description="wait up to this many seconds for the job to "
                                         "finish (long polling)")] = 0) -> DocumentJobResponse:
    """A document job: its state, progress (segments translated of all), routing and,
    once done, where its file is."""
    return job_response(await jobs.wait(job_id, wait))


@router.get("/translate/file/jobs/{job_id}/result", responses={
    200: {"description": "the translated file"},
    404: {"model": ErrorResponse, "description": "unknown job"},
    409: {"model": ErrorResponse, "description": "the job is not done (or failed)"}})
async def job_result(job_id: JobId, jobs: JobsDep) -> Response:
    """The translated file of a finished job."""
    job, data = await asyncio.to_thread(jobs.result, job_id)
    detected = {DETECTED_HEADER: json.dumps(job.detected)} if job.detected else {}
    quality = {QUALITY_HEADER: json.dumps(job.quality)} if job.quality else {}
    return Response(data, media_type=job.media_type, headers={
        "Content-Disposition": content_disposition(job.output_name),
        ROUTING_HEADER: json.dumps(job.routing), "X-NMT-Segments": str(job.total),
        **detected, **quality})


def job_path(job_id: str) -> str:
    return f"/translate/file/jobs/{job_id}"


def job_response(job: DocumentJob) -> DocumentJobResponse:
    error = (ErrorDetail(code=job.error_code or "error", message=job.error)
             if job.error is not None else None)
    return DocumentJobResponse(
        id=job.id, state=job.state, filename=job.filename, output_name=job.output_name,
        characters=job.chars,
        progress=JobProgress(done=job.done, total=job.total,
                             fraction=job.done / job.total if job.total else 1.0),
        routing=Routing(**job.routing) if job.routing is not None else None, error=error,
        detected=DetectedLanguage(**job.detected) if job.detected else None,
        quality=job.quality if job.state == "done" else None,
        result_url=job_path(job.id) + "/result" if job.state == "done" else None,
        created_at=datetime.fromtimestamp(job.created_at, UTC),
        updated_at=datetime.fromtimestamp(job.updated_at, UTC))


def document_request(upload: DocumentUpload) -> DocumentRequest:
    """The form's fields, checked (the languages are checked with the directions)."""
    fields = upload.fields
    if not upload.filename:
        raise InvalidInput("the file part has no file name; the name's extension says "
                           f"its format: {USAGE}", field="file")
    overwrite = fields.get("overwrite", "false").lower()
    if overwrite not in ("true", "false", "1", "0"):
        raise InvalidInput(f"overwrite must be true or false, not {overwrite!r}",
                           field="overwrite")
    return DocumentRequest(source=fields.get("source"), target=fields.get("target"),
                           domain=domain_spec(fields), glossary_id=fields.get("glossary_id"),
                           overwrite_existing=overwrite in ("true", "1"))


def detected_header(detected: Detection | None) -> dict[str, str]:
    if detected is None:
        return {}
    return {DETECTED_HEADER: json.dumps(detection_summary(detected))}


def domain_spec(fields: dict[str, str]) -> DomainSpec:
    value = fields.get("domain")
    if value is None or not value.startswith("{"):
        return value
    try:
        weights = json.loads(value)
    except json.JSONDecodeError:
        weights = None
    if not isinstance(weights, dict) or not all(
            isinstance(w, int | float) and not isinstance(w, bool) for w in weights.values()):
        raise InvalidInput("domain weights must be a JSON object of numbers, e.g. "
                           '{"medical": 0.7, "generic": 0.3}', field="domain")
    return {str(name): float(weight) for name, weight in weights.items()}


def routing_of(decision: RoutingDecision, versions: dict[str, int]) -> Routing:
    return Routing(**routing_summary(decision, versions))


def content_disposition(filename: str) -> str:
    """An ASCII `filename` for old clients and the exact name as RFC 5987 `filename*`."""
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_"
                    for c in filename)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename)}"


def file_response(result: TranslatedDocument, detected: Detection | None = None) -> Response:
    routing = routing_of(result.decision, result.versions)
    return Response(result.data, media_type=result.media_type, headers={
        "Content-Disposition": content_disposition(result.filename),
        ROUTING_HEADER: routing.model_dump_json(),
        "X-NMT-Segments": str(result.segments), **detected_header(detected),
        **({QUALITY_HEADER: json.dumps(result.quality)} if result.quality else {})})
