"""Whole documents: `POST /translate/file` answers the translated file in its own format,
or, for a large one, 202 with a job: `GET /translate/file/jobs/{id}` follows it,
`GET /translate/file/jobs/{id}/result` fetches the file. The work is
server/documents/service.py and jobs.py; this module maps HTTP onto them."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from server.api.deps import (
    AccessDep,
    ApiKeyDep,
    DocumentJobsDep,
    DocumentsDep,
    ListingScopeDep,
    SettingsDep,
)
from server.api.disconnect import until_disconnected
from server.api.document_upload import read_document_upload
from server.api.document_views import (
    DETECTED_HEADER,
    FIELDS,
    ROUTING_HEADER,
    USAGE,
    content_disposition,
    document_request,
    file_response,
    job_path,
    job_response,
)
from server.api.schemas import ErrorResponse
from server.api.schemas_documents import DocumentJobResponse
from server.documents.direction import open_directed
from server.documents.formats import FORMATS, supported_extensions
from server.documents.quality_report import QUALITY_HEADER

router = APIRouter(tags=["documents"])
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
JobId = Annotated[str, Path(max_length=64, description="the job's id")]


@router.post("/translate/file", responses={
    200: {"description": "the translated file, in the format it came in",
          "content": {fmt.media_type: {} for fmt in FORMATS}},
    202: {"model": DocumentJobResponse, "description": "a large file: a job (Location)"},
    **ERRORS}, openapi_extra=FORM_BODY)
async def translate_file(request: Request, documents: DocumentsDep, jobs: DocumentJobsDep,
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
async def get_job(job_id: JobId, jobs: DocumentJobsDep, _scope: ListingScopeDep,
                  wait: Annotated[float, Query(
        ge=0, le=MAX_WAIT_S, description="wait up to this many seconds for the job to "
                                         "finish (long polling)")] = 0) -> DocumentJobResponse:
    """A document job: its state, progress (segments translated of all), routing and,
    once done, where its file is. Only the key's tenant's jobs (another's: 404)."""
    return job_response(await jobs.wait(job_id, wait))


@router.get("/translate/file/jobs/{job_id}/result", responses={
    200: {"description": "the translated file"},
    404: {"model": ErrorResponse, "description": "unknown job"},
    409: {"model": ErrorResponse, "description": "the job is not done (or failed)"}})
async def job_result(job_id: JobId, jobs: DocumentJobsDep, _scope: ListingScopeDep
                     ) -> Response:
    """The translated file of a finished job."""
    job, data = await asyncio.to_thread(jobs.result, job_id)
    detected = {DETECTED_HEADER: json.dumps(job.detected)} if job.detected else {}
    quality = {QUALITY_HEADER: json.dumps(job.quality)} if job.quality else {}
    return Response(data, media_type=job.media_type, headers={
        "Content-Disposition": content_disposition(job.output_name),
        ROUTING_HEADER: json.dumps(job.routing), "X-NMT-Segments": str(job.total),
        **detected, **quality})
