"""DeepL's document translation under `/deepl/v2` over the server's document jobs
(server/documents/jobs.py, as the native `/translate/file/jobs`): `POST /document`
(multipart) starts a job and answers `document_id` and `document_key`; `POST
/document/{id}` (with the key) its status; `POST /document/{id}/result` the file (503
until it is done, which DeepL's clients wait out)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from server.access import AccessGuard
from server.api.deepl.access import admit
from server.api.deepl.deps import DeepLKeyDep
from server.api.deepl.errors import DeepLError, DeepLRoute, bad_request
from server.api.deepl.requests import our_code, read_values
from server.api.deepl.schemas import DOCUMENT_BODY, ERRORS
from server.api.deps import AccessDep, DocumentJobsDep, SettingsDep
from server.api.document_upload import read_document_upload
from server.api.document_views import content_disposition
from server.documents.direction import DocumentRequest, open_directed
from server.documents.formats import supported_extensions
from server.documents.jobs import DocumentJob, DocumentJobs
from server.serving.directions import AUTO

router = APIRouter(prefix="/v2", tags=["deepl"], route_class=DeepLRoute)
FIELDS = ("source_lang", "target_lang", "formality", "glossary_id", "glossary_ids",
          "filename", "output_format", "enable_document_minification", "auth_key")
USAGE = ("send multipart/form-data with the file part 'file' (" +
         ", ".join(supported_extensions()) + ") and target_lang")
STATES = {"queued": "queued", "running": "translating", "done": "done", "failed": "error"}


@router.post("/document", responses=ERRORS, openapi_extra=DOCUMENT_BODY)
async def upload_document(request: Request, jobs: DocumentJobsDep, settings: SettingsDep,
                          access: AccessDep, key: DeepLKeyDep) -> JSONResponse:
    """Start translating a document; answers `document_id` and `document_key`."""
    upload = await read_document_upload(request, limit=settings.documents.max_bytes,
                                        fields=FIELDS, usage=USAGE)
    fields = upload.fields
    if "target_lang" not in fields:
        raise bad_request("Missing or invalid argument: target_lang")
    if fields.get("formality", "default").lower() in ("more", "less"):
        raise bad_request("'formality' is not supported for the given 'target_lang'")
    filename = fields.get("filename") or upload.filename
    if not filename:
        raise bad_request("Missing or invalid argument: the file part has no file name")
    wanted = fields.get("output_format")
    if wanted and f".{wanted.lower().lstrip('.')}" != Path(filename).suffix.lower():
        raise bad_request(f"Value for 'output_format' not supported: {wanted}; a document "
                          "is translated into its own format")
    source = fields.get("source_lang")
    directed = await open_directed(jobs.service, filename, upload.data, DocumentRequest(
        source=our_code(source) if source else AUTO, target=our_code(fields["target_lang"]),
        glossary_id=fields.get("glossary_id")))
    document = directed.document
    await admit(access, key or fields.get("auth_key"), document.chars)
    job = await jobs.submit(document, upload.data, detected=directed.detected)
    return JSONResponse({"document_id": job.id, "document_key": _key(job)})


@router.post("/document/{document_id}", responses=ERRORS)
async def document_status(document_id: str, request: Request, jobs: DocumentJobsDep,
                          access: AccessDep, key: DeepLKeyDep) -> JSONResponse:
    """The job's `status` (queued, translating, done, error), `seconds_remaining` while
    it translates, `billed_characters` once done, `error_message` when it failed."""
    job = await _job(jobs, document_id, request, access, key)
    body: dict[str, object] = {"document_id": job.id, "status": STATES[job.state]}
    if job.state == "running" and job.done > 0:  # the rate so far, over what is left
        spent = max(0.0, time.time() - job.created_at)
        body["seconds_remaining"] = round(spent / job.done * (job.total - job.done))
    if job.state == "done":
        body["billed_characters"] = job.chars
    if job.state == "failed":
        body["error_message"] = job.error or "the translation failed"
    return JSONResponse(body)


@router.post("/document/{document_id}/result", responses=ERRORS)
async def document_result(document_id: str, request: Request, jobs: DocumentJobsDep,
                          access: AccessDep, key: DeepLKeyDep) -> Response:
    """The translated file (503 while the job runs, as DeepL answers)."""
    job = await _job(jobs, document_id, request, access, key)
    if job.state == "failed":
        raise DeepLError(400, job.error or "the translation failed")
    if job.state != "done":
        raise DeepLError(503, "Document not ready")
    job, data = await asyncio.to_thread(jobs.result, job.id)
    return Response(data, media_type=job.media_type,
                    headers={"Content-Disposition": content_disposition(job.output_name)})


async def _job(jobs: DocumentJobs, document_id: str, request: Request,
               access: AccessGuard, key: str | None) -> DocumentJob:
    """The job, when the request's key may follow it and it carries its `document_key`
    (403 otherwise, as DeepL); 404 for an unknown job and for another tenant's (the
    lookup in the key's scope: server/documents/jobs.py)."""
    values = await read_values(request)
    await _lookup(jobs, document_id)  # an unknown job: 404 before the key is checked
    await admit(access, key, 0)
    job = await _lookup(jobs, document_id)  # in the key's scope: another tenant's is 404
    given = values.get("document_key")
    if not isinstance(given, str) or not hmac.compare_digest(given, _key(job)):
        raise DeepLError(403, "Invalid document_key for this document")
    return job


async def _lookup(jobs: DocumentJobs, document_id: str) -> DocumentJob:
    try:
        return await asyncio.to_thread(jobs.get, document_id)
    except Exception:  # unknown, expired, malformed or another tenant's: DeepL's 404
        raise DeepLError(404, f"Document not found: {document_id}") from None


def _key(job: DocumentJob) -> str:
    """The job's key: derived from what its record holds (its id is random already)."""
    return hashlib.sha256(f"{job.id}:{job.created_at!r}".encode()).hexdigest()[:32]
