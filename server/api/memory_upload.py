"""A memory file's upload: the body or a form's `file` part, spooled (memory, then disk)
within the import limit, with its format from the query, the content type or the name."""

from __future__ import annotations

import os
from typing import Literal

from fastapi import Request

from server.api.uploads import media_type, multipart_file, spool_body
from server.core.errors import InvalidInput, TooLarge
from server.memories.imports import Format, Upload, format_of

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
    content_type = media_type(request)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"upload of {declared} bytes; at most {limit} "
                       "(NMT_MEMORIES__MAX_IMPORT_BYTES)", field="body")
    if content_type == "multipart/form-data":
        file, name = await multipart_file(request, limit, what="the file")
    elif content_type in RAW_TYPES or not content_type:
        file, name = await spool_body(request, limit, prefix="nmt-memory-"), ""
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
