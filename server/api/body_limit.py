"""Request bodies are bounded while they arrive (pure ASGI, before any route runs).

A declared `Content-Length` above the limit is refused at once; otherwise the body is
read chunk by chunk and refused as soon as it passes the limit, so a body without a
length (chunked) or with a lying one never gets further than `limit` bytes into memory.
A body within the limit is handed to the app unchanged. Routes that stream large uploads
under limits of their own (module and domain uploads) are passed through untouched.

After a refusal the rest of the body is read and dropped for a short, bounded while
before the connection closes ("lingering close", as nginx does): closing a socket with
unread bytes sends a TCP reset that can destroy the 413 before the client reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.core.metrics import Metrics

SETTING = "NMT_LIMITS__MAX_BODY_BYTES"
LINGER_S = 2.0  # longest a refused body is read and dropped
LINGER_BYTES = 64 * 1024 * 1024  # most bytes of a refused body read and dropped


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, limit: int, streams_itself: Callable[[str, str], bool],
                 metrics: Metrics, linger_s: float = LINGER_S,
                 linger_bytes: int = LINGER_BYTES) -> None:
        self.app = app
        self.limit = limit
        self.streams_itself = streams_itself  # (method, path) -> its route bounds its body
        self.metrics = metrics
        self.linger_s = linger_s
        self.linger_bytes = linger_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.streams_itself(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(receive, send, f"request body of {declared} bytes "
                                              f"(Content-Length); at most {self.limit} "
                                              f"({SETTING})")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: nobody reads an answer
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._refuse(receive, send, f"request body larger than {self.limit} "
                                                  f"bytes ({SETTING})")
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)

    async def _refuse(self, receive: Receive, send: Send, message: str) -> None:
        """413 (whole, by its Content-Length), then linger on the body, then close."""
        self.metrics.errors.labels(code="too_large").inc()
        payload = json.dumps({"error": {"code": "too_large", "message": message,
                                        "field": "body"}}).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload, "more_body": True})
        await self._linger(receive)
        await send({"type": "http.response.body", "body": b""})

    async def _linger(self, receive: Receive) -> None:
        dropped = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.linger_s):
                while dropped <= self.linger_bytes:
                    message = await receive()
                    if message["type"] != "http.request" or not message.get("more_body"):
                        return
                    dropped += len(message.get("body", b""))


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that first gives the buffered body as one message, then whatever the
    server sends next (a disconnect)."""
    queue: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if queue:
            return queue.pop()
        return await receive()

    return replayed
