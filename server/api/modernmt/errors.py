"""ModernMT's error contract: every answer is an envelope, `{"status": 200, "data": ...}`
or `{"status": 4xx, "error": {"type": "...Exception", "message": "..."}}`; both clients
read `error.message` (the Python client `error.type` too). Native errors raised by the
shared translation path and the memories are mapped onto it here, by a route class, so
the native API's error bodies stay as they are."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from model_store import StoreError
from server.api.errors import DoorError, HttpError, to_http, validation_error
from server.core.errors import ServingError
from server.core.metrics import Metrics

log = logging.getLogger(__name__)

# The exception type names ModernMT answers with, by status (422: ours is their 400).
TYPES = {400: "BadRequestException", 401: "AuthenticationException",
         403: "ForbiddenException", 404: "NotFoundException", 409: "ConflictException",
         413: "PayloadTooLargeException", 415: "UnsupportedMediaTypeException",
         429: "TooManyRequestsException", 503: "ServiceUnavailableException",
         504: "TimeoutException"}
STATUS = {422: 400}


class ModernMTError(DoorError):
    """An answer of the ModernMT API other than 200, raised by this door itself."""


def bad_request(message: str) -> ModernMTError:
    return ModernMTError(400, message)


def not_found(message: str) -> ModernMTError:
    return ModernMTError(404, message)


def to_modernmt(exc: Exception) -> HttpError:
    """The ModernMT form of an error raised while answering a ModernMT call."""
    if isinstance(exc, ModernMTError):
        return HttpError(exc.status, f"http_{exc.status}", exc.message)
    if isinstance(exc, RequestValidationError):  # its message names the field already
        invalid = validation_error(exc)
        return HttpError(400, invalid.code, invalid.message)
    native = to_http(exc)
    where = f"{native.field}: " if native.field else ""
    return HttpError(STATUS.get(native.status, native.status), native.code,
                     f"{where}{native.message}", headers=native.headers)


def envelope(data: Any) -> JSONResponse:
    return JSONResponse({"status": 200, "data": data})


class ModernMTRoute(APIRoute):
    """Routes of the ModernMT API answer their errors in ModernMT's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except (ModernMTError, ServingError, StoreError, RequestValidationError) as exc:
                return respond(request, to_modernmt(exc))
            except Exception as exc:  # the native handler would answer in the native shape
                log.error("unhandled error on %s %s", request.method, request.url.path,
                          exc_info=exc)
                return respond(request, to_modernmt(exc))

        return handle


def respond(request: Request, error: HttpError) -> JSONResponse:
    metrics: Metrics = request.app.state.metrics
    metrics.errors.labels(code=error.code).inc()
    kind = TYPES.get(error.status, "InternalServerErrorException" if error.status >= 500
                     else "ClientErrorException")
    return JSONResponse({"status": error.status,
                         "error": {"type": kind, "message": error.message}},
                        status_code=error.status, headers=error.headers)
