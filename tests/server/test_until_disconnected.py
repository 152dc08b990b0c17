"""`until_disconnected`: the work runs in the caller's task and is cancelled when the
client leaves first; a disconnect that comes as the work ends cancels nothing after it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request

from server.api.disconnect import until_disconnected
from server.api.errors import ClientGone

SCOPE: dict[str, Any] = {"type": "http", "method": "POST", "path": "/translate",
                         "headers": []}


def request_with(disconnect: asyncio.Future[None]) -> Request:
    """A request whose client leaves when `disconnect` is set (the body was read)."""
    async def receive() -> dict[str, Any]:
        await disconnect
        return {"type": "http.disconnect"}
    return Request(SCOPE, receive)


async def waiting_for(result: asyncio.Future[int]) -> int:
    return await result


def test_the_work_result_comes_back_while_the_client_stays() -> None:
    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        result: asyncio.Future[int] = loop.create_future()
        loop.call_soon(result.set_result, 7)
        return await until_disconnected(request_with(loop.create_future()),
                                        waiting_for(result))
    assert asyncio.run(scenario()) == 7


def test_a_client_that_leaves_first_cancels_the_work() -> None:
    cancelled: list[bool] = []

    async def work(result: asyncio.Future[int]) -> int:
        try:
            return await result
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        gone: asyncio.Future[None] = loop.create_future()
        loop.call_soon(gone.set_result, None)
        await until_disconnected(request_with(gone), work(loop.create_future()))

    with pytest.raises(ClientGone):
        asyncio.run(scenario())
    assert cancelled == [True]


def test_a_disconnect_as_the_work_ends_does_not_cancel_what_follows() -> None:
    async def scenario() -> tuple[int, str]:
        loop = asyncio.get_running_loop()
        gone: asyncio.Future[None] = loop.create_future()
        result: asyncio.Future[int] = loop.create_future()

        def both() -> None:  # the watcher wakes first, then the work
            gone.set_result(None)
            result.set_result(3)

        loop.call_soon(both)
        value = await until_disconnected(request_with(gone), waiting_for(result))
        for _ in range(5):  # the disconnect callback, if still due, would cancel here
            await asyncio.sleep(0)
        return value, "answered"

    assert asyncio.run(scenario()) == (3, "answered")


def test_a_cancel_from_elsewhere_stays_a_cancel() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.call_soon(task.cancel)  # a shutdown, say: not the client leaving
        await until_disconnected(request_with(loop.create_future()),
                                 waiting_for(loop.create_future()))

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(scenario())
