"""The ModernMT door's bodies as its OpenAPI states them: its requests are read by hand
(query, JSON or form, as its two clients send them: params.py) and its answers are
ModernMT's envelopes, so their schemas are written here."""

from __future__ import annotations

from typing import Any

ERROR_BODY = {"content": {"application/json": {"schema": {
    "type": "object", "properties": {
        "status": {"type": "integer"},
        "error": {"type": "object", "properties": {"type": {"type": "string"},
                                                   "message": {"type": "string"}}}}}}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description, **ERROR_BODY}
    for status, description in ((400, "a missing, invalid or unsupported parameter"),
                                (401, "no MMT-ApiKey where one is needed"),
                                (403, "a wrong MMT-ApiKey"),
                                (404, "an unknown memory or import job"),
                                (429, "slow down (the queue is full)"),
                                (503, "no backbone is loaded"))}
