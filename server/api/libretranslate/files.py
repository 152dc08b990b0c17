"""LibreTranslate's file translation: `POST /translate_file` answers, once the file is
translated, `{"translatedFileUrl": ".../download_file/<id>.<name>"}`, and
`GET /download_file/<id>.<name>` gives the file, as LibreTranslate 1.9 does and its
clients (`libretranslate-aio`'s `translate_file`, its web page) expect.

Each call is a document job (server/documents/jobs.py) that the request waits for, so the
translated file is on disk until `NMT_DOCUMENTS__JOB_TTL_S` and the download works from
any replica sharing the jobs directory; the work is the native `/translate/file`'s."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from server.api.deps import AccessDep, ApiKeyDep, DocumentJobsDep, RuntimeDep, SettingsDep
from server.api.disconnect import until_disconnected
from server.api.document_upload import read_document_upload
from server.api.document_views import content_disposition, domain_spec
from server.api.libretranslate.directions import served_pair
from server.api.libretranslate.errors import LibreTranslateError, LibreTranslateRoute, bad_request
from server.api.libretranslate.schemas import ERRORS, FILE_BODY
from server.documents.direction import DocumentRequest, open_directed
from server.documents.formats import supported_extensions

router = APIRouter(route_class=LibreTranslateRoute)
FIELDS = ("source", "target", "api_key", "domain")
USAGE = ("send multipart/form-data with the file part 'file' (" +
         ", ".join(supported_extensions()) + "), source and target")
# A failed job's error code -> LibreTranslate's status (its bad requests are all 400).
JOB_STATUS = {"queue_full": 429, "rate_limited": 429, "timeout": 504, "not_ready": 503,
              "internal": 500, "interrupted": 500}


@router.post("/translate_file", responses=ERRORS, openapi_extra=FILE_BODY)
async def translate_file(request: Request, jobs: DocumentJobsDep, runtime: RuntimeDep,
                         settings: SettingsDep, access: AccessDep,
                         header_key: ApiKeyDep) -> JSONResponse:
    """Translate a file (multipart: `file`, `source`, `target`, `api_key`; extra: `domain`).
    Answers `{"translatedFileUrl": ...}` once it is translated."""
    upload = await read_document_upload(request, limit=settings.documents.max_bytes,
                                        fields=FIELDS, usage=USAGE)
    fields = upload.fields
    for name in ("source", "target"):
        if name not in fields:
            raise bad_request(f"Invalid request: missing {name} parameter")
    if not upload.filename:
        raise bad_request("Invalid request: the file part has no file name")
    served_pair(runtime)  # LibreTranslate needs a loaded backbone that names its languages
    # the direction from source (or the file's detected language) into target
    directed = await open_directed(jobs.service, upload.filename, upload.data, DocumentRequest(
        source=fields["source"], target=fields["target"], domain=domain_spec(fields)))
    document = directed.document
    await access.check(fields.get("api_key") or header_key, chars=document.chars,
                       field="api_key")
    job = await jobs.submit(document, upload.data, detected=directed.detected)
    job = await until_disconnected(request, jobs.wait(job.id,
                                                      settings.documents.job_timeout_s))
    if job.state != "done":
        status = JOB_STATUS.get(job.error_code or "", 400)
        prefix = "Invalid request: " if status == 400 else ""
        raise LibreTranslateError(status, prefix + (job.error or "the translation failed"))
    url = request.url_for("download_file", filename=f"{job.id}.{job.output_name}")
    return JSONResponse({"translatedFileUrl": str(url)})


@router.get("/download_file/{filename}", responses=ERRORS)
async def download_file(filename: str, jobs: DocumentJobsDep) -> Response:
    """The file a `translate_file` call translated (`translatedFileUrl`)."""
    job_id, _, _name = filename.partition(".")
    try:
        job, data = await asyncio.to_thread(jobs.result, job_id)
    except Exception:  # unknown, expired, malformed: LibreTranslate's answer is 400
        raise bad_request("Invalid filename") from None
    return Response(data, media_type=job.media_type,
                    headers={"Content-Disposition": content_disposition(job.output_name)})


async def preflight() -> Response:
    return Response(status_code=204)


router.add_api_route("/translate_file", preflight, methods=["OPTIONS"],
                     include_in_schema=False)
