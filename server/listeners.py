"""The server's listeners: the main port, and optionally a separate admin port
(`NMT_ADMIN_PORT`, like TorchServe's management API) that alone serves /admin.

Both are uvicorn servers in one event loop over one application state. The admin listener
starts once the main app's lifespan has built that state, and stops when the main one
stops (SIGINT/SIGTERM reach both: each uvicorn server passes the signal on when it ends).
"""

from __future__ import annotations

import asyncio
import contextlib

import uvicorn

from server.app import create_admin_app, create_app
from server.settings import Settings


async def serve(settings: Settings) -> None:
    app = create_app(settings)
    main = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port,
                                         log_level=settings.log_level))
    if settings.admin_port is None:
        await main.serve()
        return
    admin = uvicorn.Server(uvicorn.Config(
        create_admin_app(app), host=settings.admin_host, port=settings.admin_port,
        log_level=settings.log_level, lifespan="off"))
    serving = asyncio.create_task(main.serve())
    while not main.started and not serving.done():
        await asyncio.sleep(0.05)
    if serving.done():  # the main listener failed to start
        await serving
        return
    administering = asyncio.create_task(admin.serve())
    await asyncio.wait({serving, administering}, return_when=asyncio.FIRST_COMPLETED)
    main.should_exit = admin.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(serving, administering)


def run(settings: Settings) -> None:
    """Serve until SIGINT/SIGTERM."""
    with contextlib.suppress(KeyboardInterrupt):  # the signal uvicorn passes on at the end
        asyncio.run(serve(settings))
