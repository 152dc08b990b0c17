"""The ModernMT door's memory calls: `/memories` CRUD, their content (one pair by
`tuid`, or a TMX imported as a job), their CSV glossaries, `/import-jobs/{id}`. They
need the admin token (`MMT-ApiKey`) and are served where the admin routes are: on the
main port, or with NMT_ADMIN_PORT on the admin listener only; the public port then
answers them with a 404 that names the admin listener (`memories_moved`)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from server.api.deps import AccessDep, SettingsDep
from server.api.modernmt import answers
from server.api.modernmt.deps import MEMORY_LISTING, MemoryKeyDep, MmtMemoriesDep
from server.api.modernmt.errors import ModernMTRoute, bad_request, envelope, not_found
from server.api.modernmt.memories import glossaries_of, glossary_name, glossary_tables, pair_of
from server.api.modernmt.params import may_carry_a_file, memory_id, read_params, spooled
from server.api.modernmt.schemas import ERRORS
from server.api.modernmt.translating import language
from server.api.tenant_claims import claim_created
from server.core.errors import NotFound
from server.core.tenancy import current_scope
from server.memories.admin import PairText
from server.memories.imports import Upload

memory_router = APIRouter(prefix="/modernmt", tags=["modernmt"], route_class=ModernMTRoute,
                          responses=ERRORS)
memories_moved = APIRouter(prefix="/modernmt", route_class=ModernMTRoute,
                           include_in_schema=False)
EVERY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE"]


@memories_moved.api_route("/memories", methods=EVERY_METHOD)
@memories_moved.api_route("/memories/{rest:path}", methods=EVERY_METHOD)
@memories_moved.api_route("/import-jobs/{rest:path}", methods=EVERY_METHOD)
async def on_the_admin_listener(settings: SettingsDep) -> JSONResponse:
    """The public port's answer to memory calls when the admin listener is separate."""
    raise not_found(f"memories are managed on the admin listener (port "
                    f"{settings.admin_port}, NMT_ADMIN_PORT): point the client at "
                    f"http://{settings.admin_host}:{settings.admin_port}/modernmt; "
                    "translations are served on both")


@memory_router.get("/memories", name=MEMORY_LISTING)
async def list_memories(memories: MmtMemoriesDep, _: MemoryKeyDep) -> JSONResponse:
    records = await asyncio.to_thread(memories.all)
    return envelope([answers.memory(r) for r in records])


@memory_router.post("/memories")
async def create_memory(request: Request, memories: MmtMemoriesDep,
                        _: MemoryKeyDep, access: AccessDep) -> JSONResponse:
    """`name` (JSON or form); extra: `source` and `target` pick the direction (default:
    the default one). A name that exists answers its memory, as ModernMT does."""
    params = await read_params(request)
    name = params.text("name", required=True) or ""
    record = await asyncio.to_thread(memories.create, name,
                                     language(params.text("source")),
                                     language(params.text("target")))
    await claim_created(access, "memory", record.name)
    return envelope(answers.memory(record))


@memory_router.get("/memories/{memory}")
async def get_memory(memory: str, memories: MmtMemoriesDep, _: MemoryKeyDep) -> JSONResponse:
    found = await asyncio.to_thread(memories.get, memory_id(memory))
    return envelope(answers.memory(found.record))


@memory_router.put("/memories/{memory}")
async def edit_memory(memory: str, request: Request, memories: MmtMemoriesDep,
                      _: MemoryKeyDep, access: AccessDep) -> JSONResponse:
    """`name`: rename the memory (409 when its direction has a memory of that name, as
    names are unique per direction here); the description is not kept."""
    params = await read_params(request)
    found = await asyncio.to_thread(memories.changed, memory_id(memory))
    name = params.text("name")
    if name is None or name == found.record.name:
        return envelope(answers.memory(found.record))
    name = current_scope().own_name(name)  # a tenant's names start "<tenant>-"
    renamed = await asyncio.to_thread(found.admin.rename, found.record.name, name)
    await claim_created(access, "memory", renamed.name)
    return envelope(answers.memory(renamed))


@memory_router.delete("/memories/{memory}")
async def delete_memory(memory: str, memories: MmtMemoriesDep,
                        _: MemoryKeyDep) -> JSONResponse:
    """The memory, its pairs and its glossaries."""
    found = await asyncio.to_thread(memories.changed, memory_id(memory))
    await asyncio.to_thread(found.admin.delete, found.record.name)
    book = found.direction.glossaries
    for name in await asyncio.to_thread(glossaries_of, book.registry, found.record.id):
        await asyncio.to_thread(book.delete, name)
    return envelope(answers.memory(found.record))


