"""The stage before the queue: routing, sentence splitting and tokenizing, bounded.

Its work is linear in the characters it is given, so characters are its budget: at most
`max_chars` characters (all large requests together) are being prepared at once; a large
request beyond it waits its turn (under its deadline), it is never refused.

Small requests (at most `SMALL_CHARS` characters, a few sentences, about a millisecond)
are prepared at once on the event loop, so they never queue behind the preparation of
large ones (measured beside clients that send 100,000-character requests in a loop, a
one-sentence request queued behind one thread otherwise waited for several of them:
benchmarks/results/adversarial-static.md). Threads of their own cost more than their work: at
saturation (64 clients, levels of 1,200 requests) the serving threads spent 1.14-1.29 ms
of CPU per request with a small request's text work done inline (here and in
`Translator`) against 1.64-1.65 ms with its three hand-offs to threads, and each hand-off
wakes a thread that may preempt the event loop while it holds the GIL, which the engine
thread then waits for.

Larger requests are prepared on threads of their own (never the event loop, never the
engine thread), awaited under the request's deadline; a request past its deadline stops
between texts.

Large requests hand their Python-heavy text work (splitting and masking, `apart`) to the
text worker process (server/execution/text_worker.py), which has a GIL of its own and the
serving threads' lower CPU priority; the execution layout starts and stops it. Without
one (tools, tests of the gate alone) that work runs in the preparation thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from server.core.errors import DeadlineExceeded
from server.execution.text_worker import TextWorker

T = TypeVar("T")
SMALL_CHARS = 2_000  # about a millisecond of preparation
WAIT_S = 0.02  # how often a request waiting for the budget looks again


class PreparationGate:
    def __init__(self, *, max_chars: int, retry_after_s: int, threads: int = 1,
                 worker: TextWorker | None = None) -> None:
        self.max_chars = max_chars
        self.retry_after_s = retry_after_s
        self._executor = ThreadPoolExecutor(max_workers=threads,
                                            thread_name_prefix="nmt-prepare")
        self._lock = threading.Lock()
        self._chars = 0  # characters admitted and not yet prepared
        self.worker = worker  # the text worker process's owner (server/execution/)

    @property
    def chars(self) -> int:
        return self._chars

    async def run(self, chars: int, deadline: float, function: Callable[..., T],
                  *args: object) -> T:
        """`function(*args)`, if `chars` more characters fit: here for a small request, on
        a preparation thread for a large one."""
        if not self.is_large(chars):  # a millisecond on the loop: never waits
            with self._lock:
                self._chars += chars
            try:
                return function(*args)
            finally:
                self._release(chars)
        await self._enter(chars, deadline)
        # in the request's context: its tenant scope (server/core/tenancy.py) goes along
        future = self._executor.submit(contextvars.copy_context().run,
                                       functools.partial(function, *args))
        # Released when the work really ends (a thread cannot be interrupted).
        future.add_done_callback(functools.partial(self._release, chars))
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future),
                                          max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise DeadlineExceeded("the request's deadline passed while its texts were "
                                   "routed, split and tokenized") from None

    async def _enter(self, chars: int, deadline: float) -> None:
        """Wait until `chars` more characters fit the budget (a request larger than the
        budget enters alone), or 504 once the request's deadline passes."""
        while True:
            with self._lock:
                if not self._chars or self._chars + chars <= self.max_chars:
                    self._chars += chars
                    return
            if time.monotonic() >= deadline:
                raise DeadlineExceeded("the request's deadline passed while it waited for "
                                       "the preparation stage (routing, splitting, "
                                       "tokenizing other requests' texts)")
            await asyncio.sleep(WAIT_S)

    @staticmethod
    def is_large(chars: int) -> bool:
        """Whether a request of `chars` characters is prepared on a preparation thread,
        its text work in the worker process (`apart`), rather than on the event loop."""
        return chars > SMALL_CHARS

    def apart(self, deadline: float, function: Callable[..., T], *args: object) -> T:
        """`function(*args)` in the text worker process, waited for until `deadline`;
        called from a preparation thread. `function` and `args` must pickle, and
        `function` must import without torch (the worker is a fresh interpreter)."""
        if self.worker is None:
            return function(*args)
        try:
            return self.worker.run(deadline, function, *args)
        except TimeoutError:
            raise DeadlineExceeded("the request's deadline passed while its texts were "
                                   "split") from None

    def _release(self, chars: int, _future: Future[object] | None = None) -> None:
        with self._lock:
            self._chars -= chars

    def close(self) -> None:
        """Stop the preparation threads (the text worker is the execution layout's)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def check_deadline(deadline: float) -> None:
    """Called between texts by preparation work: stop once nobody waits for it."""
    if time.monotonic() >= deadline:
        raise DeadlineExceeded("the request's deadline passed while its texts were routed, "
                               "split and tokenized")
