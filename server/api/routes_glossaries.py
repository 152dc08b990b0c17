"""Stored glossaries under /admin/glossaries (bearer token `NMT_ADMIN_TOKEN`).

`PUT /admin/glossaries/{name}` takes JSON (`{"entries": {...}, "default_for": ...}`), or a
CSV (`text/csv`) or TSV (`text/tab-separated-values`) file as DeepL and Google accept it,
with `?default_for=<domain>`. Requests use a stored glossary with `"glossary_id"`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response, status
from pydantic import ValidationError

from server.api.deps import GlossaryDep, SettingsDep, require_admin
from server.api.schemas import (
    ErrorResponse,
    GlossariesResponse,
    GlossaryDeleted,
    GlossaryDetail,
    GlossaryInfo,
    GlossaryUpload,
)
from server.core.errors import InvalidInput, TooLarge
from server.textproc.glossary import parse_table

router = APIRouter(prefix="/admin/glossaries", tags=["admin"],
                   dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse,
                                    "description": "wrong token, or admin disabled"}})
TABLE_TYPES = {"text/csv": ",", "text/tab-separated-values": "\t"}
PUT_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": GlossaryUpload.model_json_schema()},
    "text/csv": {"schema": {"type": "string"}},
    "text/tab-separated-values": {"schema": {"type": "string"}}}}}


@router.get("", response_model=GlossariesResponse)
async def list_glossaries(book: GlossaryDep) -> GlossariesResponse:
    """Every stored glossary (without its entries)."""
    records = await asyncio.to_thread(book.registry.list_glossaries)
    return GlossariesResponse(glossaries=[
        GlossaryInfo(name=r.name, size=len(r.entries), default_for=r.default_for,
                     created_at=r.created_at, updated_at=r.updated_at) for r in records])


@router.get("/{name}", response_model=GlossaryDetail,
            responses={404: {"model": ErrorResponse}})
async def get_glossary(name: str, book: GlossaryDep) -> GlossaryDetail:
    record = await asyncio.to_thread(book.get, name)
    return GlossaryDetail(name=record.name, size=len(record.entries),
                          default_for=record.default_for, created_at=record.created_at,
                          updated_at=record.updated_at, entries=dict(record.entries))


@router.put("/{name}", response_model=GlossaryDetail, openapi_extra=PUT_BODY,
            responses={201: {"model": GlossaryDetail, "description": "created"},
                       409: {"model": ErrorResponse}, 413: {"model": ErrorResponse},
                       422: {"model": ErrorResponse}})
async def put_glossary(name: str, request: Request, response: Response, book: GlossaryDep,
                       settings: SettingsDep,
                       default_for: Annotated[str | None, Query(
                           pattern=r"^[a-z][a-z0-9_-]{0,62}$",
                           description="CSV/TSV bodies: the domain whose requests use it "
                                       "when they name no glossary")] = None) -> GlossaryDetail:
    """Create or replace a glossary (201 when created, 200 when replaced)."""
    limits = settings.limits
    limit = limits.max_glossary_entries * (2 * limits.max_glossary_term_chars + 64) * 4
    data = await _read_body(request, limit=limit)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in TABLE_TYPES:
        _refuse_json_table(data, content_type)
        entries = parse_table(data, delimiter=TABLE_TYPES[content_type], field="entries")
    elif content_type == "application/json":
        upload = _json_upload(data)
        entries, default_for = list(upload.entries.items()), upload.default_for
    else:
        raise InvalidInput(f"unsupported content type {content_type!r}: send application/json, "
                           "text/csv or text/tab-separated-values", field="body")
    record, created = await asyncio.to_thread(book.put, name, entries,
                                              default_for=default_for, field="entries")
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return GlossaryDetail(name=record.name, size=len(record.entries),
                          default_for=record.default_for, created_at=record.created_at,
                          updated_at=record.updated_at, entries=dict(record.entries))


@router.delete("/{name}", response_model=GlossaryDeleted,
               responses={404: {"model": ErrorResponse}})
async def delete_glossary(name: str, book: GlossaryDep) -> GlossaryDeleted:
    await asyncio.to_thread(book.delete, name)
    return GlossaryDeleted(name=name, deleted=True)


def _refuse_json_table(data: bytes, content_type: str) -> None:
    """A JSON document sent as a table (`[null, null]`, `{"a": 1, "b": 2}`) would split into
    odd terms at its commas: no glossary row is also a JSON value, so refuse it."""
    try:
        json.loads(data)
    except (ValueError, UnicodeDecodeError):  # not JSON: a table, as it says
        return
    raise InvalidInput(f"the body is JSON, not {content_type}: send rows of source,target "
                       "(tab-separated for TSV), or JSON {\"entries\": {...}} as "
                       "application/json", field="body")


def _json_upload(data: bytes) -> GlossaryUpload:
    try:
        return GlossaryUpload.model_validate(json.loads(data))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidInput(f"the body is not valid JSON: {error}", field="body") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise InvalidInput(f"{where}: {first['msg']}", field=where) from None


async def _read_body(request: Request, *, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"glossary of {declared} bytes; at most {limit}", field="body")
    buffer = bytearray()
    async for chunk in request.stream():
        buffer += chunk
        if len(buffer) > limit:
            raise TooLarge(f"glossary larger than {limit} bytes", field="body")
    if not buffer:
        raise InvalidInput("the body is empty", field="body")
    return bytes(buffer)
