"""Which CPUs the engine and the HTTP front run on (Linux; opt-in: `front_cpus`).

By default the engine's OpenMP team and the serving threads share every core. Every slice
of CPU the front takes (parsing requests, preparing text, answering) then preempts one
thread of the team, and the others wait for it at the op's barrier: measured at
saturation on a 2-core host, each millisecond of front CPU per request cost the engine
~1.6 ms, whether the front held the GIL meanwhile or not (README, "Serving"; issue
#23). With `front_cpus = N` the last N CPUs the process may use are the front's and
the others the engine's, with one OpenMP thread per engine CPU: the engine then runs
undisturbed, on one core less. Where cores are few (2) that is less throughput; on a
larger host the front's core is a small share of the engine's.

Linux gives every thread a CPU mask of its own, and a new thread inherits its creator's:
the engine thread is pinned before it starts its OpenMP team (which then inherits the
engine's CPUs), the event loop's thread before it starts any other thread or the text
worker process (which inherit the front's).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    engine: frozenset[int]
    front: frozenset[int]

    def describe(self) -> str:
        threads = len(self.engine)
        return (f"engine on CPUs {sorted(self.engine)} with {threads} OpenMP "
                f"thread{'s' if threads > 1 else ''}, HTTP front on CPUs {sorted(self.front)}")


def plan_placement(front_cpus: int) -> Placement | None:
    """The last `front_cpus` CPUs of the process's mask for the front, the rest for the
    engine; None (logged) when `front_cpus` is 0, the platform has no CPU masks, or the
    split would leave the engine no CPU."""
    if front_cpus <= 0:
        return None
    if not hasattr(os, "sched_setaffinity"):
        log.warning("front_cpus=%d ignored: this platform has no CPU masks", front_cpus)
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if front_cpus >= len(allowed):
        log.warning("front_cpus=%d ignored: this process may use %d CPUs (%s), which would "
                    "leave the engine none; the engine and the front share them",
                    front_cpus, len(allowed), allowed)
        return None
    placement = Placement(frozenset(allowed[:-front_cpus]), frozenset(allowed[-front_cpus:]))
    log.info("CPU placement: %s", placement.describe())
    return placement


def pin_this_thread(cpus: frozenset[int]) -> None:
    """Keep the calling thread, and every thread or process it starts later, on `cpus`
    (on Linux, pid 0 addresses the calling thread alone)."""
    os.sched_setaffinity(0, cpus)


def place_engine_thread(cpus: frozenset[int] | None) -> None:
    """Run on the engine thread before its first torch op: keep it on `cpus`, with one
    OpenMP thread per CPU unless OMP_NUM_THREADS says otherwise (None: leave both)."""
    if cpus is None:
        return
    pin_this_thread(cpus)
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(len(cpus))


def this_threads_cpus() -> frozenset[int]:
    return frozenset(os.sched_getaffinity(0))
