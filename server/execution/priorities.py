"""CPU priority of the serving threads below the engine's (issue #19).

On a loaded machine the threads that read requests and prepare text compete for the cores
with the engine thread and its OpenMP team. A flood of bad, huge or degenerate requests
then takes CPU time from the translations in progress: measured beside the adversarial
clients of benchmarks/speed/adversarial/adversarial.py, a polite client's median went from 60 ms to
0.6-1 s, while the engine thread held the GIL less than a tenth of the time (it was short
of CPU, not of the GIL).

Linux gives every thread a nice value of its own, and a new thread inherits its creator's.
Raising the nice value of the event loop's thread once the engine thread exists lowers the
HTTP front, and every thread it starts afterwards (the preparation threads, the workers of
`asyncio.to_thread` and of sync routes), while the engine thread and the OpenMP team it
starts keep the process's priority. Refused work is then paid for by the flood, not by the
translations. Raising a nice value needs no privilege; lowering it again does, so the
change lasts as long as the thread.

The price: a niced front thread preempted while it holds the GIL stalls the engine until
it runs again. At saturation (64 clients, no flood) the engine spent about 4% less time
per sentence with the front at the engine's priority (`front_niceness` 0; 5 of 6
alternated server pairs), but beside the adversarial mix the polite client's median was
then 4.68x quiet, against 2.03x at 10 on the same code (issue #19's bound is 3x): a flood
at full priority gets the CPU time it asks for. The default stays 10.
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
