"""The training sidecar's worker loop: claim a job, run it, record the outcome.

Job states: `queued` -> `running` (training) -> `evaluating` (gate, router, publication)
-> `published` | `failed`.

Crash safety and resumption:
- A job is claimed with a conditional UPDATE (`Registry.claim_next_job`; on PostgreSQL
  the row is locked `FOR UPDATE SKIP LOCKED`, so many sidecars claim in parallel and never
  the same job); every later
  write of the job row is fenced on (job id, this worker, a running state)
  (`Registry.heartbeat_job`), so a worker that lost its job can no longer change it.
- While a job runs, a heartbeat thread refreshes `heartbeat_at`. A `running`/`evaluating`
  job whose heartbeat is older than `heartbeat_timeout_s` belongs to a dead worker, and a
  job still marked as this worker's (a restart after `kill -9`) is taken over at once;
  both resume from the checkpoint in the job's run directory. Each claim counts as an
  attempt; a job claimed `max_attempts` times is failed with the reason.
- SIGTERM / SIGINT: training finishes its current step, checkpoints and stops; the job
  goes back to `queued` (the graceful stop does not count as an attempt) and resumes on
  the next start. Publication, once started, is short and runs to its end.
- An error that retrying cannot fix (`JobFailed`) fails the job at once; any other
  exception is retried until `max_attempts`.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from contract.training import JOBS_DIR, job_key
from model_store import Job, Store, StoreError
from server.serving.refresh_jobs import is_refresh
from trainer.corrections.refresh_job import run_refresh_job
from trainer.corrections.refresh_trigger import RefreshTrigger
from trainer.jobs.domain_job import JobFailed, JobInterrupted
from trainer.jobs.pipeline import JobContext, run_domain_job
from trainer.jobs.settings import WorkerSettings

log = logging.getLogger(__name__)
ORPHAN_AGE = timedelta(hours=1)  # job directories without a row (a crashed upload)


class LostJob(Exception):
    """Another worker took the job over: stop without touching it."""


class Heartbeat:
    """Refreshes a job's heartbeat from a thread; `lost` is set when the job is no longer
    this worker's. Progress reports go through `report` (fenced the same way)."""

    def __init__(self, store: Store, job: Job, worker: str, *, interval_s: float) -> None:
        self.store, self.job_id, self.worker = store, job.id, worker
        self.interval_s = interval_s
        self.lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{job.id[:8]}",
                                        daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._done.wait(self.interval_s):
            try:
                if not self.store.registry.heartbeat_job(self.job_id, self.worker):
                    log.warning("job %s is no longer ours; stopping", self.job_id)
                    self.lost.set()
                    return
            except Exception:  # a busy database: the next beat retries
                log.exception("heartbeat of job %s failed", self.job_id)

    def report(self, fields: dict[str, Any]) -> None:
        if not self.store.registry.heartbeat_job(self.job_id, self.worker, **fields):
            self.lost.set()
            raise LostJob(f"job {self.job_id} was taken over by another worker")


