"""The DeepL door's bodies as its OpenAPI states them: its requests are read by hand (JSON
or form, as DeepL accepts both: requests.py), so their schemas are written here, beside
its error body."""

from __future__ import annotations

from typing import Any

ERROR_BODY = {"content": {"application/json": {"schema": {
    "type": "object", "properties": {"message": {"type": "string"}}}}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description, **ERROR_BODY}
    for status, description in ((400, "a missing, invalid or unsupported parameter"),
                                (403, "a missing or refused key"),
                                (404, "an unknown glossary or document"),
                                (413, "the request is too large"),
                                (429, "too many requests"),
                                (456, "the key's character quota is used up"),
                                (503, "no backbone is loaded"))}
TEXTS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
TRANSLATE_FIELDS: dict[str, Any] = {
    "text": TEXTS | {"description": "text(s) to translate"},
    "source_lang": {"type": "string", "example": "EN", "description": "default: detected"},
    "target_lang": {"type": "string", "example": "FR"},
    "context": {"type": "string"},
    "formality": {"type": "string", "enum": ["default", "more", "less", "prefer_more",
                                             "prefer_less"]},
    "glossary_id": {"type": "string", "description": "a stored glossary"},
    "tag_handling": {"type": "string", "enum": ["xml", "html"]},
    "ignore_tags": TEXTS, "split_sentences": {"type": "string", "enum": ["0", "1",
                                                                        "nonewlines"]},
    "preserve_formatting": {"type": "boolean"}, "model_type": {"type": "string"},
    "show_billed_characters": {"type": "boolean"}}
GLOSSARY_FIELDS: dict[str, Any] = {
    "name": {"type": "string"}, "source_lang": {"type": "string", "example": "EN"},
    "target_lang": {"type": "string", "example": "FR"},
    "entries": {"type": "string", "description": "one entry a line: source<TAB>target "
                                                 "(tsv) or source,target (csv), or a TBX "
                                                 "termbase (tbx)"},
    "entries_format": {"type": "string", "enum": ["tsv", "csv", "tbx"], "default": "tsv"}}
DOCUMENT_FIELDS: dict[str, Any] = {
    "file": {"type": "string", "format": "binary"},
    "source_lang": {"type": "string"}, "target_lang": {"type": "string"},
    "glossary_id": {"type": "string"}, "formality": {"type": "string"}}


def body_schema(fields: dict[str, Any], required: list[str],
                media_types: tuple[str, ...] = (
                    "application/json", "application/x-www-form-urlencoded",
                    "multipart/form-data")) -> dict[str, Any]:
    """OpenAPI for a body read by hand, in each of `media_types`."""
    schema = {"type": "object", "properties": fields, "required": required}
    return {"requestBody": {"required": False, "content": {
        media: {"schema": schema} for media in media_types}}}


TRANSLATE_BODY = body_schema(TRANSLATE_FIELDS, ["text", "target_lang"])
GLOSSARY_BODY = body_schema(GLOSSARY_FIELDS, ["name", "source_lang", "target_lang",
                                              "entries"])
DOCUMENT_BODY = body_schema(DOCUMENT_FIELDS, ["file", "target_lang"],
                            ("multipart/form-data",))
