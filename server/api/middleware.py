"""Request counting and latency (pure ASGI, so streaming and disconnects pass through)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.core.metrics import Metrics


class MetricsMiddleware:
    """`nmt_api_requests_total{route,status}` and `nmt_api_request_latency_seconds{route}`;
    `route` is the matched path template (bounded), or "unmatched"."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = scope.get("route")
            label = str(getattr(route, "path", "unmatched"))
            self.metrics.requests.labels(route=label, status=str(status)).inc()
            self.metrics.latency.labels(route=label).observe(time.perf_counter() - started)
