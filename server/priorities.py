"""CPU priorities of the serving threads against the engine's (issue #19).

On a loaded machine the threads that read requests and prepare text compete for the cores
with the engine thread and its OpenMP team. A flood of bad, huge or degenerate requests
then takes CPU time from the translations in progress: measured beside the adversarial
clients of benchmarks/speed/adversarial.py, a polite client's median went from 60 ms to
0.6-1 s, while the engine thread held the GIL less than a tenth of the time (it was short
of CPU, not of the GIL).

Linux gives every thread a nice value of its own, and a new thread inherits its creator's.
Two settings use that:
- `large_text_niceness` (10): the thread that prepares large requests, and the text worker
  process it starts, run that many nice levels below the engine, so work that grows with
  what a client sends is paid for by the sender;
- `front_niceness` (0): the event loop, and every thread it starts after the engine
  thread, run that many levels below. Niced, a front thread preempted while it holds the
  GIL stalls the engine until it runs again: at saturation (64 clients, identical
  batches) the engine took 4% more time per sentence with the front at 10 (5 of 6
  alternated server pairs), while the adversarial mix kept its polite clients within 3x
  of quiet at 0 (2.64x, against 2.28x at 10).
The engine thread and the OpenMP team it starts keep the process's priority. Raising a
nice value needs no privilege; lowering it again does, so a change lasts as long as the
thread.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger(__name__)
MAX_NICE = 19  # the lowest priority Linux has


def own_niceness() -> int:
    """The nice value of the calling thread (Linux; the process's elsewhere)."""
    return os.getpriority(os.PRIO_PROCESS, _own_id())


def lower_own_priority(increment: int) -> int:
    """Raise the calling thread's nice value by `increment` (capped at 19); the new value.
    Elsewhere than on Linux nice values belong to processes, and lowering the process
    would lower the engine too: nothing changes there."""
    current = own_niceness()
    if increment <= 0 or not sys.platform.startswith("linux"):
        return current
    wanted = min(MAX_NICE, current + increment)
    try:
        os.setpriority(os.PRIO_PROCESS, _own_id(), wanted)
    except OSError as error:  # a seccomp profile may forbid it: serve at one priority
        log.warning("could not lower the serving threads' CPU priority: %s", error)
        return current
    return wanted


def lower_process_to(niceness: int) -> None:
    """Raise the whole process's nice value to at least `niceness` (a worker process's
    initializer: it runs at the priority of the thread that hands it work)."""
    if os.getpriority(os.PRIO_PROCESS, 0) < niceness:
        os.setpriority(os.PRIO_PROCESS, 0, min(MAX_NICE, niceness))


def _own_id() -> int:
    # on Linux PRIO_PROCESS with a thread id addresses that thread alone
    return threading.get_native_id() if sys.platform.startswith("linux") else 0
