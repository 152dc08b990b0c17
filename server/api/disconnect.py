"""Awaiting a request's work only while its client is connected: a client that leaves
cancels the work (its queued sentences are dropped before compute) and the request ends
as `ClientGone`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request

from server.api.errors import ClientGone

T = TypeVar("T")


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it when the client disconnects first (its queued sentences
    are then dropped before compute). `work` runs in the calling task; a watcher task
    cancels that task when the disconnect comes (a done-callback: no extra task for the
    work, no `asyncio.wait`, which at saturation were a few percent of the event loop)."""
    current = asyncio.current_task()
    assert current is not None, "until_disconnected runs inside a task"
    watcher = asyncio.ensure_future(_disconnect(request))
    gone = finished = False

    def on_disconnect(done: asyncio.Future[None]) -> None:
        nonlocal gone
        # `finished`: the callback may have been scheduled before the work returned
        if not finished and not done.cancelled() and done.exception() is None:
            gone = True
            current.cancel()

    watcher.add_done_callback(on_disconnect)
    try:
        return await work
    except asyncio.CancelledError:
        if gone and current.uncancel() == 0:  # our cancel alone: the client left
            raise ClientGone("the client disconnected") from None
        raise
    finally:
        finished = True
        watcher.cancel()


async def _disconnect(request: Request) -> None:
    """Returns when the ASGI server reports `http.disconnect` (the body was read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
