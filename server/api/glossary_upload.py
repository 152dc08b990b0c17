"""Reading a stored glossary's upload (`PUT /admin/glossaries/{name}`): JSON
(`{"entries": {...}, "default_for": ...}`), a CSV (`text/csv`) or TSV
(`text/tab-separated-values`) file as DeepL and Google accept it, or a TBX termbase
(`application/x-tbx`, `application/tbx+xml`, `application/xml`, `text/xml`) read for the
pair `source_lang` -> `target_lang` (server/serving/tbx.py); its bytes bounded while they
arrive (413)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from fastapi import Request
from pydantic import ValidationError

from server.api.schemas_glossaries import GlossaryUpload
from server.api.uploads import media_type
from server.core.errors import InvalidInput, TooLarge
from server.serving.tbx import read_tbx
from server.textproc.glossary import parse_table

TABLE_TYPES = {"text/csv": ",", "text/tab-separated-values": "\t"}
TBX_TYPES = frozenset({"application/x-tbx", "application/tbx+xml", "application/xml",
                       "text/xml"})


@dataclass(frozen=True)
class GlossaryUploaded:
    entries: list[tuple[str, str]]
    default_for: str | None  # the domain it is the default of
    forbidden: list[str] = field(default_factory=list)  # target terms (TBX)


async def read_glossary_upload(request: Request, *, limit: int, default_for: str | None,
                               source_lang: str | None = None,
                               target_lang: str | None = None) -> GlossaryUploaded:
    """The entries, forbidden target terms and the domain the glossary is the default of
    (a JSON body's own, or `default_for`, the query's, for a table or a TBX file)."""
    data = await _read_body(request, limit=limit)
    content_type = media_type(request)
    if content_type in TABLE_TYPES:
        _refuse_json_table(data, content_type)
        return GlossaryUploaded(parse_table(data, delimiter=TABLE_TYPES[content_type],
                                            field="entries"), default_for)
    if content_type in TBX_TYPES:
        if not source_lang or not target_lang:
            raise InvalidInput("a TBX glossary needs the query parameters source_lang and "
                               "target_lang (e.g. ?source_lang=en&target_lang=de): the "
                               "languages whose terms it takes", field="source_lang")
        terms = await asyncio.to_thread(read_tbx, data, source=source_lang.lower(),
                                        target=target_lang.lower())
        return GlossaryUploaded(terms.entries, default_for, terms.forbidden)
    if content_type == "application/json":
        upload = _json_upload(data)
        return GlossaryUploaded(list(upload.entries.items()), upload.default_for)
    raise InvalidInput(f"unsupported content type {content_type!r}: send application/json, "
                       "text/csv, text/tab-separated-values or a TBX file "
                       "(application/x-tbx)", field="body")


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
