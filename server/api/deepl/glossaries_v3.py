"""DeepL's multilingual glossaries (`/v3/glossaries`, the `deepl` client's `DeepLClient`)
over the stored glossaries: one stored glossary per dictionary (language pair), named
`<glossary_id>.<source>-<target>`, so a v3 glossary is the stored glossaries that share
its id. `glossary_id` on `/v2/translate` names a v3 glossary too: the dictionary of the
request's direction applies (glossary_ids.resolve_glossary_id).

Create, list, get, entries of one dictionary, delete, delete a dictionary, merge entries
into dictionaries (PATCH) and replace one (PUT .../dictionaries). Every dictionary of a
request is read and validated before any is written: a refused request stores nothing.
A rename (PATCH `name`) is refused: the name is part of the id here.

Tenants (docs/API.md, "Tenants"): a tenant's new glossary gets its tenant's name
(`current_scope().own_name`) and each dictionary written for it is claimed for the tenant;
another tenant's glossary is answered exactly as an unknown id (listing, reading, changing
and `/v2/translate`), and only the glossary's owner (or the operator) changes it.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import UTC
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from model_store import GlossaryRecord
from server.access import AccessGuard
from server.api.deepl.access import admit
from server.api.deepl.deps import DeepLGlossariesDep, DeepLKeyDep
from server.api.deepl.directions import served_pairs
from server.api.deepl.errors import DeepLError, DeepLRoute, bad_request
from server.api.deepl.glossary_ids import DICTIONARY, entries_tsv
from server.api.deepl.requests import deepl_code, optional, our_code, read_values
from server.api.deepl.schemas import ERRORS
from server.api.deps import AccessDep, DirectionsDep, RuntimeDep
from server.api.tenant_claims import claim_created
from server.core.errors import Forbidden
from server.core.tenancy import current_scope
from server.serving.glossaries import GlossaryBook
from server.serving.tbx import read_tbx
from server.textproc.glossary import parse_table
from server.textproc.languages import LanguagePair

router = APIRouter(prefix="/v3/glossaries", tags=["deepl"], route_class=DeepLRoute)
NOT_SLUG = re.compile(r"[^A-Za-z0-9_-]+")
DELIMITERS = {"tsv": "\t", "csv": ","}
Dictionary = tuple[LanguagePair, list[tuple[str, str]], list[str]]  # pair, entries, forbidden


@router.post("", status_code=201, responses=ERRORS)
async def create(request: Request, book: DeepLGlossariesDep, runtime: RuntimeDep,
                 directions: DirectionsDep, access: AccessDep,
                 key: DeepLKeyDep) -> JSONResponse:
    """`name` and `dictionaries` (each `source_lang`, `target_lang`, `entries`,
    `entries_format` tsv, csv or tbx)."""
    values = await read_values(request)
    await admit(access, key, 0)
    name = optional(values, "name")
    if name is None:
        raise bad_request("Missing or invalid argument: name")
    found = values.get("dictionaries")
    if not isinstance(found, list) or not found:
        raise bad_request("Missing or invalid argument: dictionaries")
    served = served_pairs(runtime, directions)
    read = [_dictionary(item, served) for item in found]
    slug = NOT_SLUG.sub("-", current_scope().own_name(name)).strip("-")[:40] or "glossary"
    glossary_id = f"ml-{slug}-{uuid.uuid4().hex[:8]}"
    await _write_claimed(access, book, glossary_id, read, merge=False)
    return JSONResponse(await asyncio.to_thread(_info, book, glossary_id), status_code=201)


@router.get("", responses=ERRORS)
async def list_all(book: DeepLGlossariesDep, access: AccessDep,
                   key: DeepLKeyDep) -> JSONResponse:
    await admit(access, key, 0)
    scope = current_scope()  # the shared glossaries and the key's tenant's
    records = [r for r in await asyncio.to_thread(book.registry.list_glossaries)
               if scope.sees("glossary", r.name)]
    ids = dict.fromkeys(m["id"] for r in records if (m := DICTIONARY.match(r.name)))
    return JSONResponse({"glossaries": [_describe(i, _of(records, i)) for i in ids]})


@router.get("/{glossary_id}", responses=ERRORS)
async def get(glossary_id: str, book: DeepLGlossariesDep, access: AccessDep,
              key: DeepLKeyDep) -> JSONResponse:
    await admit(access, key, 0)
    return JSONResponse(await asyncio.to_thread(_info, book, glossary_id))


@router.get("/{glossary_id}/entries", responses=ERRORS)
async def entries(glossary_id: str, request: Request, book: DeepLGlossariesDep,
                  access: AccessDep, key: DeepLKeyDep) -> JSONResponse:
    """One dictionary's entries (`source_lang`, `target_lang`), as TSV."""
    await admit(access, key, 0)
    record = await asyncio.to_thread(_one, book, glossary_id, _pair(request))
    match = DICTIONARY.match(record.name)
    assert match is not None
    return JSONResponse({"dictionaries": [{
        "source_lang": deepl_code(match["source"]), "target_lang": deepl_code(match["target"]),
        "entries": entries_tsv(record), "entries_format": "tsv"}]})


