"""The LibreTranslate door's bodies as its OpenAPI states them: its requests are read by
hand (JSON or form, as LibreTranslate accepts both: requests.py), so their schemas are
written here, beside its error body."""

from __future__ import annotations

from typing import Any

from server.documents.formats import supported_extensions

ERROR_BODY = {"content": {"application/json": {"schema": {
    "type": "object", "properties": {"error": {"type": "string"}}}}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description, **ERROR_BODY}
    for status, description in ((400, "a missing, invalid or unsupported parameter"),
                                (429, "slow down (the queue is full)"),
                                (503, "no backbone is loaded"))}
TRANSLATE_FIELDS: dict[str, Any] = {
    "q": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
          "description": "text(s) to translate"},
    "source": {"type": "string", "example": "en", "description": 'a language code or "auto"'},
    "target": {"type": "string", "example": "fr"},
    "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
    "alternatives": {"type": "integer", "default": 0,
                     "description": "other translations to return; a negative number counts "
                                    "as 0 (as LibreTranslate reads it)"},
    "api_key": {"type": "string", "description": "an API key (with NMT_ACCESS__API_KEYS; "
                                                 "or the X-API-Key header)"},
    "domain": {"description": "extra: a domain, generic, auto, or {domain: weight}"}}
DETECT_FIELDS: dict[str, Any] = {"q": TRANSLATE_FIELDS["q"],
                                 "api_key": TRANSLATE_FIELDS["api_key"]}
FILE_FIELDS: dict[str, Any] = {
    "file": {"type": "string", "format": "binary",
             "description": "the document: " + ", ".join(supported_extensions())},
    "source": {"type": "string", "example": "en", "description": 'a language code or "auto"'},
    "target": {"type": "string", "example": "fr"},
    "api_key": {"type": "string"},
    "domain": {"type": "string", "description": "extra: a domain, generic, auto or weights"}}
SUGGEST_FIELDS: dict[str, Any] = {
    "q": {"type": "string", "description": "original text"},
    "s": {"type": "string", "description": "suggested translation"},
    "source": {"type": "string", "example": "en"},
    "target": {"type": "string", "example": "fr"},
    "api_key": {"type": "string"},
    "domain": {"type": "string", "description": "extra: the domain the suggestion is for"}}


def body_schema(fields: dict[str, Any], required: list[str],
                media_types: tuple[str, ...] = (
                    "application/json", "application/x-www-form-urlencoded",
                    "multipart/form-data")) -> dict[str, Any]:
    """OpenAPI for a body read by hand, in each of `media_types`."""
    schema = {"type": "object", "properties": fields, "required": required}
    return {"requestBody": {"required": True, "content": {
        media: {"schema": schema} for media in media_types}}}


TRANSLATE_BODY = body_schema(TRANSLATE_FIELDS, ["q", "source", "target"])
DETECT_BODY = body_schema(DETECT_FIELDS, ["q"])
FILE_BODY = body_schema(FILE_FIELDS, ["file", "source", "target"], ("multipart/form-data",))
SUGGEST_BODY = body_schema(SUGGEST_FIELDS, ["q", "s", "source", "target"])
