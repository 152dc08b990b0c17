"""Reading a ModernMT call's parameters as its two clients send them: Weblate as real
query parameters (GET) or a form (POST, a multipart form with a file), the `modernmt`
Python client as a JSON body (every call a POST) or a multipart form with a file. One
mapping of names to values whatever the carrier; files apart."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from server.api.modernmt.errors import ModernMTError, bad_request
from server.api.uploads import media_type

MAX_HINTS = 8  # as many memories as the native `memory` option names
# a form of one pair: two texts of at most max_segment_chars (4 UTF-8 bytes a character
# at most) plus the tuid, the languages and the form's boundaries
PAIR_FORM_SLACK = 64 * 1024


@dataclass
class Params:
    values: dict[str, Any]
    files: dict[str, UploadFile] = field(default_factory=dict)

    def text(self, name: str, *, required: bool = False) -> str | None:
        value = self.values.get(name)
        if value is None or value == "":
            if required:
                raise bad_request(f"missing parameter: {name}")
            return None
        if isinstance(value, bool | int | float):
            return str(value)
        if not isinstance(value, str):
            raise bad_request(f"{name} must be a string")
        return value

    def texts(self, name: str) -> tuple[list[str], bool]:
        """A parameter given once or many times (`q`): its texts and whether it is a list."""
        value = self.values.get(name)
        if value is None or value == "" or value == []:
            raise bad_request(f"missing parameter: {name}")
        if isinstance(value, str):
            return [value], False
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value), True
        raise bad_request(f"{name} must be a string or a list of strings")


async def read_params(request: Request) -> Params:
    values: dict[str, Any] = {}
    for name in request.query_params:
        many = request.query_params.getlist(name)
        values[name] = many if len(many) > 1 else many[0]
    kind = media_type(request)
    files: dict[str, UploadFile] = {}
    if kind == "application/json":
        body = await request.body()
        if body.strip():
            try:
                parsed = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise bad_request("the body is not valid JSON") from None
            if not isinstance(parsed, dict):
                raise bad_request("the JSON body must be an object")
            values.update(parsed)
    elif kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = await request.form()
        except (HTTPException, MultiPartException, ValueError, AssertionError):
            raise bad_request(f"malformed {kind} body (a multipart form needs its "
                              "boundary)") from None
        for name in form:
            parts = form.getlist(name)
            uploads = [m for m in parts if isinstance(m, UploadFile)]
            if uploads:
                files[name] = uploads[0]
            else:
                texts = [m for m in parts if isinstance(m, str)]
                values[name] = texts if len(texts) > 1 else texts[0]
    return Params(values, files)


def memory_ids(value: str | None, name: str = "hints") -> list[int]:
    """`hints`: memory ids, comma-separated ("1,2")."""
    if value is None:
        return []
    parts = [part.strip() for part in value.split(",") if part.strip()]
    if not all(_is_id(part) for part in parts):
        raise bad_request(f"{name} must be memory ids separated by commas, e.g. 1,2")
    ids = [int(part) for part in parts]
    if len(ids) > MAX_HINTS:
        raise bad_request(f"at most {MAX_HINTS} memories in {name}")
    return list(dict.fromkeys(ids))


def context_vector(value: str | None) -> dict[int, float]:
    """ModernMT's context vector: "id:weight" pairs separated by commas ("1:0.8,4:0.2")."""
    if value is None:
        return {}
    weights: dict[int, float] = {}
    for part in value.split(","):
        if not part.strip():
            continue
        key, sep, weight = part.partition(":")
        try:
            if not _is_id(key.strip()):
                raise ValueError(key)
            memory, score = int(key), float(weight)
        except ValueError:
            raise bad_request("context_vector must be id:weight pairs separated by commas, "
                              'e.g. "1:0.8,4:0.2"') from None
        if not sep or not 0 <= score <= 1:
            raise bad_request("context_vector weights are numbers from 0 to 1")
        weights[memory] = score
    if len(weights) > MAX_HINTS:
        raise bad_request(f"at most {MAX_HINTS} memories in context_vector")
    return weights


def memory_id(value: str) -> int:
    if not _is_id(value):
        raise bad_request(f"memory ids are integers (got {value[:40]!r})")
    return int(value)


def _is_id(text: str) -> bool:
    """ASCII digits within the registry's 64-bit ids (int() would take other scripts'
    digits and any size)."""
    return 0 < len(text) <= 18 and text.isascii() and text.isdigit()


SPOOL_BYTES = 1024 * 1024


def may_carry_a_file(request: Request, max_segment_chars: int) -> bool:
    """Whether the body may be a file rather than one pair: a multipart form longer than
    any form of one pair, or of unknown length. Asked before the form is read, so that a
    refused import spools nothing."""
    if media_type(request) != "multipart/form-data":
        return False
    length = request.headers.get("content-length", "")
    return not length.isdigit() or int(length) > 8 * max_segment_chars + PAIR_FORM_SLACK


async def spooled(upload: UploadFile, limit: int, name: str) -> tuple[IO[bytes], int]:
    """A copy of a form's file the import job owns (the request's own copy closes with
    the request); 413 past `limit` bytes."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, prefix="nmt-modernmt-")
    size = 0
    try:
        while chunk := await upload.read(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise ModernMTError(413, f"{name} is larger than {limit} bytes "
                                         "(NMT_MEMORIES__MAX_IMPORT_BYTES)")
            spool.write(chunk)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool, size
