"""Admin endpoints of translation memories (bearer token `NMT_ADMIN_TOKEN`): memories,
their pairs, TMX/TSV/XLIFF imports (jobs) and TMX export. `?backbone=` picks the
direction (default: the default one). Translation requests use memories through their
`memory` option (routes_translate.py); docs/API.md, "Translation memories"."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import StreamingResponse

from server.api.deps import MemoryAdminDep, SettingsDep, require_admin
from server.api.list_pages import DEFAULT_LIMIT, ListAfter, ListLimit, next_after, viewer_of
from server.api.memory_upload import receive_upload
from server.api.memory_views import job_info, memory_info, pair_info
from server.api.schemas import ErrorResponse
from server.api.schemas_memories import (
    ImportJobInfo,
    MemoriesResponse,
    MemoryCreate,
    MemoryDeleted,
    MemoryInfo,
    MemoryUpdate,
    PairInfo,
    PairsResponse,
    PairUpload,
)
from server.core.errors import InvalidInput
from server.core.tenancy import current_scope
from server.memories.admin import PairText
from server.memories.imports import Format

router = APIRouter(prefix="/admin", tags=["admin", "memories"],
                   dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse, "description": "wrong token, "
                                    "admin disabled, or memories off"},
                              404: {"model": ErrorResponse}})
FormatQuery = Annotated[Format | None, Query(description="tmx, tsv or xliff (default: from "
                                                         "the file's name or content type)")]
ModeQuery = Annotated[Literal["append", "replace"], Query(
    description='"append" adds the file\'s pairs; "replace" replaces every pair of the '
                "memory with them (at once, when the import is done)")]


@router.get("/memories", response_model=MemoriesResponse)
async def list_memories(admin: MemoryAdminDep, limit: ListLimit = DEFAULT_LIMIT,
                        after: ListAfter = None) -> MemoriesResponse:
    """The direction's memories in name order, a page at a time (`next_after`: the next
    page's cursor); a tenant's admin: the shared ones and its tenant's."""
    page = await asyncio.to_thread(admin.page, viewer=viewer_of(current_scope()),
                                   after=after, limit=limit)
    return MemoriesResponse(memories=[memory_info(r) for r in page.entries],
                            next_after=next_after(page, lambda r: r.name))


