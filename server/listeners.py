"""The server's listeners: the main port, and optionally a separate admin port
(`NMT_ADMIN_PORT`, like TorchServe's management API) that alone serves /admin.

Without an admin port this is `server.operations.lifecycle.serve` (uvicorn, draining on SIGTERM).
With one, both are uvicorn servers in one event loop over one application state: the admin
listener starts once the main app's lifespan has built that state. A SIGTERM reaches the
admin listener first (the last to install signal handlers), which stops and passes the
signal on to the main one, which drains as usual; the admin listener also stops when the
main one does.
"""

from __future__ import annotations

import asyncio
import contextlib

import uvicorn
from fastapi import FastAPI

from server.app import create_admin_app, create_app
from server.operations.lifecycle import AFTER_DRAIN_S, DrainingServer, Lifecycle, serve
from server.settings import Settings


def run(settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT."""
    app = create_app(settings)
    if settings.admin_port is None:
        serve(app, settings)
        return
    with contextlib.suppress(KeyboardInterrupt):  # the signal uvicorn passes on at the end
        asyncio.run(serve_with_admin(app, settings, admin_port=settings.admin_port))


async def serve_with_admin(app: FastAPI, settings: Settings, *, admin_port: int) -> None:
    lifecycle: Lifecycle = app.state.lifecycle
    main = DrainingServer(uvicorn.Config(app, host=settings.host, port=settings.port,
                                         log_level=settings.log_level,
                                         timeout_graceful_shutdown=AFTER_DRAIN_S),
                          lifecycle, drain_s=settings.shutdown_drain_s)
    admin = uvicorn.Server(uvicorn.Config(
        create_admin_app(app), host=settings.admin_host, port=admin_port,
        log_level=settings.log_level, lifespan="off"))
    serving = asyncio.create_task(main.serve())
    while not main.started and not serving.done():
        await asyncio.sleep(0.05)
    if serving.done():  # the main listener failed to start
        await serving
        return
    administering = asyncio.create_task(admin.serve())
    await asyncio.wait({serving, administering}, return_when=asyncio.FIRST_COMPLETED)
    if serving.done() or not lifecycle.draining:  # main stopped, or the admin port failed
        admin.should_exit = main.should_exit = True
    await asyncio.gather(serving, administering, return_exceptions=True)
