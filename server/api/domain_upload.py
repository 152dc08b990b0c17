"""Reading a new domain's upload (`POST /admin/domains`): a multipart form with the fields
name, train (a file), dev (a file, optional) and config (JSON text, optional), its bytes
bounded while they arrive (`NMT_LIMITS__MAX_DOMAIN_UPLOAD_BYTES`, 413)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from server.api.uploads import media_type
from server.core.errors import InvalidInput, TooLarge
from server.serving.admin_jobs import DomainUpload

FIELDS = ("name", "train", "dev", "config")
USAGE = ("send multipart/form-data with the fields name, train (a file), dev (a file, "
         "optional) and config (JSON text, optional)")


async def read_domain_upload(request: Request, *, limit: int) -> DomainUpload:
    content_type = media_type(request)
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
