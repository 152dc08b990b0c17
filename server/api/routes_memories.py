"""Admin endpoints of translation memories (bearer token `NMT_ADMIN_TOKEN`): memories,
their pairs, TMX/TSV/XLIFF imports (jobs) and TMX export. `?backbone=` picks the
direction (default: the default one). Translation requests use memories through their
`memory` option (routes_translate.py); docs/API.md, "Translation memories"."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import IO, Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from model_store import MemoryImport, MemoryRecord, PairRecord
from server.api.deps import MemoryAdminDep, SettingsDep, require_admin
from server.api.schemas import ErrorResponse
from server.api.schemas_memories import (
    ImportJobInfo,
    MemoriesResponse,
    MemoryCreate,
    MemoryDeleted,
    MemoryInfo,
    PairInfo,
    PairsResponse,
    PairUpload,
)
from server.api.uploads import capped
from server.core.errors import InvalidInput, TooLarge
from server.memories.admin import PairText
from server.memories.imports import Format, Upload, format_of

router = APIRouter(prefix="/admin", tags=["admin", "memories"],
                   dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse, "description": "wrong token, "
                                    "admin disabled, or memories off"},
                              404: {"model": ErrorResponse}})
SPOOL_BYTES = 1 << 20
RAW_TYPES: dict[str, Format | None] = {
    "application/x-tmx+xml": "tmx", "text/tab-separated-values": "tsv",
    "application/xliff+xml": "xliff", "application/x-xliff+xml": "xliff",
    "application/xml": None, "text/xml": None, "text/plain": None,
    "application/octet-stream": None}
FormatQuery = Annotated[Format | None, Query(description="tmx, tsv or xliff (default: from "
                                                         "the file's name or content type)")]
ModeQuery = Annotated[Literal["append", "replace"], Query(
    description='"append" adds the file\'s pairs; "replace" replaces every pair of the '
                "memory with them (at once, when the import is done)")]


def memory_info(record: MemoryRecord) -> MemoryInfo:
    return MemoryInfo(id=record.id, name=record.name, domain=record.domain,
                      owner=record.owner, source=record.source_lang,
                      target=record.target_lang, pairs=record.pairs,
                      created_at=record.created_at, updated_at=record.updated_at)


def pair_info(pair: PairRecord) -> PairInfo:
    return PairInfo(id=pair.id, source=pair.source, target=pair.target, tuid=pair.tuid,
                    origin=pair.origin, attributes=pair.attributes,
                    created_at=pair.created_at, updated_at=pair.updated_at)


def job_info(job: MemoryImport, memory: str) -> ImportJobInfo:
    return ImportJobInfo(id=job.id, memory=memory, state=job.state, progress=job.progress,
                         format=job.format, mode=job.mode, filename=job.filename,
                         report=job.report, error=job.error, created_at=job.created_at,
                         updated_at=job.updated_at)


@router.get("/memories", response_model=MemoriesResponse)
async def list_memories(admin: MemoryAdminDep) -> MemoriesResponse:
    records = await asyncio.to_thread(admin.all)
    return MemoriesResponse(memories=[memory_info(r) for r in records])


@router.post("/memories", response_model=MemoryInfo, status_code=status.HTTP_201_CREATED,
             responses={409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def create_memory(body: MemoryCreate, admin: MemoryAdminDep) -> MemoryInfo:
    """A new, empty memory of the direction."""
    languages = ((body.source, body.target) if body.source and body.target else None)
    record = await asyncio.to_thread(admin.create, body.name, domain=body.domain,
                                     languages=languages)
    return memory_info(record)


@router.get("/memories/{name}", response_model=MemoryInfo)
async def get_memory(name: str, admin: MemoryAdminDep) -> MemoryInfo:
    return memory_info(await asyncio.to_thread(admin.get, name))


@router.delete("/memories/{name}", response_model=MemoryDeleted)
async def delete_memory(name: str, admin: MemoryAdminDep) -> MemoryDeleted:
    """The memory and every pair of it (at once, on every replica within a second)."""
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
    pair = await asyncio.to_thread(admin.add_pair, name,
                                   PairText(body.source, body.target, body.tuid),
                                   replace=body.replace)
    return pair_info(pair)


@router.put("/memories/{name}/pairs/{pair_id}", response_model=PairInfo,
            responses={422: {"model": ErrorResponse}})
async def replace_pair(name: str, pair_id: int, body: PairUpload,
                       admin: MemoryAdminDep) -> PairInfo:
    if body.replace is not None:
        raise InvalidInput("`replace` belongs to POST .../pairs; PUT replaces this pair",
                           field="replace")
    pair = await asyncio.to_thread(admin.replace_pair, name, pair_id,
                                   PairText(body.source, body.target, body.tuid))
    return pair_info(pair)


@router.delete("/memories/{name}/pairs/{pair_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_pair(name: str, pair_id: int, admin: MemoryAdminDep) -> Response:
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
    memory = await asyncio.to_thread(admin.get, name)
    upload = await receive_upload(request, limit=settings.memories.max_import_bytes,
                                  format=format, mode=mode, filename=filename)
    job = await admin.imports.submit(memory, upload)
    response.status_code = (status.HTTP_200_OK if job.state in ("done", "failed")
                            else status.HTTP_202_ACCEPTED)
    return job_info(job, memory.name)


@router.get("/memory-imports/{job_id}", response_model=ImportJobInfo)
async def get_import(job_id: str, admin: MemoryAdminDep) -> ImportJobInfo:
    job = await asyncio.to_thread(admin.job, job_id)
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
