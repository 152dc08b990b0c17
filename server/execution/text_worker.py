"""The text worker process: a Python interpreter of its own for large requests' text work.

Splitting and masking a large request's texts is Python-heavy; in the server's process it
held the GIL half of the time beside a flood of large texts, and at the front's low
priority it held it while it waited for a core, with the engine thread waiting too. In a
process of its own it has a GIL of its own. What work it does is the preparation stage's
(server/scheduling/preparation.py: `PreparationGate.apart`); this module owns only the
process: where and at which priority it runs, its start, its replacement and its end.

- It is spawned, not forked: the server process has threads, and fork copies their locks.
- It runs on the CPUs of the thread that starts it, and its initializer lowers it to that
  thread's nice value: the layout starts it from the front (after the front is lowered and
  pinned), and a replacement is started by a preparation thread, also the front's.
- `start` starts it in the background at server start: started at the first large request
  instead, it made that request wait 1.6-1.7 s here, against 36 ms for the next one.
- If it dies, the next call starts another, and the call that saw it die runs its work in
  the calling thread; once closed, every call runs there.
- It ends with the server process however that ends: a server killed outright (SIGKILL, the
  OOM killer) runs no shutdown, and the worker, which holds its own ends of the pool's
  pipes, would wait for work forever. A thread of the worker waits on the pipe the spawn
  left open to its parent (`multiprocessing.parent_process().sentinel`, ready once the
  parent is gone) and then exits. Not PR_SET_PDEATHSIG: it fires when the *thread* that
  started the child ends, and the worker is started by short-lived threads.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from server.execution.priorities import lower_process_to, own_niceness

T = TypeVar("T")
log = logging.getLogger(__name__)


class TextWorker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: ProcessPoolExecutor | None = None  # started by `start` or `run`
        self._closed = False

    def start(self) -> None:
        """Start the process now, from a short-lived thread of the caller's (so on its CPUs
        and at its priority); returns at once. Nothing once closed."""
        with self._lock:
            if self._closed:
                return
        threading.Thread(target=self._warm, name="nmt-text-worker-start", daemon=True).start()

    def _warm(self) -> None:
        process = self._running()
        if process is None:  # closed meanwhile
            return
        try:
            process.submit(int).result()
        except Exception as error:  # the process died, or the worker closed meanwhile
            if not self._closed:
                log.warning("the text worker process did not start (%r); the first large "
                            "request starts another", error)
                self._drop(process)

    def run(self, deadline: float, function: Callable[..., T], *args: object) -> T:
        """`function(*args)` in the process, waited for until `deadline` (monotonic); past
        it, TimeoutError. `function` and `args` must pickle, and `function` must import
        without torch (the process is a fresh interpreter)."""
        process = self._running()
        if process is None:  # the server is stopping
            return function(*args)
        future = process.submit(function, *args)
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            future.cancel()
            raise
        except BrokenProcessPool:
            log.warning("the text worker process died; starting another, this request's "
                        "texts are prepared in the server process")
            self._drop(process)
            return function(*args)

    def _running(self) -> ProcessPoolExecutor | None:
        """The process, started if need be (from the calling thread); None once closed."""
        with self._lock:
            if self._closed:
                return None
            if self._process is None:
                self._process = ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                    initializer=start_worker, initargs=(own_niceness(),))
            return self._process

    def _drop(self, process: ProcessPoolExecutor) -> None:
        """Forget a broken process (the next call starts another)."""
        with self._lock:
            if self._process is process:
                self._process = None
        process.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:  # first: `start` and `run` then start nothing more
            process, self._process, self._closed = self._process, None, True
        if process is not None:
            process.shutdown(wait=False, cancel_futures=True)


def start_worker(niceness: int) -> None:
    """The worker process's initializer: the priority of the thread that hands it work, and
    a watch that ends the process with its parent."""
    lower_process_to(niceness)
    threading.Thread(target=exit_with_parent, name="nmt-parent-watch", daemon=True).start()


def exit_with_parent() -> None:
    """In a spawned process: block until the parent process is gone, then exit at once
    (nothing of the worker's is worth finishing for a server that is gone)."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not a spawned child: nothing to watch
        return
    parent.join()  # its sentinel: the spawn pipe, at its end once the parent has exited
    os._exit(0)
