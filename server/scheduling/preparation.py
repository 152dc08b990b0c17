"""The stage before the queue: routing, sentence splitting and tokenizing, bounded.

Its work is linear in the characters it is given, so characters are its budget: at most
`max_chars` characters (all requests together) are being prepared at once, beyond which a
request gets 429 with `Retry-After` at once, as when the engine queue is full. The work
runs on threads of its own (never the event loop, never the engine thread) and is awaited
under the request's deadline; a request past its deadline stops between texts.

Small requests (at most `SMALL_CHARS` characters, a few sentences) have a thread of their
own, so they never queue behind the preparation of large ones: measured beside clients
that send 100,000-character requests in a loop, a one-sentence request otherwise waited
for the preparation of several of them (benchmarks/results/adversarial.md).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from server.errors import Busy, DeadlineExceeded

T = TypeVar("T")
SMALL_CHARS = 2_000  # about a millisecond of preparation


class PreparationGate:
    def __init__(self, *, max_chars: int, retry_after_s: int, threads: int = 1) -> None:
        self.max_chars = max_chars
        self.retry_after_s = retry_after_s
        self._executor = ThreadPoolExecutor(max_workers=threads,
                                            thread_name_prefix="nmt-prepare")
        self._small = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nmt-prepare-small")
        self._lock = threading.Lock()
        self._chars = 0  # characters admitted and not yet prepared

    @property
    def chars(self) -> int:
        return self._chars

    async def run(self, chars: int, deadline: float, function: Callable[..., T],
                  *args: object) -> T:
        """`function(*args)` on a preparation thread, if `chars` more characters fit."""
        with self._lock:
            if self._chars and self._chars + chars > self.max_chars:
                raise Busy(f"the server is preparing {self._chars} characters of other "
                           f"requests (limit {self.max_chars}); retry later",
                           retry_after=self.retry_after_s)
            self._chars += chars
        executor = self._small if chars <= SMALL_CHARS else self._executor
        future = executor.submit(functools.partial(function, *args))
        # Released when the work really ends (a thread cannot be interrupted).
        future.add_done_callback(functools.partial(self._release, chars))
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future),
                                          max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise DeadlineExceeded("the request's deadline passed while its texts were "
                                   "routed, split and tokenized") from None

    def _release(self, chars: int, _future: Future[object]) -> None:
        with self._lock:
            self._chars -= chars

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._small.shutdown(wait=False, cancel_futures=True)


def check_deadline(deadline: float) -> None:
    """Called between texts by preparation work: stop once nobody waits for it."""
    if time.monotonic() >= deadline:
        raise DeadlineExceeded("the request's deadline passed while its texts were routed, "
                               "split and tokenized")
