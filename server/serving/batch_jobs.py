"""Batch jobs: a /translate/batch request that should not hold a connection open runs in
the background, item by item, and is followed at `GET /translate/batch/jobs/{id}`.

The same ordered runner serves a client that prefers to wait for its results as they
come (NDJSON): `in_order` translates a few items at a time (each item its own request
to the scheduler, so a job's items queue behind their share like any request's) and
yields every result in the items' order as soon as it and those before it are done.

Jobs live in this process's memory, unlike document jobs (server/documents/jobs.py),
whose payload is a file on disk that survives a restart: a batch's texts and results
are small JSON, and a client whose job was lost with a restart sends the batch again.
A finished job is forgotten `ttl_s` after it finished. A client may have `per_client`
unfinished jobs at once (each holds its texts in memory and keeps items in the scheduler):
one more is refused with 429 until one of them finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from server.core.errors import NotFound, ServingError, TooManyJobs
from server.core.job_pace import soonest_done_s
from server.core.tenancy import current_scope
from server.scheduling.clients import CLIENT

log = logging.getLogger(__name__)
R = TypeVar("R")
AHEAD = 4  # items of one batch in the scheduler at once: a share, never the whole batch
JobState = Literal["queued", "running", "done", "failed"]
ItemWork = Callable[[], Awaitable[R]]


async def in_order(work: Sequence[ItemWork[R]], ahead: int = AHEAD) -> AsyncIterator[R]:
    """Every item's result in order, running at most `ahead` items at once; the first
    failure ends the iteration (and cancels what runs)."""
    running: dict[int, asyncio.Task[R]] = {}
    started = 0
    try:
        for index in range(len(work)):
            while started < len(work) and started < index + ahead:
                running[started] = asyncio.ensure_future(work[started]())
                started += 1
            yield await running.pop(index)
    finally:
        for task in running.values():
            task.cancel()
        if running:
            await asyncio.gather(*running.values(), return_exceptions=True)


@dataclass
class BatchJob(Generic[R]):
    id: str
    total: int
    results: list[R] = field(default_factory=list)  # the finished items, in order
    state: JobState = "queued"
    error: str | None = None
    error_code: str | None = None
    created_at: float = field(default_factory=time.time)  # epoch seconds
    updated_at: float = field(default_factory=time.time)
    finished_at: float | None = None  # monotonic
    tenant: str | None = None  # the tenant whose request started it (tenancy.py)
    client: str = ""  # who started it (server/scheduling/clients.py)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")


class BatchJobs(Generic[R]):
    def __init__(self, *, ttl_s: float, per_client: int) -> None:
        self.ttl_s = ttl_s
        self.per_client = per_client
        self._jobs: dict[str, BatchJob[R]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def submit(self, work: Sequence[ItemWork[R]]) -> BatchJob[R]:
        """Start a job over `work` (one callable per item) and return it at once."""
        self._forget_expired()
        client = CLIENT.get()
        unfinished = sum(not job.finished and job.client == client
                         for job in self._jobs.values())
        if unfinished >= self.per_client:
            raise TooManyJobs(
                f"this client has {unfinished} unfinished batch jobs, as many as one client "
                f"may have (NMT_SCHEDULER__MAX_BATCH_JOBS); follow them to their end at "
                f"their Location, then send more", retry_after=self._retry_after_s(client))
        job: BatchJob[R] = BatchJob(uuid.uuid4().hex, len(work),
                                    tenant=current_scope().tenant, client=client)
        self._jobs[job.id] = job
        task = asyncio.get_running_loop().create_task(self._run(job, work),
                                                      name=f"batch-job-{job.id}")
        self._tasks[job.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job.id, None))
        return job

    def _retry_after_s(self, client: str) -> int:
        """Seconds until one of the client's running jobs is likely done."""
        return soonest_done_s(((job.total, len(job.results), job.created_at)
                               for job in self._jobs.values()
                               if job.client == client and not job.finished), time.time())

    def get(self, job_id: str) -> BatchJob[R]:
        """The job, when the request's scope started it (another tenant's job is as
        unknown as a missing one)."""
        self._forget_expired()
        job = self._jobs.get(job_id)
        if job is None or not current_scope().follows(job.tenant):
            raise NotFound(f"no batch job {job_id!r} (unknown, or finished more than "
                           f"{self.ttl_s:g} s ago)")
        return job

    async def wait(self, job_id: str, timeout_s: float) -> BatchJob[R]:
        """The job once it finished, or as it is after `timeout_s` (long polling)."""
        job = self.get(job_id)
        deadline = time.monotonic() + timeout_s
        while not job.finished and (left := deadline - time.monotonic()) > 0:
            job.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.changed.wait(), left)
        return job

    async def stop(self) -> None:
        """Cancel the running jobs (the server stops; their clients send them again)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, job: BatchJob[R], work: Sequence[ItemWork[R]]) -> None:
        self._update(job, "running")
        try:
            async for result in in_order(work):
                job.results.append(result)
                self._update(job, "running")
        except asyncio.CancelledError:
            self._update(job, "failed", "the server stopped before the job finished; send "
                                        "the batch again", "not_ready")
            raise
        except ServingError as error:
            self._update(job, "failed", error.message, error.code)
        except Exception as error:  # a bug: the job fails with it, the server goes on
            log.exception("batch job %s failed", job.id)
            self._update(job, "failed", f"internal error: {error!r}", "internal")
        else:
            self._update(job, "done")

    @staticmethod
    def _update(job: BatchJob[R], state: JobState, error: str | None = None,
                code: str | None = None) -> None:
        job.state = state
        job.error, job.error_code = error, code
        job.updated_at = time.time()
        if job.finished:
            job.finished_at = time.monotonic()
        job.changed.set()

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for job_id, job in list(self._jobs.items()):
            if job.finished_at is not None and now - job.finished_at > self.ttl_s:
                del self._jobs[job_id]
