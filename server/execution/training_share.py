"""While the training sidecar trains, the engine yields it CPUs (`training_cpus`, Linux).

Measured on a 2-core host beside 16 clients (benchmarks/results/hot_add_load-static.md): the
sidecar, 10 nice levels below a saturated engine, got ~25% of one CPU, and its two torch
threads waited for each other at every op's barrier while one of them was preempted, so
the work after training (gate, router, quality refit: ~20 s quiet) took ~650 s and the
domain was published 5.6x later than on a quiet server. Lowering the sidecar further, or
raising it, cannot fix that unprivileged; the server can give way instead: while a job of
its store is running (its heartbeat fresh), the engine thread and its OpenMP team keep
off the last `training_cpus` CPUs of their mask, with that many OpenMP threads fewer.
The sidecar, with as many torch threads (`NMT_TRAINER__THREADS`), then has those CPUs to
itself and the front. When no job runs, the engine gets its CPUs and threads back.

Linux gives every thread a CPU mask of its own: the engine thread pins itself (its team
is then one thread smaller, so no team thread runs on the yielded CPUs), and the team's
threads, which keep the engine's priority while the front is lowered
(server/execution/priorities.py), are pinned too, since libgomp reuses them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import torch

from model_store import Registry
from server.execution.engine_thread import EngineThread

log = logging.getLogger(__name__)
TASKS = Path("/proc/self/task")
# a running job whose heartbeat is older belongs to a dead worker: the engine does not
# yield for it. The sidecar beats every 5 s, but on a loaded 2-core host its heartbeat
# thread went ~6 minutes without a beat during the router's retraining (a long call that
# keeps the GIL, at a low priority): a window of 60 s gave the CPU back mid-job
FRESH_HEARTBEAT = timedelta(minutes=15)


def yielded_mask(cpus: frozenset[int], count: int) -> frozenset[int] | None:
    """The engine's CPUs while a job trains: all but the last `count`; None when `count`
    is 0 or that would leave the engine none."""
    if count <= 0 or count >= len(cpus):
        return None
    return frozenset(sorted(cpus)[:-count])


def training_now(registry: Registry) -> bool:
    """A training job of this store is running or being evaluated, by a live worker."""
    now = datetime.now(UTC)
    jobs = registry.list_jobs("running") + registry.list_jobs("evaluating")
    return any(job.heartbeat_at is not None and now - job.heartbeat_at <= FRESH_HEARTBEAT
               for job in jobs)


@dataclass
class Yielded:
    """What the engine had before it yielded: its threads' masks and its team's size."""

    masks: dict[int, frozenset[int]]
    threads: int


class TrainingShare:
    """Moves the engine off `count` CPUs while training runs, and back after."""

    def __init__(self, engine_thread: EngineThread, count: int) -> None:
        self.engine_thread = engine_thread
        self.count = count if sys.platform.startswith("linux") else 0
        self.yielded: Yielded | None = None

    @property
    def yielding(self) -> bool:
        return self.yielded is not None

    async def update(self, training: bool) -> None:
        if self.count <= 0 or training == self.yielding:
            return
        if training:
            self.yielded = await self.engine_thread.run(self._give_way)
        else:
            yielded, self.yielded = self.yielded, None
            if yielded is not None:
                await self.engine_thread.run(_take_back, yielded)

    def _give_way(self) -> Yielded | None:
        """On the engine thread: pin it and its team's threads to fewer CPUs, with fewer
        OpenMP threads. None (nothing changed) when its CPUs are too few to share."""
        engine = threading.get_native_id()
        mine = frozenset(os.sched_getaffinity(0))
        fewer = yielded_mask(mine, self.count)
        if fewer is None:
            log.info("a job trains, but the engine's CPUs %s are too few to yield %d",
                     sorted(mine), self.count)
            return None
        masks = {engine: mine}
        niceness = os.getpriority(os.PRIO_PROCESS, engine)
        for tid in _team(engine, niceness, mine):
            try:
                masks[tid] = frozenset(os.sched_getaffinity(tid))
                os.sched_setaffinity(tid, fewer)
            except OSError:  # a thread that ended meanwhile
                masks.pop(tid, None)
        os.sched_setaffinity(0, fewer)
        threads = torch.get_num_threads()
        torch.set_num_threads(max(1, threads - self.count))
        log.warning("a training job runs: the engine yields CPUs %s (engine on %s, %d -> %d "
                    "OpenMP threads) until it ends", sorted(mine - fewer), sorted(fewer),
                    threads, torch.get_num_threads())
        return Yielded(masks, threads)


def _take_back(yielded: Yielded) -> None:
    """On the engine thread: the masks and team size it had before it yielded."""
    for tid, mask in yielded.masks.items():
        try:
            os.sched_setaffinity(tid, mask)
        except OSError:  # a team thread that ended meanwhile
            continue
    torch.set_num_threads(yielded.threads)
    log.warning("no training job runs: the engine is back on CPUs %s with %d OpenMP threads",
                sorted(yielded.masks[threading.get_native_id()]), yielded.threads)


def _team(engine: int, niceness: int, mask: frozenset[int]) -> list[int]:
    """The other threads that share the engine's priority and CPUs: its OpenMP team (the
    front's threads run lower; threads started before the front was lowered, idle ones,
    are pinned with it, which costs nothing)."""
    team = []
    for task in TASKS.iterdir() if TASKS.is_dir() else []:
        tid = int(task.name)
        try:
            if (tid != engine and os.getpriority(os.PRIO_PROCESS, tid) == niceness
                    and frozenset(os.sched_getaffinity(tid)) == mask):
                team.append(tid)
        except OSError:
            continue
    return team


async def keep_training_share(share: TrainingShare, registry: Registry,
                              interval: float) -> None:
    """Every `interval`: yield while a job trains, take back once none does. Runs until
    cancelled; a failing registry read is logged and retried next tick."""
    while True:
        try:
            await share.update(await asyncio.to_thread(training_now, registry))
        except Exception:  # the share outlives a busy database
            log.exception("checking for training jobs failed")
        await asyncio.sleep(interval)
