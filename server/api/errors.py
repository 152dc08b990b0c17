"""The one exception -> HTTP mapping. Every error body is
`{"error": {"code": ..., "message": ..., "field"?: ...}}`; never an error with HTTP 200."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from model_store import ArtifactError, ConflictError, InflationError, NotFoundError, StoreError
from server.api.schemas import DecodingOptions
from server.core import errors
from server.core.metrics import Metrics
from server.operations.replica import REPLICA_HEADER, replica_name

log = logging.getLogger(__name__)


class ClientGone(errors.ServingError):
    """The client disconnected before its answer was ready (nobody reads this answer)."""

    code = "client_closed_request"


# Exception class -> HTTP status; looked up along the exception's MRO (most specific wins).
STATUS: dict[type[Exception], int] = {
    errors.InvalidInput: 422,
    errors.InvalidArtifact: 422,
    errors.TooLarge: 413,
    errors.UnsupportedMediaType: 415,
    errors.UnknownDomain: 404,
    errors.UnsupportedLanguage: 400,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.Busy: 429,
    errors.DeadlineUnreachable: 504,
    errors.DeadlineExceeded: 504,
    errors.NotReady: 503,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    ClientGone: 499,
    InflationError: 413,
    ArtifactError: 422,
    NotFoundError: 404,
    ConflictError: 409,
    StoreError: 500,
}
STORE_CODES: dict[type[Exception], str] = {  # most specific first
    InflationError: "too_large", ArtifactError: "invalid_artifact",
    NotFoundError: "not_found", ConflictError: "conflict", StoreError: "store_error"}
HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
              405: "method_not_allowed", 413: "too_large", 415: "unsupported_media_type",
              422: "invalid_request"}
UNION_TAGS = frozenset({"str", "constrained-str", "int", "float", "bool", "none", "list", "dict"})


class DoorError(Exception):
    """An answer other than 200 that a compatible door (DeepL, ModernMT) raises itself, in
    that API's own status codes; each door subclasses it, so each catches only its own."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class HttpError:
    status: int
    code: str
    message: str
    field: str | None = None
    headers: dict[str, str] | None = None

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}


def status_of(exc: Exception) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def to_http(exc: Exception) -> HttpError:
    """The HTTP form of any exception (unknown ones are 500 without details)."""
    status = status_of(exc)
    if isinstance(exc, errors.ServingError):
        headers = ({"Retry-After": str(exc.retry_after)}
                   if isinstance(exc, errors.Busy | errors.Draining)
                   else {"WWW-Authenticate": "Bearer"} if isinstance(exc, errors.Unauthorized)
                   else None)
        return HttpError(status, exc.code, exc.message, exc.field, headers)
    if isinstance(exc, StoreError):
        code = next(c for cls, c in STORE_CODES.items() if isinstance(exc, cls))
        return HttpError(status, code, str(exc))
    return HttpError(500, "internal", "internal server error; the server log has details")


def validation_error(exc: RequestValidationError) -> HttpError:
    """422 naming the field at fault, e.g. `items[2].text` or `domain.medical`."""
    problems = list(exc.errors())
    if any(p.get("type") == "json_invalid" for p in problems):
        return HttpError(422, "invalid_request", "the body is not valid JSON", "body")
    fields = [field_name(p.get("loc", ())) for p in problems]
    messages = [f"{f}: {p.get('msg', 'invalid')}{_hint(f, p)}"
                for f, p in zip(fields, problems, strict=True)]
    field = fields[0] if fields else "body"
    # A union reports every branch; name the most specific location under the first field.
    field = max((f for f in fields if f == field or f.startswith(field + ".")), key=len,
                default=field)
    return HttpError(422, "invalid_request", "; ".join(dict.fromkeys(messages)) or "invalid",
                     field)


def _hint(field: str, problem: Any) -> str:
    """A decoding option sent at the top level (`"beam_size": 4`) says where it belongs."""
    if problem.get("type") == "extra_forbidden" and field in DecodingOptions.model_fields:
        return f'; decoding options go in "options": {{"{field}": ...}}'
    return ""


def field_name(loc: Sequence[int | str]) -> str:
    """`("body", "items", 2, "text")` -> `items[2].text`; union member tags are dropped."""
    parts = list(loc[1:] if loc and loc[0] == "body" else loc)
    out = ""
    for index, part in enumerate(parts):
        if isinstance(part, int):
            out += f"[{part}]"
        elif _is_union_tag(part, parts[:index]):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "body"


def _is_union_tag(part: str, before: Sequence[int | str]) -> bool:
    """pydantic names union members in locations (`domain.str`, `domain.dict[str,float]`)."""
    return bool(before) and before[-1] == "domain" and (
        part in UNION_TAGS or "[" in part)


def install_error_handlers(app: FastAPI, metrics: Metrics) -> None:
    def respond(error: HttpError) -> JSONResponse:
        metrics.errors.labels(code=error.code).inc()
        return JSONResponse(error.body(), status_code=error.status, headers=error.headers)

    async def on_serving_error(_request: Request, exc: Exception) -> JSONResponse:
        return respond(to_http(exc))

    async def on_validation(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return respond(validation_error(exc))

    async def on_http(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:  # a body FastAPI could not parse (e.g. nested too deeply)
            return respond(HttpError(422, "invalid_request", f"the body could not be parsed "
                                     f"({exc.detail}): send one JSON object", "body"))
        code = HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
        headers = dict(exc.headers) if exc.headers else None
        return respond(HttpError(exc.status_code, code, str(exc.detail), headers=headers))

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        response = respond(to_http(exc))
        # Answered by Starlette's outermost middleware, outside ReplicaHeaderMiddleware.
        response.headers[REPLICA_HEADER] = replica_name()
        return response

    app.add_exception_handler(errors.ServingError, on_serving_error)
    app.add_exception_handler(StoreError, on_serving_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
