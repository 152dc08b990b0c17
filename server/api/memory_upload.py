"""A memory file's upload: the body or a form's `file` part, spooled (memory, then disk)
within the import limit, with its format from the query, the content type or the name."""

from __future__ import annotations

import os
import tempfile
from typing import IO, Literal

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from server.api.uploads import capped
from server.core.errors import InvalidInput, TooLarge
from server.memories.imports import Format, Upload, format_of

SPOOL_BYTES = 1 << 20
RAW_TYPES: dict[str, Format | None] = {
    "application/x-tmx+xml": "tmx", "text/tab-separated-values": "tsv",
    "application/xliff+xml": "xliff", "application/x-xliff+xml": "xliff",
    "application/xml": None, "text/xml": None, "text/plain": None,
    "application/octet-stream": None}


async def receive_upload(request: Request, *, limit: int, format: Format | None,
                         mode: Literal["append", "replace"],
                         filename: str | None) -> Upload:
    """The uploaded file, spooled (memory, then disk) while its size stays under
    `limit` (413 past it)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"upload of {declared} bytes; at most {limit} "
                       "(NMT_MEMORIES__MAX_IMPORT_BYTES)", field="body")
    if content_type == "multipart/form-data":
        file, name = await _multipart(request, limit)
    elif content_type in RAW_TYPES or not content_type:
        file, name = await _raw(request, limit), ""
        format = format or RAW_TYPES.get(content_type)
    else:
        raise InvalidInput(f"unsupported content type {content_type!r}: send the file as the "
                           "body or as the form's 'file' part", field="body")
    name = filename or name
    chosen = format or format_of(name)
    size = file.seek(0, os.SEEK_END)
    file.seek(0)
    if chosen is None or size == 0:
        file.close()
        raise InvalidInput("the upload is empty" if size == 0 else
                           "name the file's format: ?format=tmx, tsv or xliff (or a file "
                           "name ending .tmx, .tsv, .xlf)", field="body" if size == 0
                           else "format")
    return Upload(file, size, name, chosen, mode)


async def _raw(request: Request, limit: int) -> IO[bytes]:
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, prefix="nmt-memory-")
    try:
        async for chunk in capped(request.stream(), limit):
            spool.write(chunk)
    except BaseException:
        spool.close()
        raise
    return spool


async def _multipart(request: Request, limit: int) -> tuple[IO[bytes], str]:
    parser = MultiPartParser(request.headers, capped(request.stream(), limit),
                             max_files=1, max_fields=0)
    try:
        form = await parser.parse()
    except MultiPartException as error:
        raise InvalidInput(f"malformed multipart upload ({error.message}); send the file "
                           "as the field 'file'", field="body") from None
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        await form.close()
        raise InvalidInput("the form needs a file field named 'file'", field="file")
    return upload.file, upload.filename or ""