@router.post("/memories", response_model=MemoryInfo, status_code=status.HTTP_201_CREATED,
             responses={409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def create_memory(body: MemoryCreate, admin: MemoryAdminDep) -> MemoryInfo:
    """A new, empty memory of the direction (a tenant's admin: named `<tenant>-...`,
    for one of its own domains)."""
    _changes(body.name)
    if body.domain is not None:
        current_scope().check_manages("domain", body.domain)
    languages = ((body.source, body.target) if body.source and body.target else None)
    record = await asyncio.to_thread(admin.create, body.name, domain=body.domain,
                                     languages=languages)
    return memory_info(record)


@router.get("/memories/{name}", response_model=MemoryInfo)
async def get_memory(name: str, admin: MemoryAdminDep) -> MemoryInfo:
    return memory_info(await asyncio.to_thread(admin.get, name))


@router.patch("/memories/{name}", response_model=MemoryInfo,
              responses={409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def rename_memory(name: str, body: MemoryUpdate, admin: MemoryAdminDep) -> MemoryInfo:
    """Rename the memory: requests, imports and exports name it by its new name (on
    every replica within a second); its pairs, id and domain stay."""
    _changes(name)
    _changes(body.name)  # a tenant's memory keeps its tenant's prefix
    return memory_info(await asyncio.to_thread(admin.rename, name, body.name))


@router.delete("/memories/{name}", response_model=MemoryDeleted)
async def delete_memory(name: str, admin: MemoryAdminDep) -> MemoryDeleted:
    """The memory and every pair of it (at once, on every replica within a second)."""
    _changes(name)
    await asyncio.to_thread(admin.delete, name)
    return MemoryDeleted(name=name, deleted=True)


@router.get("/memories/{name}/pairs", response_model=PairsResponse)
async def list_pairs(name: str, admin: MemoryAdminDep,
                     after: Annotated[int, Query(ge=0, le=2**63 - 1, description="pairs "
                                                 "with ids above this")] = 0,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> PairsResponse:
    pairs = await asyncio.to_thread(admin.pairs, name, after=after, limit=limit)
    more = pairs[-1].id if len(pairs) == limit else None
    return PairsResponse(pairs=[pair_info(p) for p in pairs], next_after=more)


@router.post("/memories/{name}/pairs", response_model=PairInfo,
             status_code=status.HTTP_201_CREATED,
             responses={409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def add_pair(name: str, body: PairUpload, admin: MemoryAdminDep) -> PairInfo:
    """Add one pair (or replace those with its tuid, or its source: `replace`)."""
    _changes(name)
    pair = await asyncio.to_thread(admin.add_pair, name,
                                   PairText(body.source, body.target, body.tuid),
                                   replace=body.replace)
    return pair_info(pair)


@router.put("/memories/{name}/pairs/{pair_id}", response_model=PairInfo,
            responses={422: {"model": ErrorResponse}})
async def replace_pair(name: str, pair_id: int, body: PairUpload,
                       admin: MemoryAdminDep) -> PairInfo:
    _changes(name)
    if body.replace is not None:
        raise InvalidInput("`replace` belongs to POST .../pairs; PUT replaces this pair",
                           field="replace")
    pair = await asyncio.to_thread(admin.replace_pair, name, pair_id,
                                   PairText(body.source, body.target, body.tuid))
    return pair_info(pair)


@router.delete("/memories/{name}/pairs/{pair_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_pair(name: str, pair_id: int, admin: MemoryAdminDep) -> Response:
    _changes(name)
    await asyncio.to_thread(admin.delete_pair, name, pair_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/memories/{name}/import", response_model=ImportJobInfo,
             responses={202: {"model": ImportJobInfo, "description": "queued: poll "
                              "GET /admin/memory-imports/{id}"},
                        413: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def import_file(name: str, request: Request, response: Response, admin: MemoryAdminDep,
                      settings: SettingsDep, format: FormatQuery = None,
                      mode: ModeQuery = "append",
                      filename: Annotated[str | None, Query(max_length=255)] = None
                      ) -> ImportJobInfo:
    """Import a TMX, TSV or XLIFF file (the body, or the `file` part of a form): a small
    file before the answer (200: `state` says done or failed), a larger one as a job
    (202)."""
    _changes(name)
    memory = await asyncio.to_thread(admin.get, name)
    await admin.imports.check_room(memory.owner)  # before the body is read
    upload = await receive_upload(request, limit=settings.memories.max_import_bytes,
                                  format=format, mode=mode, filename=filename)
    job = await admin.imports.submit(memory, upload)
    response.status_code = (status.HTTP_200_OK if job.state in ("done", "failed")
                            else status.HTTP_202_ACCEPTED)
    return job_info(job, memory.name)


@router.get("/memory-imports/{job_id}", response_model=ImportJobInfo)
async def get_import(job_id: str, admin: MemoryAdminDep) -> ImportJobInfo:
    job = await asyncio.to_thread(admin.job, job_id)  # 404: unknown, or another's
    memory = await asyncio.to_thread(admin.registry.get_memory, job.memory_id)
    return job_info(job, memory.name if memory else "")


@router.get("/memories/{name}/export", response_class=StreamingResponse,
            responses={200: {"content": {"application/x-tmx+xml": {}},
                             "description": "the memory as TMX 1.4"}})
async def export_memory(name: str, admin: MemoryAdminDep) -> StreamingResponse:
    pages = await asyncio.to_thread(admin.export, name)
    return StreamingResponse(_threaded(pages), media_type="application/x-tmx+xml",
                             headers={"Content-Disposition":
                                      f'attachment; filename="{name}.tmx"'})


async def _threaded(pages: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Each page read on a worker thread (registry reads), sent as it comes."""
    while (page := await asyncio.to_thread(next, pages, None)) is not None:
        yield page


def _changes(name: str) -> None:
    """A tenant's admin changes its tenant's memories only (404 for another's, 403 for a
    shared one)."""
    current_scope().check_manages("memory", name)
