"""Stored glossaries under /admin/glossaries (bearer token `NMT_ADMIN_TOKEN`).

`PUT /admin/glossaries/{name}` takes JSON (`{"entries": {...}, "default_for": ...}`), a
CSV (`text/csv`) or TSV (`text/tab-separated-values`) file as DeepL and Google accept it,
or a TBX termbase (`application/x-tbx`, with `?source_lang=..&target_lang=..`), with
`?default_for=<domain>` (server/api/glossary_upload.py reads it). Requests use a stored
glossary with `"glossary_id"`.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response, status

from model_store import GlossaryRecord
from server.api.deps import AccessDep, GlossaryDep, SettingsDep, require_admin
from server.api.glossary_upload import read_glossary_upload
from server.api.list_pages import DEFAULT_LIMIT, ListAfter, ListLimit, next_after, viewer_of
from server.api.schemas import ErrorResponse
from server.api.schemas_glossaries import (
    GlossariesResponse,
    GlossaryDeleted,
    GlossaryDetail,
    GlossaryInfo,
    GlossaryUpload,
)
from server.api.tenant_claims import claim_created
from server.core.errors import NotFound
from server.core.tenancy import current_scope

router = APIRouter(prefix="/admin/glossaries", tags=["admin"],
                   dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse,
                                    "description": "wrong token, or admin disabled"}})
PUT_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": GlossaryUpload.model_json_schema()},
    "text/csv": {"schema": {"type": "string"}},
    "text/tab-separated-values": {"schema": {"type": "string"}},
    "application/x-tbx": {"schema": {"type": "string"}}}}}
LANGUAGE = r"^[A-Za-z]{2,3}$"


@router.get("", response_model=GlossariesResponse)
async def list_glossaries(book: GlossaryDep, limit: ListLimit = DEFAULT_LIMIT,
                          after: ListAfter = None) -> GlossariesResponse:
    """The stored glossaries (without their entries), in name order, a page at a time
    (`next_after`: the next page's cursor); a tenant's admin: the shared ones and its
    tenant's."""
    page = await asyncio.to_thread(book.registry.glossary_page,
                                   viewer=viewer_of(current_scope()), after=after, limit=limit)
    return GlossariesResponse(glossaries=[
        GlossaryInfo(name=r.name, size=len(r.entries), default_for=r.default_for,
                     created_at=r.created_at, updated_at=r.updated_at) for r in page.entries],
        next_after=next_after(page, lambda r: r.name))


@router.get("/{name}", response_model=GlossaryDetail,
            responses={404: {"model": ErrorResponse}})
async def get_glossary(name: str, book: GlossaryDep) -> GlossaryDetail:
    record = await asyncio.to_thread(book.get, _visible(name))
    return _detail(record)


@router.put("/{name}", response_model=GlossaryDetail, openapi_extra=PUT_BODY,
            responses={201: {"model": GlossaryDetail, "description": "created"},
                       409: {"model": ErrorResponse}, 413: {"model": ErrorResponse},
                       422: {"model": ErrorResponse}})
async def put_glossary(name: str, request: Request, response: Response, book: GlossaryDep,
                       settings: SettingsDep, access: AccessDep,
                       default_for: Annotated[str | None, Query(
                           pattern=r"^[a-z][a-z0-9_-]{0,62}$",
                           description="CSV/TSV/TBX bodies: the domain whose requests use "
                                       "it when they name no glossary")] = None,
                       source_lang: Annotated[str | None, Query(
                           pattern=LANGUAGE, description="TBX bodies: the language whose "
                                                         "terms are matched")] = None,
                       target_lang: Annotated[str | None, Query(
                           pattern=LANGUAGE, description="TBX bodies: the language whose "
                                                         "terms are written")] = None,
                       ) -> GlossaryDetail:
    """Create or replace a glossary (201 when created, 200 when replaced). A tenant's
    admin: its tenant's (named `<tenant>-...`), the default of its own domains only."""
    scope = current_scope()
    scope.check_manages("glossary", name)
    limits = settings.limits
    # a TBX file carries far more markup than terms: room for ~2 KB of XML per entry
    limit = limits.max_glossary_entries * (2 * limits.max_glossary_term_chars + 2048) * 4
    upload = await read_glossary_upload(request, limit=limit, default_for=default_for,
                                        source_lang=source_lang, target_lang=target_lang)
    if upload.default_for is not None:
        scope.check_manages("domain", upload.default_for)
    record, created = await asyncio.to_thread(book.put, name, upload.entries,
                                              default_for=upload.default_for,
                                              field="entries", forbidden=upload.forbidden)
    await claim_created(access, "glossary", name)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return _detail(record)


@router.delete("/{name}", response_model=GlossaryDeleted,
               responses={404: {"model": ErrorResponse}})
async def delete_glossary(name: str, book: GlossaryDep) -> GlossaryDeleted:
    current_scope().check_manages("glossary", name)
    await asyncio.to_thread(book.delete, name)
    return GlossaryDeleted(name=name, deleted=True)


def _visible(name: str) -> str:
    """`name`, when the caller sees that glossary (else 404, as for one that does not
    exist)."""
    if not current_scope().sees("glossary", name):
        raise NotFound(f"unknown glossary {name[:64]!r}", field="name")
    return name


def _detail(record: GlossaryRecord) -> GlossaryDetail:
    return GlossaryDetail(name=record.name, size=len(record.entries),
                          default_for=record.default_for, created_at=record.created_at,
                          updated_at=record.updated_at, entries=dict(record.entries),
                          forbidden=list(record.forbidden))
