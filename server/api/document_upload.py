"""Receiving a document upload: a multipart form with one file part and a few text
fields, its bytes bounded while they arrive (`NMT_DOCUMENTS__MAX_BYTES`, 413 at once for
a larger Content-Length, and as soon as a chunked body passes it). Starlette spools the
file part to a temporary file, which is closed (deleted) before this returns."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from server.api.uploads import capped, media_type
from server.core.errors import InvalidInput, TooLarge

MULTIPART_SLACK = 64 * 1024  # form fields and part headers beside the file itself


@dataclass(frozen=True)
class DocumentUpload:
    filename: str
    data: bytes
    fields: dict[str, str]


async def read_document_upload(request: Request, *, limit: int, fields: tuple[str, ...],
                               usage: str) -> DocumentUpload:
    """The form's `file` part and its text `fields` (422 for anything else)."""
    content_type = media_type(request)
    if content_type != "multipart/form-data":
        raise InvalidInput(f"unsupported content type {content_type or 'none'!r}: {usage}",
                           field="body")
    bound = limit + MULTIPART_SLACK
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > bound:
        raise TooLarge(f"upload of {declared} bytes; a document may have at most {limit} "
                       "(NMT_DOCUMENTS__MAX_BYTES)", field="file")
    parser = MultiPartParser(request.headers, capped(request.stream(), bound),
                             max_files=1, max_fields=len(fields))
    try:
        form = await parser.parse()
    except MultiPartException as error:
        raise InvalidInput(f"malformed upload ({error.message}): {usage}", field="body"
                           ) from None
    try:
        unknown = sorted(set(form.keys()) - {"file", *fields})
        if unknown:
            raise InvalidInput(f"unknown field(s) {', '.join(unknown)}: {usage}",
                               field=unknown[0])
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidInput(f"the file part 'file' is required: {usage}", field="file")
        values: dict[str, str] = {}
        for name in fields:
            value = form.get(name)
            if isinstance(value, UploadFile):
                raise InvalidInput(f"the field {name!r} must be text, not a file",
                                   field=name)
            if value is not None and value != "":
                values[name] = value
        data = await upload.read()
        if len(data) > limit:
            raise TooLarge(f"document of {len(data)} bytes; at most {limit} "
                           "(NMT_DOCUMENTS__MAX_BYTES)", field="file")
        return DocumentUpload(upload.filename or "", data, values)
    finally:
        await form.close()
