"""The stage before the queue: routing, sentence splitting and tokenizing, bounded.

Its work is linear in the characters it is given, so characters are its budget: at most
`max_chars` characters (all requests together) are being prepared at once, beyond which a
request gets 429 with `Retry-After` at once, as when the engine queue is full.

Small requests (at most `SMALL_CHARS` characters, a few sentences, about a millisecond)
are prepared at once on the event loop, so they never queue behind the preparation of
large ones (measured beside clients that send 100,000-character requests in a loop, a
one-sentence request queued behind one thread otherwise waited for several of them:
benchmarks/results/adversarial.md). Threads of their own cost more than their work: at
saturation (64 clients, levels of 1,200 requests) the serving threads spent 1.14-1.29 ms
of CPU per request with a small request's text work done inline (here and in
`Translator`) against 1.64-1.65 ms with its three hand-offs to threads, and each hand-off
wakes a thread that may preempt the event loop while it holds the GIL, which the engine
thread then waits for.

Larger requests are prepared on threads of their own (never the event loop, never the
engine thread), awaited under the request's deadline; a request past its deadline stops
between texts.

Large requests hand their Python-heavy text work (splitting and masking, `apart`) to a
worker process, which has a GIL of its own and the serving threads' lower CPU priority
(server/execution/priorities.py). In the server's process that work held the GIL half of the time
beside a flood of large texts; at a low priority it held it while it waited for a core,
and the engine thread waited with it. The worker starts in the background when the
server starts (`start_worker`): started at the first large request instead, it made that
request wait 1.6-1.7 s here, against 36 ms for the next one. If it dies, the next call
starts another, and the call that saw it die works in its thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from server.execution.priorities import lower_process_to, own_niceness
from server.serving.errors import Busy, DeadlineExceeded

T = TypeVar("T")
SMALL_CHARS = 2_000  # about a millisecond of preparation
log = logging.getLogger(__name__)


class PreparationGate:
    def __init__(self, *, max_chars: int, retry_after_s: int, threads: int = 1) -> None:
        self.max_chars = max_chars
        self.retry_after_s = retry_after_s
        self._executor = ThreadPoolExecutor(max_workers=threads,
                                            thread_name_prefix="nmt-prepare")
        self._lock = threading.Lock()
        self._chars = 0  # characters admitted and not yet prepared
        self._worker: ProcessPoolExecutor | None = None  # started by `start_worker`/`apart`
        self._closed = False

    @property
    def chars(self) -> int:
        return self._chars

    async def run(self, chars: int, deadline: float, function: Callable[..., T],
                  *args: object) -> T:
        """`function(*args)`, if `chars` more characters fit: here for a small request, on
        a preparation thread for a large one."""
        with self._lock:
            if self._chars and self._chars + chars > self.max_chars:
                raise Busy(f"the server is preparing {self._chars} characters of other "
                           f"requests (limit {self.max_chars}); retry later",
                           retry_after=self.retry_after_s)
            self._chars += chars
        if not self.is_large(chars):
            try:
                return function(*args)
            finally:
                self._release(chars)
        future = self._executor.submit(functools.partial(function, *args))
        # Released when the work really ends (a thread cannot be interrupted).
        future.add_done_callback(functools.partial(self._release, chars))
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future),
                                          max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise DeadlineExceeded("the request's deadline passed while its texts were "
                                   "routed, split and tokenized") from None

    @staticmethod
    def is_large(chars: int) -> bool:
        """Whether a request of `chars` characters is prepared on a preparation thread,
        its text work in the worker process (`apart`), rather than on the event loop."""
        return chars > SMALL_CHARS

    def start_worker(self) -> None:
        """Start the worker process now, in the background, from the large requests'
        thread (so at the priority `apart` gives it); nothing once the gate is closed."""
        with self._lock:
            if not self._closed:
                self._executor.submit(self._warm_worker)

    def _warm_worker(self) -> None:
        worker = self._worker_process()
        if worker is None:  # closed meanwhile
            return
        try:
            worker.submit(int).result()
        except Exception as error:  # the worker died, or the gate closed meanwhile
            if not self._closed:
                log.warning("the text preparation worker did not start (%r); the first "
                            "large request starts another", error)
                self._drop(worker)

    def apart(self, deadline: float, function: Callable[..., T], *args: object) -> T:
        """`function(*args)` in the worker process, waited for until `deadline`; called
        from a preparation thread. `function` and `args` must pickle, and `function` must
        import without torch (the worker is a fresh interpreter)."""
        worker = self._worker_process()
        if worker is None:  # the server is stopping
            return function(*args)
        future = worker.submit(function, *args)
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            future.cancel()
            raise DeadlineExceeded("the request's deadline passed while its texts were "
                                   "split") from None
        except BrokenProcessPool:
            log.warning("the text preparation worker died; starting another, this "
                        "request's texts are prepared in the server process")
            self._drop(worker)
            return function(*args)

    def _worker_process(self) -> ProcessPoolExecutor | None:
        """The worker, started if need be; None once the gate is closed."""
        with self._lock:
            if self._closed:
                return None
            if self._worker is None:
                # spawn, not fork: the server process has threads (fork copies their locks)
                self._worker = ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                    initializer=lower_process_to, initargs=(own_niceness(),))
            return self._worker

    def _drop(self, worker: ProcessPoolExecutor) -> None:
        """Forget a broken worker (the next call starts another)."""
        with self._lock:
            if self._worker is worker:
                self._worker = None
        worker.shutdown(wait=False, cancel_futures=True)

    def _release(self, chars: int, _future: Future[object] | None = None) -> None:
        with self._lock:
            self._chars -= chars

    def close(self) -> None:
        with self._lock:  # first: `start_worker` then submits nothing more
            worker, self._worker, self._closed = self._worker, None, True
        self._executor.shutdown(wait=False, cancel_futures=True)
        if worker is not None:
            worker.shutdown(wait=False, cancel_futures=True)


def check_deadline(deadline: float) -> None:
    """Called between texts by preparation work: stop once nobody waits for it."""
    if time.monotonic() >= deadline:
        raise DeadlineExceeded("the request's deadline passed while its texts were routed, "
                               "split and tokenized")
