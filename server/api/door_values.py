"""Reading a compatibility door's request parameters: a JSON object, or form fields
(urlencoded or multipart, plus the query string). A form field sent several times
(`q=a&q=b`, how HTTP clients send a list) is a list; a file where text is expected is the
client's mistake. The doors differ by contract (their messages, whether the query string
joins a JSON body, line endings): `DoorRules` holds those, each door's requests.py its
own rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from server.api.uploads import media_type


@dataclass(frozen=True)
class DoorRules:
    refuse: Callable[[str], Exception]  # the door's 400 with a message
    invalid_json: str
    not_an_object: str
    file_field: str  # "{key}" is the parameter's name
    empty_json_is_empty: bool  # an empty JSON body is {} (else invalid JSON)
    query_beside_json: bool  # the query string's parameters join a JSON body's
    form_line_endings_lf: bool  # CRLF and CR in form values become LF


async def read_door_values(request: Request, rules: DoorRules) -> dict[str, Any]:
    """The request's parameters by name."""
    kind = media_type(request)
    if kind == "application/json" or kind.endswith("+json"):
        body = await request.body()
        try:
            values = json.loads((body or b"{}") if rules.empty_json_is_empty else body)
        except (ValueError, UnicodeDecodeError):
            raise rules.refuse(rules.invalid_json) from None
        if not isinstance(values, dict):
            raise rules.refuse(rules.not_an_object)
        return {**dict(request.query_params), **values} if rules.query_beside_json else values
    try:
        form = await request.form()
    except (MultiPartException, HTTPException, ValueError) as error:
        # A malformed form body (python-multipart's parse errors are ValueErrors) is the
        # client's mistake: 400, as the servers these doors answer for do.
        reason = getattr(error, "detail", None) or getattr(error, "message", None) or error
        raise rules.refuse(f"Invalid form body: {reason}") from None
    out: dict[str, Any] = {}
    for key in dict.fromkeys([*request.query_params.keys(), *form.keys()]):
        found = form.getlist(key) or request.query_params.getlist(key)
        if any(isinstance(value, UploadFile) for value in found):
            raise rules.refuse(rules.file_field.format(key=key))
        texts = [str(value) for value in found]
        if rules.form_line_endings_lf:
            texts = [text.replace("\r\n", "\n").replace("\r", "\n") for text in texts]
        out[key] = texts[0] if len(texts) == 1 else texts
    return out
