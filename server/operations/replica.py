"""Which process answered: every HTTP answer carries `X-NMT-Replica: <host>:<pid>`.

With several replicas behind one proxy (Ray Serve, a Kubernetes Service) the header tells
an operator, a load test or a bug report which process served a request. The name is read
at answer time, so an app built in one process and served in another (Ray builds it in the
replica) names the serving one.
"""

from __future__ import annotations

import functools
import os
import socket

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REPLICA_HEADER = "X-NMT-Replica"


def replica_name() -> str:
    """`<host>:<pid>` of this process."""
    return _name_of(os.getpid())


@functools.cache
def _name_of(pid: int) -> str:
    # once per process: gethostname is a system call, and every answer names the replica
    return f"{socket.gethostname()}:{pid}"


class ReplicaHeaderMiddleware:
    """Adds `X-NMT-Replica` to every HTTP answer that passes through the app's middleware
    stack, errors included (a 500 from an unexpected exception is answered outside that
    stack: `server/api/errors.py` names the replica there itself)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REPLICA_HEADER] = replica_name()
            await send(message)

        await self.app(scope, receive, named_send)
