"""A long translation answered without tripping the client's read timeout.

The `deepl` client gives up on a response after 10 s without a byte (and resends, up to 5
times), Weblate after 5 s; a large request's work takes longer than that on a CPU, while
its deadline grows with its size. JSON may begin with whitespace, so when the work has not
finished after `FIRST_BYTES_S` the answer starts: status 200 and its headers, then a space
every `HEARTBEAT_S` while the work runs, then the JSON. The errors that depend on what
was sent (a bad parameter, an unknown glossary, a text too long) are found while the
request is prepared, before it is queued, so in practice they come before the first
bytes and keep their own status; one that comes later (the deadline passed, the backbone
was unloaded) aborts the response, which the client reports as a failed request rather
than reading a wrong answer. A client that leaves stops the
heartbeats, and its share of the work is dropped (joined.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from fastapi.responses import JSONResponse, Response, StreamingResponse

log = logging.getLogger(__name__)
T = TypeVar("T")
FIRST_BYTES_S = 2.0  # under Weblate's 5 s and the deepl client's 10 s
HEARTBEAT_S = 2.0


class AnswerAborted(RuntimeError):
    """The work failed after the answer's status went out: the response is cut short."""


async def answer_when_done(work: asyncio.Future[T], render: Callable[[T], Any], *,
                           first_bytes_s: float = FIRST_BYTES_S,
                           heartbeat_s: float = HEARTBEAT_S) -> Response:
    """`render(result)` as JSON: at once when `work` finishes within `first_bytes_s`
    (its error raised as it is), else streamed behind heartbeats."""
    try:
        await asyncio.wait_for(asyncio.shield(work), timeout=first_bytes_s)
    except TimeoutError:
        return StreamingResponse(_beats(work, render, heartbeat_s),
                                 media_type="application/json")
    except asyncio.CancelledError:
        work.cancel()
        raise
    return JSONResponse(render(work.result()))


async def _beats(work: asyncio.Future[T], render: Callable[[T], Any],
                 heartbeat_s: float) -> AsyncIterator[bytes]:
    try:
        while not work.done():
            await asyncio.wait({work}, timeout=heartbeat_s)
            if not work.done():
                yield b" "
        try:
            result = work.result()
        except Exception as error:
            log.warning("a streamed DeepL answer failed after its status was sent: %s", error)
            raise AnswerAborted(str(error)) from error
        yield json.dumps(render(result), ensure_ascii=False).encode("utf-8")
    finally:
        if not work.done():
            work.cancel()  # the client left: its share of the work is dropped
