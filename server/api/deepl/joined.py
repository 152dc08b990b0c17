"""Identical requests joined while one is running: a client that retries a request it
gave up on (the `deepl` client resends after its 10 s read timeout, and on 429 and 5xx)
waits for the work already under way instead of starting it again.

The work runs in a task of its own that every identical request awaits; it is cancelled
when the last of them has left and none came back within `grace_s` (the `deepl` client
closes its connection on its timeout and resends at once, so its retry finds the work
still running; a client that leaves for good stops it). Requests are identical when
their key and their parameters are: one key's requests never join another's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
GRACE_S = 2.0  # how long abandoned work waits for a retry to join it


@dataclass
class _Shared(Generic[T]):
    task: asyncio.Future[T]
    waiters: int = 0


class InFlight:
    """Work by request fingerprint, while it runs (one per app: `joiner`)."""

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self._running: dict[str, _Shared[Any]] = {}
        self.grace_s = grace_s

    def __len__(self) -> int:
        return len(self._running)

    async def join(self, fingerprint: str, start: Callable[[], Awaitable[T]]) -> T:
        """The result of the work running under `fingerprint`, started when none is."""
        shared = self._running.get(fingerprint)
        if shared is None:
            shared = _Shared(asyncio.ensure_future(start()))
            self._running[fingerprint] = shared
            shared.task.add_done_callback(lambda task: self._finished(fingerprint, task))
        shared.waiters += 1
        try:
            return await asyncio.shield(shared.task)
        finally:
            shared.waiters -= 1
            if shared.waiters == 0 and not shared.task.done():
                asyncio.get_running_loop().call_later(self.grace_s, self._abandon, shared)

    @staticmethod
    def _abandon(shared: _Shared[Any]) -> None:
        if shared.waiters == 0 and not shared.task.done():
            shared.task.cancel()  # nobody came back: stop the work

    def _finished(self, fingerprint: str, task: asyncio.Future[Any]) -> None:
        if self._running.get(fingerprint, None) is not None and \
                self._running[fingerprint].task is task:
            del self._running[fingerprint]
        if not task.cancelled():
            task.exception()  # retrieved: the waiters raise it, or nobody was left


def fingerprint(key: str | None, path: str, values: dict[str, Any]) -> str:
    """The request's identity: the caller's key, the route and every parameter."""
    text = json.dumps([key, path, values], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def joiner(state: Any) -> InFlight:
    """The app's joiner (`app.state`), made on first use."""
    found = getattr(state, "deepl_in_flight", None)
    if found is None:
        found = InFlight()
        state.deepl_in_flight = found
    return found