class Sidecar:
    def __init__(self, store: Store, settings: WorkerSettings, *,
                 stop: threading.Event | None = None) -> None:
        self.store = store
        self.settings = settings
        self.stop = stop or threading.Event()
        self.refreshes = RefreshTrigger(store, settings.refresh)

    @property
    def worker(self) -> str:
        return self.settings.worker_name

    def run(self, *, once: bool = False) -> int:
        """Process jobs until stopped (or one job with `once`); returns how many ran."""
        self.sweep()
        processed = 0
        while not self.stop.is_set():
            job = self.next_job()
            if job is None and self.refreshes.queue_due():
                job = self.next_job()
            if job is None:
                if once:
                    break
                self.stop.wait(self.settings.poll_interval_s)
                continue
            self.process(job)
            processed += 1
            if once:
                break
        return processed

    def sweep(self) -> None:
        """Remove leftovers of crashes: staging directories of interrupted publications and
        job directories of uploads whose job row was never written."""
        removed = self.store.sweep()
        known = {job.id for job in self.store.registry.list_jobs()}
        cutoff = time.time() - ORPHAN_AGE.total_seconds()
        for entry in self.store.storage.list(JOBS_DIR):
            key = job_key(entry)
            if entry not in known and self.store.storage.modified_at(key) <= cutoff:
                self.store.storage.remove_tree(key)
                removed.append(key)
        if removed:
            log.info("swept %d leftover(s): %s", len(removed), ", ".join(removed))

    def next_job(self) -> Job | None:
        """A job to resume (ours after a restart, or a dead worker's), else the oldest
        queued one."""
        now = datetime.now(UTC)
        timeout = timedelta(seconds=self.settings.heartbeat_timeout_s)
        running = self.store.registry.list_jobs("running")
        running += self.store.registry.list_jobs("evaluating")
        for job in running:
            stale = job.heartbeat_at is None or now - job.heartbeat_at > timeout
            if job.worker != self.worker and not stale:
                continue
            taken = self.store.registry.take_over_job(job, self.worker)
            if taken is None:
                continue  # another worker was faster
            log.info("took over job %s (%s) from %s", job.id, job.domain, job.worker)
            if taken.attempts > self.settings.max_attempts:
                self._fail(taken, f"gave up after {job.attempts} attempts: the worker died "
                                  f"while running it (last: {job.worker})")
                continue
            return taken
        return self.store.registry.claim_next_job(self.worker)

    def process(self, job: Job) -> None:
        log.info("job %s: domain %r, attempt %d", job.id, job.domain, job.attempts)
        with Heartbeat(self.store, job, self.worker,
                       interval_s=self.settings.heartbeat_interval_s) as beat:
            ctx = JobContext(self.store, job, self.settings, report=beat.report,
                             should_stop=lambda: self.stop.is_set() or beat.lost.is_set())
            outcome = self._attempt(ctx)
        # The outcome is written after the heartbeat thread stopped: its next beat would
        # otherwise find the job finished and report it as lost.
        if beat.lost.is_set():
            log.warning("job %s was taken over by another worker", job.id)
        elif outcome is not None:
            self._write(job, **outcome)

    def _attempt(self, ctx: JobContext) -> dict[str, Any] | None:
        """Run the job; the fields of its outcome (None: nothing to record)."""
        job = ctx.job
        try:
            result = run_refresh_job(ctx) if is_refresh(job) else run_domain_job(ctx)
        except JobInterrupted as stopped:
            log.info("job %s: %s; queued again, it resumes from its checkpoint", job.id, stopped)
            # A graceful stop is no failure: the attempt is not counted.
            return {"state": "queued", "worker": None, "attempts": max(job.attempts - 1, 0)}
        except JobFailed as failure:
            log.error("job %s failed: %s", job.id, failure.reason)
            fields = {"scores": failure.scores, "result": failure.result}
            return {"state": "failed", "error": failure.reason,
                    **{k: v for k, v in fields.items() if v}}
        except LostJob:
            return None
        except Exception as error:  # a bug or a transient failure: retried
            log.exception("job %s failed", job.id)
            return self._retry_or_fail(job, f"{type(error).__name__}: {error}")
        log.info("job %s published: %s", job.id, result)
        return {"state": "published", "progress": 1.0, "result": result, "error": None}

    def _retry_or_fail(self, job: Job, reason: str) -> dict[str, Any]:
        if job.attempts >= self.settings.max_attempts:
            reason = f"gave up after {job.attempts} attempts; last error: {reason}"
            log.error("job %s failed: %s", job.id, reason)
            return {"state": "failed", "error": reason}
        return {"state": "queued", "worker": None, "error": reason}

    def _fail(self, job: Job, reason: str) -> None:
        log.error("job %s failed: %s", job.id, reason)
        self._write(job, state="failed", error=reason)

    def _write(self, job: Job, **fields: Any) -> None:
        try:
            if not self.store.registry.heartbeat_job(job.id, self.worker, **fields):
                log.warning("job %s is no longer ours; not recording %s", job.id, fields)
        except StoreError:
            log.exception("could not record the outcome of job %s", job.id)
