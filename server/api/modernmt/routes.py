"""The ModernMT-compatible API under `/modernmt`: the `modernmt` Python client (base URL
`http://HOST:PORT/modernmt`) and Weblate's ModernMT backend (its URL setting, the same)
work unchanged. Thin: translations go through the native translation path, memories are
ours (integer ids); this layer maps ModernMT's parameters, envelopes and errors. Both
clients' ways of calling are read alike: real GETs with query parameters, forms, and
POSTs with `X-HTTP-Method-Override` and a JSON body (method_override.py)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from server.api.deps import AccessDep, DirectionsDep, SettingsDep
from server.api.disconnect import until_disconnected
from server.api.modernmt import answers
from server.api.modernmt.deps import MemoryKeyDep, MmtKeyDep, MmtMemoriesDep
from server.api.modernmt.errors import ModernMTRoute, bad_request, envelope, not_found
from server.api.modernmt.memories import glossary_entries, glossary_name
from server.api.modernmt.params import memory_id, memory_ids, read_params, spooled
from server.api.modernmt.schemas import ERRORS
from server.api.modernmt.translating import answer, language, prepare, translate, vector_of
from server.api.tenant_claims import claim_created
from server.core.errors import NotFound, NotReady
from server.memories.admin import PairText
from server.memories.imports import Upload

router = APIRouter(prefix="/modernmt", tags=["modernmt"], route_class=ModernMTRoute,
                   responses=ERRORS)


@router.get("/translate/languages")
async def languages(directions: DirectionsDep) -> JSONResponse:
    """Every served source language with the languages it translates into (Weblate reads
    the same at `/languages`)."""
    if directions is None:
        raise NotReady("the server is starting: no direction is served yet")
    listed: dict[str, list[str]] = {}
    for pair, _ in directions.served():
        listed.setdefault(pair.source, []).append(pair.target)
    return envelope(listed)


router.add_api_route("/languages", languages, methods=["GET"])


@router.get("/translate")
async def translate_texts(request: Request, directions: DirectionsDep,
                          memories: MmtMemoriesDep, access: AccessDep,
                          key: MmtKeyDep) -> JSONResponse:
    """Translate `q` (one text or many) into `target` from `source` (absent: detected);
    `hints`: memory ids in play; `context_vector`: "id:weight" pairs; `glossaries`: the
    memory whose glossary applies."""
    params = await read_params(request)
    texts, _ = params.texts("q")
    await access.check(key, chars=sum(map(len, texts)), field="MMT-ApiKey")
    if directions is None:
        raise NotReady("the server is starting: no direction is served yet")
    prepared = await prepare(params, directions, memories)
    results = await until_disconnected(request, translate(prepared))
    return envelope(answer(prepared, results))


@router.get("/context-vector")
async def context_vector(request: Request, directions: DirectionsDep,
                         memories: MmtMemoriesDep, access: AccessDep,
                         key: MmtKeyDep) -> JSONResponse:
    """The memories that fit `text`, for each of `targets`, as ModernMT's "id:weight"
    vector: a memory of a domain weighs the router's posterior of its domain, a
    standalone memory in `hints` its best fuzzy match (score / 100)."""
    params = await read_params(request)
    text = params.text("text", required=True) or ""
    await access.check(key, chars=len(text), field="MMT-ApiKey")
    if directions is None:
        raise NotReady("the server is starting: no direction is served yet")
    source = language(params.text("source", required=True))
    raw = params.values.get("targets")
    targets = raw if isinstance(raw, list) else (params.text("targets", required=True)
                                                 or "").split(",")
    hints = memory_ids(params.text("hints"))
    limit_text = params.text("limit") or "10"
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 100:
        raise bad_request("limit must be an integer from 1 to 100")
    vectors: dict[str, str] = {}
    for target in targets:
        code = language(str(target))
        choice = await directions.choose(source, code, [text])
        vectors[str(target)] = await asyncio.to_thread(
            vector_of, memories, choice.direction, text, hints, int(limit_text))
    return envelope({"source": params.text("source"), "vectors": vectors})


@router.get("/memories")
async def list_memories(memories: MmtMemoriesDep, _: MemoryKeyDep) -> JSONResponse:
    records = await asyncio.to_thread(memories.all)
    return envelope([answers.memory(r) for r in records])


@router.post("/memories")
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


@router.get("/memories/{memory}")
async def get_memory(memory: str, memories: MmtMemoriesDep, _: MemoryKeyDep) -> JSONResponse:
    found = await asyncio.to_thread(memories.get, memory_id(memory))
    return envelope(answers.memory(found.record))


@router.put("/memories/{memory}")
async def edit_memory(memory: str, request: Request, memories: MmtMemoriesDep,
                      _: MemoryKeyDep) -> JSONResponse:
    """Names are fixed once given (the native API names memories by them): a rename is
    refused; the description is not kept."""
    params = await read_params(request)
    found = await asyncio.to_thread(memories.changed, memory_id(memory))
    name = params.text("name")
    if name is not None and name != found.record.name:
        raise bad_request("a memory cannot be renamed on this server")
    return envelope(answers.memory(found.record))


@router.delete("/memories/{memory}")
async def delete_memory(memory: str, memories: MmtMemoriesDep,
                        _: MemoryKeyDep) -> JSONResponse:
    """The memory, its pairs and its glossary."""
    found = await asyncio.to_thread(memories.changed, memory_id(memory))
    await asyncio.to_thread(found.admin.delete, found.record.name)
    book = found.direction.glossaries
    if await asyncio.to_thread(book.registry.get_glossary, glossary_name(found.record.id)):
        await asyncio.to_thread(book.delete, glossary_name(found.record.id))
    return envelope(answers.memory(found.record))


@router.post("/memories/{memory}/content")
async def add_content(memory: str, request: Request, memories: MmtMemoriesDep,
                      settings: SettingsDep, _: MemoryKeyDep) -> JSONResponse:
    """One pair (`sentence`, `translation`, optional `tuid`), or a TMX file (the form's
    `tmx` part) imported as a job (poll `/import-jobs/{id}`)."""
    return await _content(memory, request, memories, settings, replace=False)


@router.put("/memories/{memory}/content")
async def replace_content(memory: str, request: Request, memories: MmtMemoriesDep,
                          settings: SettingsDep, _: MemoryKeyDep) -> JSONResponse:
    """The pairs with `tuid` replaced by this one."""
    return await _content(memory, request, memories, settings, replace=True)


async def _content(memory: str, request: Request, memories: MmtMemoriesDep,
                   settings: SettingsDep, *, replace: bool) -> JSONResponse:
    params = await read_params(request)
    found = await asyncio.to_thread(memories.changed, memory_id(memory))
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


@router.post("/memories/{memory}/glossary")
async def import_glossary(memory: str, request: Request, memories: MmtMemoriesDep,
                          _: MemoryKeyDep) -> JSONResponse:
    """A CSV glossary (the form's `csv` part; a header row of language codes, as Weblate
    writes it) becomes the memory's glossary, replacing the one before; translations
    naming the memory in `glossaries` use it."""
    params = await read_params(request)
    found = await asyncio.to_thread(memories.changed, memory_id(memory))
    if "csv" not in params.files:
        raise bad_request("send the glossary as the form's csv file (single terms are not "
                          "supported)")
    kind = params.text("type") or "unidirectional"
    if kind not in ("unidirectional", "equivalent"):
        raise bad_request("type is unidirectional or equivalent")
    data = await params.files["csv"].read()
    record = found.record
    entries = glossary_entries(data, record.source_lang, record.target_lang)
    book = found.direction.glossaries
    await asyncio.to_thread(book.put, glossary_name(record.id), entries, default_for=None,
                            field="csv")
    return envelope(answers.glossary_job(record.id, len(entries)))


@router.get("/import-jobs/{job}")
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