@router.delete("/{glossary_id}", status_code=204, responses=ERRORS)
async def delete(glossary_id: str, book: DeepLGlossariesDep, access: AccessDep,
                 key: DeepLKeyDep) -> Response:
    await admit(access, key, 0)
    records = await asyncio.to_thread(_managed, book, glossary_id)
    for record in records:
        await asyncio.to_thread(book.delete, record.name)
    return Response(status_code=204)


@router.delete("/{glossary_id}/dictionaries", status_code=204, responses=ERRORS)
async def delete_dictionary(glossary_id: str, request: Request, book: DeepLGlossariesDep,
                            access: AccessDep, key: DeepLKeyDep) -> Response:
    await admit(access, key, 0)
    record = await asyncio.to_thread(_one, book, glossary_id, _pair(request))
    await asyncio.to_thread(_managed, book, glossary_id)
    await asyncio.to_thread(book.delete, record.name)
    return Response(status_code=204)


@router.patch("/{glossary_id}", responses=ERRORS)
async def update(glossary_id: str, request: Request, book: DeepLGlossariesDep,
                 runtime: RuntimeDep, directions: DirectionsDep, access: AccessDep,
                 key: DeepLKeyDep) -> JSONResponse:
    """Entries merged into dictionaries (new pairs added); a rename is refused."""
    values = await read_values(request)
    await admit(access, key, 0)
    await asyncio.to_thread(_managed, book, glossary_id)  # 404 (403) first
    if optional(values, "name") is not None:
        raise bad_request("Renaming a glossary is not supported by this server")
    found = values.get("dictionaries") or []
    if not isinstance(found, list):
        raise bad_request("Missing or invalid argument: dictionaries")
    read = [_dictionary(item, served_pairs(runtime, directions)) for item in found]
    await _write_claimed(access, book, glossary_id, read, merge=True)
    return JSONResponse(await asyncio.to_thread(_info, book, glossary_id))


@router.put("/{glossary_id}/dictionaries", responses=ERRORS)
async def replace(glossary_id: str, request: Request, book: DeepLGlossariesDep,
                  runtime: RuntimeDep, directions: DirectionsDep, access: AccessDep,
                  key: DeepLKeyDep) -> JSONResponse:
    """One dictionary replaced (or added) whole."""
    values = await read_values(request)
    await admit(access, key, 0)
    await asyncio.to_thread(_managed, book, glossary_id)
    read = _dictionary(values, served_pairs(runtime, directions))
    await _write_claimed(access, book, glossary_id, [read], merge=False)
    pair = read[0]
    return JSONResponse({"source_lang": deepl_code(pair.source),
                         "target_lang": deepl_code(pair.target), "entry_count": len(read[1])})


def _dictionary(item: Any, served: list[LanguagePair]) -> Dictionary:
    if not isinstance(item, dict):
        raise bad_request("Missing or invalid argument: dictionaries")
    fields = {name: optional(item, name) for name in (
        "source_lang", "target_lang", "entries", "entries_format")}
    for name in ("source_lang", "target_lang", "entries"):
        if fields[name] is None:
            raise bad_request(f"Missing or invalid argument: dictionaries.{name}")
    pair = LanguagePair(our_code(fields["source_lang"] or ""),
                        our_code(fields["target_lang"] or ""))
    if pair not in served:
        raise bad_request(f"Unsupported glossary language pair: "
                          f"{deepl_code(pair.source)}->{deepl_code(pair.target)}")
    entries_format = (fields["entries_format"] or "tsv").lower()
    data = (fields["entries"] or "").encode("utf-8")
    if entries_format == "tbx":
        terms = read_tbx(data, source=pair.source, target=pair.target, field_name="entries")
        return pair, terms.entries, terms.forbidden
    if entries_format not in DELIMITERS:
        raise bad_request(f"Value for 'entries_format' not supported: {entries_format}")
    return pair, parse_table(data, delimiter=DELIMITERS[entries_format], field="entries"), []