@memory_router.post("/memories/{memory}/content")
async def add_content(memory: str, request: Request, memories: MmtMemoriesDep,
                      settings: SettingsDep, _: MemoryKeyDep) -> JSONResponse:
    """One pair (`sentence`, `translation`, optional `tuid`), or a TMX file (the form's
    `tmx` part) imported as a job (poll `/import-jobs/{id}`)."""
    return await _content(memory, request, memories, settings, replace=False)


@memory_router.put("/memories/{memory}/content")
async def replace_content(memory: str, request: Request, memories: MmtMemoriesDep,
                          settings: SettingsDep, _: MemoryKeyDep) -> JSONResponse:
    """The pairs with `tuid` replaced by this one."""
    return await _content(memory, request, memories, settings, replace=True)


async def _content(memory: str, request: Request, memories: MmtMemoriesDep,
                   settings: SettingsDep, *, replace: bool) -> JSONResponse:
    found = await asyncio.to_thread(memories.changed, memory_id(memory))
    if may_carry_a_file(request, settings.memories.max_segment_chars):
        # before the body is read, as the native import does; submit checks again
        await found.admin.imports.check_room(found.record.owner)
    params = await read_params(request)
    if "tmx" in params.files:
        if params.text("compression") not in (None, ""):
            raise bad_request("compressed uploads are not supported: send the TMX as is")
        limit = settings.memories.max_import_bytes
        file, size = await spooled(params.files["tmx"], limit, "tmx")
        if size == 0:
            file.close()
            raise bad_request("the tmx file is empty")
        upload = Upload(file, size, params.files["tmx"].filename or "upload.tmx", "tmx",
                        "append")
        job = await found.admin.imports.submit(found.record, upload)
        return envelope(answers.import_job(job))
    sentence = params.text("sentence", required=True) or ""
    translation = params.text("translation", required=True) or ""
    tuid = params.text("tuid")
    if replace and tuid is None:
        raise bad_request("missing parameter: tuid (PUT replaces the pairs with a tuid)")
    pair = await asyncio.to_thread(found.admin.add_pair, found.record.name,
                                   PairText(sentence, translation, tuid),
                                   replace="tuid" if replace else None)
    return envelope(answers.pair_job(found.record.id, pair))


@memory_router.post("/memories/{memory}/glossary")
async def import_glossary(memory: str, request: Request, memories: MmtMemoriesDep,
                          _: MemoryKeyDep, access: AccessDep) -> JSONResponse:
    """A CSV glossary (the form's `csv` part; a header row of language codes, as Weblate
    writes it) becomes the memory's glossary of each served direction among its
    languages, replacing the one before; translations of that direction naming the
    memory in `glossaries` use it."""
    params = await read_params(request)
    found = await asyncio.to_thread(memories.changed, memory_id(memory))
    if "csv" not in params.files:
        raise bad_request("send the glossary as the form's csv file (single terms are not "
                          "supported)")
    kind = params.text("type") or "unidirectional"
    if kind not in ("unidirectional", "equivalent"):
        raise bad_request("type is unidirectional or equivalent")
    data = await params.files["csv"].read()
    served = {pair: direction for direction in memories.directions.all
              if (pair := pair_of(direction, found)) is not None}
    tables = glossary_tables(data, list(served), unidirectional=kind == "unidirectional")
    for pair, entries in tables.items():
        name = glossary_name(found.record.id, pair)
        await asyncio.to_thread(served[pair].glossaries.put, name, entries, default_for=None,
                                field="csv")
        # a tenant's memory's glossary is the tenant's (its name has no tenant prefix)
        await claim_created(access, "glossary", name)
    size = sum(map(len, tables.values()))
    return envelope(answers.glossary_job(found.record.id, size))


@memory_router.get("/import-jobs/{job}")
async def import_status(job: str, memories: MmtMemoriesDep, _: MemoryKeyDep) -> JSONResponse:
    done = answers.done_job(job)
    if done is not None:
        return envelope(done)
    for _direction, admin in await asyncio.to_thread(memories.admins):
        try:
            found = await asyncio.to_thread(admin.job, job)
        except NotFound:  # not this direction's
            continue
        return envelope(answers.import_job(found))
    raise not_found(f"import job {job[:64]!r} does not exist")
