"""The sidecar's place on a shared host: below the server it shares the CPUs with.

A module that trains at the server's own priority takes half of a small host's cores from
the translations in progress; measured on 2 cores, 22 of 2,490 requests under load timed
out (504 after 30 s) while a refresh trained beside the server, 0 of 6,564 with the
training 10 nice levels below it (benchmarks/results/history/NOTES.md, corrections).

Linux gives every thread a nice value of its own and a new thread inherits its creator's,
so every thread that exists now is lowered, and the threads started later (torch's
intra-op pool, data loading) inherit the value. Elsewhere nice values belong to the
process, and lowering the calling one is enough.
"""

from __future__ import annotations

import os
from pathlib import Path

TASKS = Path("/proc/self/task")


def lower_priority(levels: int) -> None:
    """Raise the nice value of every thread of this process by `levels` (capped at 19 by
    the kernel); 0 leaves them as they are. Lowering a priority needs no privilege."""
    if levels <= 0:
        return
    ids = [int(task.name) for task in TASKS.iterdir()] if TASKS.is_dir() else [0]
    for tid in ids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + levels)
        except OSError:  # a thread that ended meanwhile
            continue
