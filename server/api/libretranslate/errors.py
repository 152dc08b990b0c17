"""LibreTranslate's error contract, and its CORS headers (any web page or browser add-on
may call it). Every error is `{"error": "<message>"}`, and every bad or unsupported
parameter is a 400 (LibreTranslate 1.9 answers missing parameters, unsupported languages
or formats and size limits alike with 400; 403 for a refused key, 429 "Slowdown: ..." for
limits). Native errors raised by the shared translation path are mapped onto that contract
here, by a route class, so the native API's error bodies stay as they are."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from model_store import StoreError
from server.api.errors import HttpError, to_http
from server.core.errors import ServingError
from server.core.metrics import Metrics

log = logging.getLogger(__name__)

# Native status -> LibreTranslate status: whatever the native API calls a bad request
# (422 invalid, 404 unknown domain, 413 too large, 415 a file type) LibreTranslate calls 400.
# A missing API key: LibreTranslate asks for one with 400.
STATUS = {422: 400, 404: 400, 413: 400, 415: 400, 401: 400}


# As LibreTranslate: any web page or browser add-on may call the API (no cookies are read).
CORS = {"Access-Control-Allow-Origin": "*",
        "Access-Control-Allow-Headers": "Authorization, Content-Type",
        "Access-Control-Allow-Methods": "GET, POST",
        "Access-Control-Max-Age": str(20 * 24 * 3600)}


class LibreTranslateError(Exception):
    """An answer of the LibreTranslate API other than 200."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad_request(message: str) -> LibreTranslateError:
    return LibreTranslateError(400, message)


def missing(name: str) -> LibreTranslateError:
    return bad_request(f"Invalid request: missing {name} parameter")


def to_libretranslate(exc: Exception) -> HttpError:
    """The LibreTranslate form of an error raised while answering a LibreTranslate call."""
    if isinstance(exc, LibreTranslateError):
        code = {400: "bad_request", 403: "forbidden", 429: "rate_limited"}.get(
            exc.status, f"http_{exc.status}")
        return HttpError(exc.status, code, exc.message)
    native = to_http(exc)
    status = STATUS.get(native.status, native.status)
    message = native.message
    if status == 400:
        where = f"{native.field}: " if native.field else ""
        message = f"Invalid request: {where}{message}"
    elif status == 429:
        message = f"Slowdown: {message}"
    return HttpError(status, native.code, message, headers=native.headers)


class LibreTranslateRoute(APIRoute):
    """Routes of the LibreTranslate API answer their errors in LibreTranslate's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                response = await handler(request)
            except (LibreTranslateError, ServingError, StoreError) as exc:
                response = respond(request, to_libretranslate(exc))
            except Exception as exc:  # the native handler would answer in the native shape
                log.error("unhandled error on %s %s", request.method, request.url.path,
                          exc_info=exc)
                response = respond(request, to_libretranslate(exc))
            response.headers.update(CORS)
            return response

        return handle


def respond(request: Request, error: HttpError) -> JSONResponse:
    metrics: Metrics = request.app.state.metrics
    metrics.errors.labels(code=error.code).inc()
    return JSONResponse({"error": error.message}, status_code=error.status,
                        headers=error.headers)
