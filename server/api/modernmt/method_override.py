"""ModernMT's own client sends every call as a POST naming the real method in
`X-HTTP-Method-Override` (and its parameters as a JSON body, even for a GET): under
`/modernmt` such a POST is routed as the method it names, before any route is matched."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

PREFIX = "/modernmt/"
HEADER = b"x-http-method-override"
METHODS = {"GET", "POST", "PUT", "DELETE"}


class MethodOverrideMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST"
                and scope["path"].startswith(PREFIX)):
            for name, value in scope["headers"]:
                if name.lower() == HEADER:
                    method = value.decode("latin-1").strip().upper()
                    if method in METHODS:
                        scope = {**scope, "method": method}
                    break
        await self.app(scope, receive, send)
