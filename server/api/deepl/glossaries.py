"""DeepL's glossary endpoints under `/deepl/v2` over the stored glossaries (their ids:
glossary_ids.py): create (`entries` as TSV or CSV, or, beyond DeepL, a TBX termbase
with `entries_format=tbx`: server/serving/tbx.py), list, get, entries (TSV), delete,
and the language pairs glossaries may have (the served directions)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from model_store import GlossaryRecord
from server.api.deepl.access import admit
from server.api.deepl.deps import DeepLGlossariesDep, DeepLKeyDep
from server.api.deepl.directions import served_pairs
from server.api.deepl.errors import DeepLError, DeepLRoute, bad_request
from server.api.deepl.glossary_ids import entries_tsv, glossary_info, new_id
from server.api.deepl.requests import deepl_code, optional, our_code, read_values
from server.api.deepl.schemas import ERRORS, GLOSSARY_BODY
from server.api.deps import AccessDep, DirectionsDep, RuntimeDep
from server.api.tenant_claims import claim_created
from server.core.errors import Forbidden, NotFound
from server.core.tenancy import current_scope
from server.serving.glossaries import GlossaryBook
from server.serving.tbx import read_tbx
from server.textproc.glossary import parse_table
from server.textproc.languages import LanguagePair

router = APIRouter(prefix="/v2", tags=["deepl"], route_class=DeepLRoute)
DELIMITERS = {"tsv": "\t", "csv": ","}


@router.get("/glossary-language-pairs", responses=ERRORS)
async def glossary_language_pairs(runtime: RuntimeDep, directions: DirectionsDep,
                                  access: AccessDep, key: DeepLKeyDep) -> JSONResponse:
    """The pairs a glossary may have: the served directions."""
    await admit(access, key, 0)
    return JSONResponse({"supported_languages": [
        {"source_lang": deepl_code(p.source), "target_lang": deepl_code(p.target)}
        for p in served_pairs(runtime, directions)]})


@router.post("/glossaries", status_code=201, responses=ERRORS, openapi_extra=GLOSSARY_BODY)
async def create_glossary(request: Request, book: DeepLGlossariesDep, runtime: RuntimeDep,
                          directions: DirectionsDep, access: AccessDep,
                          key: DeepLKeyDep) -> JSONResponse:
    """Store a glossary (`name`, `source_lang`, `target_lang`, `entries`,
    `entries_format` tsv or csv); answers its glossary object, `glossary_id` included."""
    values = await read_values(request)
    await admit(access, key, 0)
    fields = {name: optional(values, name) for name in (
        "name", "source_lang", "target_lang", "entries", "entries_format")}
    for name in ("name", "source_lang", "target_lang", "entries"):
        if fields[name] is None:
            raise bad_request(f"Missing or invalid argument: {name}")
    entries_format = (fields["entries_format"] or "tsv").lower()
    if entries_format not in (*DELIMITERS, "tbx"):
        raise bad_request(f"Value for 'entries_format' not supported: {entries_format}")
    pair = LanguagePair(our_code(fields["source_lang"] or ""),
                        our_code(fields["target_lang"] or ""))
    if pair not in served_pairs(runtime, directions):
        raise bad_request(f"Unsupported glossary language pair: "
                          f"{deepl_code(pair.source)}->{deepl_code(pair.target)}")
    data = (fields["entries"] or "").encode("utf-8")
    forbidden: list[str] = []
    if entries_format == "tbx":
        terms = await asyncio.to_thread(read_tbx, data, source=pair.source,
                                        target=pair.target, field_name="entries")
        entries, forbidden = terms.entries, terms.forbidden
    else:
        entries = parse_table(data, delimiter=DELIMITERS[entries_format], field="entries")
    taken = {r.name for r in await asyncio.to_thread(book.registry.list_glossaries)}
    glossary_id = new_id(current_scope().own_name(fields["name"] or ""), pair, taken)
    record, _ = await asyncio.to_thread(book.put, glossary_id, entries, default_for=None,
                                        field="entries", forbidden=forbidden)
    await claim_created(access, "glossary", glossary_id)
    return JSONResponse(glossary_info(record, pair), status_code=201)


@router.get("/glossaries", responses=ERRORS)
async def list_glossaries(book: DeepLGlossariesDep, runtime: RuntimeDep, directions: DirectionsDep,
                          access: AccessDep, key: DeepLKeyDep) -> JSONResponse:
    await admit(access, key, 0)
    default = served_pairs(runtime, directions)[0]
    records = await asyncio.to_thread(book.registry.list_glossaries)
    scope = current_scope()  # the shared glossaries and the key's tenant's
    return JSONResponse({"glossaries": [glossary_info(r, default) for r in records
                                        if scope.sees("glossary", r.name)]})


@router.get("/glossaries/{glossary_id}", responses=ERRORS)
async def get_glossary(glossary_id: str, book: DeepLGlossariesDep, runtime: RuntimeDep,
                       directions: DirectionsDep, access: AccessDep,
                       key: DeepLKeyDep) -> JSONResponse:
    await admit(access, key, 0)
    record = await asyncio.to_thread(_stored, book, glossary_id)
    return JSONResponse(glossary_info(record, served_pairs(runtime, directions)[0]))


@router.get("/glossaries/{glossary_id}/entries", responses=ERRORS)
async def glossary_entries(glossary_id: str, request: Request, book: DeepLGlossariesDep,
                           access: AccessDep, key: DeepLKeyDep) -> Response:
    """The entries as TSV (DeepL's only entries format)."""
    await admit(access, key, 0)
    accept = request.headers.get("accept", "*/*")
    if not any(kind in accept for kind in ("text/tab-separated-values", "*/*", "text/*")):
        raise DeepLError(415, "Unsupported Accept header: entries are "
                              "text/tab-separated-values")
    record = await asyncio.to_thread(_stored, book, glossary_id)
    return PlainTextResponse(entries_tsv(record), media_type="text/tab-separated-values")


@router.delete("/glossaries/{glossary_id}", status_code=204, responses=ERRORS)
async def delete_glossary(glossary_id: str, book: DeepLGlossariesDep, access: AccessDep,
                          key: DeepLKeyDep) -> Response:
    await admit(access, key, 0)
    await asyncio.to_thread(_stored, book, glossary_id)
    try:
        current_scope().check_manages("glossary", glossary_id)
    except Forbidden as refused:
        raise DeepLError(403, str(refused)) from None
    await asyncio.to_thread(book.delete, glossary_id)
    return Response(status_code=204)


def _stored(book: GlossaryBook, glossary_id: str) -> GlossaryRecord:
    """The glossary; 404 also for another tenant's (as if it did not exist)."""
    try:
        record = book.get(glossary_id)
    except NotFound:
        record = None
    if record is None or not current_scope().sees("glossary", record.name):
        raise DeepLError(404, f"Glossary not found: {glossary_id}")
    return record
