"""The document endpoints' mapping between HTTP and server/documents: the upload's form
fields as a DocumentRequest, a job as its answer, a translated file as the response with
its routing, detection and quality headers (the native `/translate/file`, and the
LibreTranslate door's `translate_file`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import quote

from fastapi import Response

from server.api.document_upload import DocumentUpload
from server.api.schemas import Routing
from server.api.schemas_documents import (
    DetectedLanguage,
    DocumentJobError,
    DocumentJobResponse,
    JobProgress,
)
from server.core.errors import InvalidInput
from server.documents.direction import DocumentRequest, detection_summary
from server.documents.formats import supported_extensions
from server.documents.jobs import DocumentJob
from server.documents.quality_report import QUALITY_HEADER
from server.documents.service import TranslatedDocument, routing_summary
from server.routing.policy import DomainSpec
from server.textproc.languages import Detection

FIELDS = ("domain", "glossary_id", "source", "target", "overwrite")
USAGE = ("send multipart/form-data with the file part 'file' (" +
         ", ".join(supported_extensions()) + ") and optionally the fields domain, "
         "glossary_id, source, target, overwrite")
ROUTING_HEADER = "X-NMT-Routing"
DETECTED_HEADER = "X-NMT-Detected"  # source=auto: {"language", "confidence"}


def job_path(job_id: str) -> str:
    return f"/translate/file/jobs/{job_id}"


def job_response(job: DocumentJob) -> DocumentJobResponse:
    error = (DocumentJobError(code=job.error_code or "error", message=job.error)
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


def content_disposition(filename: str) -> str:
    """An ASCII `filename` for old clients and the exact name as RFC 5987 `filename*`."""
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_"
                    for c in filename)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename)}"


def file_response(result: TranslatedDocument, detected: Detection | None = None) -> Response:
    routing = Routing(**routing_summary(result.decision, result.versions))
    return Response(result.data, media_type=result.media_type, headers={
        "Content-Disposition": content_disposition(result.filename),
        ROUTING_HEADER: routing.model_dump_json(),
        "X-NMT-Segments": str(result.segments), **detected_header(detected),
        **({QUALITY_HEADER: json.dumps(result.quality)} if result.quality else {})})
