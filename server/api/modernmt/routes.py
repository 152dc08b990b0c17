"""The ModernMT-compatible API under `/modernmt`: the `modernmt` Python client (base URL
`http://HOST:PORT/modernmt`) and Weblate's ModernMT backend (its URL setting, the same)
work unchanged. Thin: translations go through the native translation path, memories are
ours (integer ids); this layer maps ModernMT's parameters, envelopes and errors. Both
clients' ways of calling are read alike: real GETs with query parameters, forms, and
POSTs with `X-HTTP-Method-Override` and a JSON body (method_override.py). This module:
the public calls (languages, translate, context vectors); the memory calls are in
memory_routes.py."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from server.api.deps import AccessDep, DirectionsDep, SettingsDep
from server.api.disconnect import until_disconnected
from server.api.modernmt.deps import MmtKeyDep, MmtMemoriesDep, admit_translation
from server.api.modernmt.errors import ModernMTRoute, bad_request, envelope
from server.api.modernmt.params import memory_ids, read_params
from server.api.modernmt.schemas import ERRORS
from server.api.modernmt.translating import answer, language, prepare, translate, vector_of
from server.core.errors import NotReady

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
                          settings: SettingsDep, key: MmtKeyDep) -> JSONResponse:
    """Translate `q` (one text or many) into `target` from `source` (absent: detected);
    `hints`: memory ids in play; `context_vector`: "id:weight" pairs; `glossaries`: the
    memory whose glossary applies."""
    params = await read_params(request)
    texts, _ = params.texts("q")
    await admit_translation(request, settings, access, key, chars=sum(map(len, texts)))
    if directions is None:
        raise NotReady("the server is starting: no direction is served yet")
    prepared = await prepare(params, directions, memories)
    results = await until_disconnected(request, translate(prepared))
    return envelope(answer(prepared, results))


@router.get("/context-vector")
async def context_vector(request: Request, directions: DirectionsDep,
                         memories: MmtMemoriesDep, access: AccessDep,
                         settings: SettingsDep, key: MmtKeyDep) -> JSONResponse:
    """The memories that fit `text`, for each of `targets`, as ModernMT's "id:weight"
    vector: a memory of a domain weighs the router's posterior of its domain, a
    standalone memory in `hints` its best fuzzy match (score / 100)."""
    params = await read_params(request)
    text = params.text("text", required=True) or ""
    await admit_translation(request, settings, access, key, chars=len(text))
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
