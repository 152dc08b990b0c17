"""Receiving an uploaded module archive without holding it in memory.

The body (raw tar.gz, or the `file` part of a multipart form) streams into a spooled
temporary file: at most `SPOOL_BYTES` in memory, the rest on disk, and the size limit is
enforced while the bytes arrive (413 before the body is read whole). The archive is then
unpacked from that file as a stream (model_store/archive.py).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator
from typing import IO

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from server.core.errors import InvalidInput, TooLarge

SPOOL_BYTES = 1 << 20
COPY_CHUNK = 1 << 20
ARCHIVE_TYPES = ("application/gzip", "application/x-gzip", "application/x-tar",
                 "application/octet-stream", "application/x-compressed-tar")


def media_type(request: Request) -> str:
    """The body's media type, lower case, without its parameters (`boundary`, `charset`);
    "" when the request names none."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def receive_archive(request: Request, *, limit: int) -> IO[bytes]:
    """The uploaded archive as a file positioned at its start; the caller closes it."""
    content_type = media_type(request)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"upload of {declared} bytes; at most {limit}", field="body")
    if content_type == "multipart/form-data":
        file, _ = await multipart_file(request, limit, what="the archive")
        return _rewound(file)
    if content_type not in ARCHIVE_TYPES and content_type:
        raise InvalidInput(f"unsupported content type {content_type!r}: send a tar.gz body "
                           f"({ARCHIVE_TYPES[0]}) or multipart/form-data", field="body")
    return _rewound(await spool_body(request, limit, prefix="nmt-upload-"))


async def spool_body(request: Request, limit: int, *, prefix: str) -> IO[bytes]:
    """The raw body in a spooled temporary file (memory, then disk), refused (413) past
    `limit` bytes; the caller rewinds and closes it."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, prefix=prefix)
    try:
        async for chunk in capped(request.stream(), limit):
            spool.write(chunk)
    except BaseException:
        spool.close()
        raise
    return spool


async def multipart_file(request: Request, limit: int, *, what: str) -> tuple[IO[bytes], str]:
    """The form's `file` part (starlette spools it to disk the same way) and its file name;
    `what` names the expected file in the error messages."""
    parser = MultiPartParser(request.headers, capped(request.stream(), limit),
                             max_files=1, max_fields=0)
    try:
        form = await parser.parse()
    except MultiPartException as error:
        raise InvalidInput(f"malformed multipart upload ({error.message}); send {what} "
                           "as the file field 'file'", field="body") from None
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        await form.close()
        raise InvalidInput("multipart upload needs a file field named 'file'", field="file")
    return upload.file, upload.filename or ""


def _rewound(file: IO[bytes]) -> IO[bytes]:
    if file.seek(0, os.SEEK_END) == 0:
        file.close()
        raise InvalidInput("the upload is empty", field="body")
    file.seek(0)
    return file


async def capped(stream: AsyncIterator[bytes], limit: int) -> AsyncGenerator[bytes, None]:
    """The body, refused (413) as soon as it exceeds `limit` bytes (a chunked body has no
    Content-Length to check up front)."""
    seen = 0
    async for chunk in stream:
        seen += len(chunk)
        if seen > limit:
            raise TooLarge(f"upload larger than {limit} bytes", field="body")
        yield chunk
