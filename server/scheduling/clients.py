"""Who a request comes from, for fair shares (server/scheduling/fair_share.py).

A client is its API key when the request carries one (X-API-Key, an `Authorization`
header, ModernMT's MMT-ApiKey, or the key a door's own field names: LibreTranslate's
`api_key`), else the remote address the connection comes from (the peer's IP, never a
forwarded header a client could forge). Keys are kept only as a short hash. Behind a proxy
every request shares the proxy's address: give clients keys there.

The identity travels with the request's asyncio context (`CLIENT`), so the scheduler sees
it wherever the request's sentences are submitted, jobs the request started included.
"""

from __future__ import annotations

import contextvars
import hashlib

from starlette.types import ASGIApp, Receive, Scope, Send

ANONYMOUS = "local"  # work submitted outside any request (tools, tests of the scheduler)
KEY_HEADERS = (b"x-api-key", b"authorization", b"mmt-apikey")
CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("nmt_client", default=ANONYMOUS)


def key_client(key: str) -> str:
    """The client of an API key (a hash: the key itself is never kept)."""
    return "key:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def client_of(headers: list[tuple[bytes, bytes]], peer: tuple[str, int] | None) -> str:
    """The client of an HTTP request: its key header if any, else the peer's address."""
    for name, value in headers:
        if name.lower() in KEY_HEADERS and value.strip():
            return key_client(value.decode("latin-1").strip())
    return f"addr:{peer[0]}" if peer else ANONYMOUS


def identify(key: str | None) -> None:
    """A door read the request's key from its own field: the request is that key's."""
    if key:
        CLIENT.set(key_client(key))


class ClientMiddleware:
    """Sets `CLIENT` for the request (pure ASGI: the route runs in this context)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = CLIENT.set(client_of(scope.get("headers", []), scope.get("client")))
        try:
            await self.app(scope, receive, send)
        finally:
            CLIENT.reset(token)
