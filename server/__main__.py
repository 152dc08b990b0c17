"""`nmt-server` (or `python -m server`) `[--host H] [--port P] [--store-dir DIR]
[--registry-url URL] [--backbone NAME] [--device D] [--int8] [--admin-port P] [--log-level L]`

Flags override the NMT_* environment (docs/API.md lists every setting); the admin token
is read from the environment only (NMT_ADMIN_TOKEN).

The listeners: the main port, and optionally a separate admin port (`NMT_ADMIN_PORT`,
like TorchServe's management API) that alone serves /admin. Without an admin port this is
`server.operations.lifecycle.serve` (uvicorn, draining on SIGTERM). With one, both are
uvicorn servers in one event loop over one application state: the admin listener starts
once the main app's lifespan has built that state. A SIGTERM reaches the admin listener
first (the last to install signal handlers), which stops and passes the signal on to the
main one, which drains as usual; the admin listener also stops when the main one does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI

from launch.startup import add_store_flags, given, start
from server.app import create_admin_app, create_app
from server.operations.lifecycle import AFTER_DRAIN_S, DrainingServer, Lifecycle, serve
from server.settings import Settings


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nmt-server",
                                     description="Serve the multi-domain translation API.")
    parser.add_argument("--host", help="address to listen on (NMT_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on (NMT_PORT)")
    add_store_flags(parser)
    parser.add_argument("--backbone", help="backbone name to serve (NMT_BACKBONE)")
    parser.add_argument("--device", help="torch device: cpu, cuda, cuda:1 (NMT_ENGINE__DEVICE)")
    parser.add_argument("--int8", action="store_true", default=None,
                        help="int8 dynamic quantization on CPU (NMT_ENGINE__INT8)")
    parser.add_argument("--admin-port", type=int,
                        help="serve /admin on this port only (NMT_ADMIN_PORT)")
    return parser.parse_args(argv)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Only the flags that were given: the environment supplies the rest."""
    values = given(args, ("host", "port", "store_dir", "registry_url", "backbone", "log_level",
                          "admin_port"))
    engine = given(args, ("device", "int8"))
    if engine:
        values["engine"] = engine
    return values


def run(settings: Settings) -> int:
    """Serve until SIGTERM/SIGINT."""
    app = create_app(settings)
    if settings.admin_port is None:
        serve(app, settings)  # drains on SIGTERM (server/operations/lifecycle.py)
        return 0
    with contextlib.suppress(KeyboardInterrupt):  # the signal uvicorn passes on at the end
        asyncio.run(serve_with_admin(app, settings, admin_port=settings.admin_port))
    return 0


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


def main(argv: Sequence[str] | None = None) -> int:
    return start(Settings, overrides(parse_args(argv)), run)


if __name__ == "__main__":
    raise SystemExit(main())