async def _write_claimed(access: AccessGuard, book: GlossaryBook, glossary_id: str,
                         read: list[Dictionary], *, merge: bool) -> None:
    """`_write`, then each dictionary written claimed for the request's tenant (a
    dictionary added later belongs to the glossary's tenant too)."""
    for name in await asyncio.to_thread(_write, book, glossary_id, read, merge=merge):
        await claim_created(access, "glossary", name)


def _write(book: GlossaryBook, glossary_id: str, read: list[Dictionary], *,
           merge: bool) -> list[str]:
    """Validate every dictionary (merged with the stored one), then write them; the
    stored names written."""
    planned: list[tuple[str, list[tuple[str, str]], list[str]]] = []
    for pair, pairs, forbidden in read:
        name = f"{glossary_id}.{pair.source}-{pair.target}"
        stored = book.registry.get_glossary(name) if merge else None
        if stored is not None:
            given = {source.lower() for source, _ in pairs}
            pairs = [e for e in stored.entries if e[0].lower() not in given] + pairs
            forbidden = list(dict.fromkeys([*stored.forbidden, *forbidden]))
        book.validate(pairs, field="entries", forbidden=forbidden)
        planned.append((name, pairs, forbidden))
    for name, pairs, forbidden in planned:
        book.put(name, pairs, default_for=None, field="entries", forbidden=forbidden)
    return [name for name, _, _ in planned]


def _records(book: GlossaryBook, glossary_id: str) -> list[GlossaryRecord]:
    """The glossary's dictionaries; 404 also for another tenant's (as if unknown)."""
    scope = current_scope()
    found = [r for r in _of(book.registry.list_glossaries(), glossary_id)
             if scope.sees("glossary", r.name)]
    if not found:
        raise DeepLError(404, f"Glossary not found: {glossary_id}")
    return found


def _managed(book: GlossaryBook, glossary_id: str) -> list[GlossaryRecord]:
    """`_records` of a glossary this request may change: its tenant's own (403 for a
    shared one to a tenant's key, as for v2's)."""
    records = _records(book, glossary_id)
    try:
        for record in records:
            current_scope().check_manages("glossary", record.name)
    except Forbidden as refused:  # never NotFound: `_records` saw each
        raise DeepLError(403, str(refused)) from None
    return records


def _of(records: list[GlossaryRecord], glossary_id: str) -> list[GlossaryRecord]:
    return [r for r in records if (m := DICTIONARY.match(r.name)) and m["id"] == glossary_id]


def _one(book: GlossaryBook, glossary_id: str, pair: LanguagePair) -> GlossaryRecord:
    name = f"{glossary_id}.{pair.source}-{pair.target}"
    for record in _records(book, glossary_id):
        if record.name == name:
            return record
    raise DeepLError(404, f"Glossary dictionary not found: {deepl_code(pair.source)}->"
                          f"{deepl_code(pair.target)} in {glossary_id}")


def _pair(request: Request) -> LanguagePair:
    source = request.query_params.get("source_lang")
    target = request.query_params.get("target_lang")
    if not source or not target:
        raise bad_request("Missing or invalid argument: source_lang and target_lang")
    return LanguagePair(our_code(source), our_code(target))


def _info(book: GlossaryBook, glossary_id: str) -> dict[str, Any]:
    return _describe(glossary_id, _records(book, glossary_id))


def _describe(glossary_id: str, records: list[GlossaryRecord]) -> dict[str, Any]:
    created = min(r.created_at for r in records)
    if created.tzinfo is not None:
        created = created.astimezone(UTC).replace(tzinfo=None)
    dictionaries = []
    for record in records:
        match = DICTIONARY.match(record.name)
        assert match is not None
        dictionaries.append({"source_lang": deepl_code(match["source"]),
                             "target_lang": deepl_code(match["target"]),
                             "entry_count": len(record.entries)})
    slug = glossary_id[3:].rsplit("-", 1)[0]
    return {"glossary_id": glossary_id, "name": slug, "dictionaries": dictionaries,
            "creation_time": created.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"}
