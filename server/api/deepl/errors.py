"""DeepL's error contract: every error is `{"message": "..."}` with DeepL's status codes
(400 a bad parameter, 403 a refused key, 404 an unknown glossary or document, 413 too
large, 429 too many requests, 456 the key's character quota), so the official clients
raise the exceptions their users already catch (AuthorizationException,
QuotaExceededException, DeepLException, ...). Native errors raised by the shared
translation path are mapped onto that contract by the route class."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from model_store import StoreError
from server.api.errors import DoorError, HttpError, to_http
from server.core.errors import ServingError
from server.core.metrics import Metrics

log = logging.getLogger(__name__)

# Native status -> DeepL status: what the native API calls invalid (422) or an unsupported
# file type (415) is DeepL's 400; a missing key (401) is DeepL's 403.
STATUS = {422: 400, 415: 400, 401: 403}
QUOTA_EXCEEDED = 456  # DeepL's "quota for this billing period has been exceeded"


class DeepLError(DoorError):
    """An answer of the DeepL API other than 200."""


def bad_request(message: str) -> DeepLError:
    return DeepLError(400, message)


def to_deepl(exc: Exception) -> HttpError:
    """The DeepL form of an error raised while answering a DeepL call."""
    if isinstance(exc, DeepLError):
        return HttpError(exc.status, f"deepl_{exc.status}", exc.message)
    if isinstance(exc, RequestValidationError):  # a path or query parameter FastAPI read
        found = exc.errors()
        where = ".".join(str(part) for part in found[0]["loc"]) if found else "request"
        reason = found[0]["msg"] if found else "invalid"
        return HttpError(400, "invalid", f"Invalid parameter {where}: {reason}")
    native = to_http(exc)
    status = STATUS.get(native.status, native.status)
    where = f"{native.field}: " if native.field and status == 400 else ""
    return HttpError(status, native.code, where + native.message, headers=native.headers)


class DeepLRoute(APIRoute):
    """Routes of the DeepL API answer their errors in DeepL's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except (DeepLError, ServingError, StoreError) as exc:
                return _respond(request, to_deepl(exc))
            except Exception as exc:  # the native handler would answer in the native shape
                log.error("unhandled error on %s %s", request.method, request.url.path,
                          exc_info=exc)
                return _respond(request, to_deepl(exc))

        return handle


def _respond(request: Request, error: HttpError) -> JSONResponse:
    metrics: Metrics = request.app.state.metrics
    metrics.errors.labels(code=error.code).inc()
    return JSONResponse({"message": error.message}, status_code=error.status,
                        headers=error.headers)
