"""Document jobs: a large file is translated in the background and fetched when done.

A job is a directory under `jobs_dir` (default `<store_dir>/document-jobs`): the upload
(`input`), its state (`job.json`, replaced atomically: written beside, then renamed) and,
once done, the translated file (`result`, renamed into place before the state says
`done`, so a reader never sees half a file). The directory is the whole job, so jobs
survive a restart: when the server starts it resumes every unfinished job whose owner is
gone (a process of this host that no longer runs, or no sign of life for
`STALE_S`), from the start of the file; one that has been started `MAX_ATTEMPTS` times
fails with the reason instead of looping. A graceful stop puts running jobs back in the
queue. Each attempt claims the job with a file created exclusively (`claim.<attempt>`),
so replicas sharing the directory never run one job twice. Finished jobs, their files
included, are deleted `job_ttl_s` after they finished; a job still unfinished
`job_timeout_s` after it was submitted fails. A client may have `max_client_jobs`
unfinished jobs (each holds its upload on disk and a place in the queue): one more is
refused with 429 until one of them finishes. Replicas sharing the directory count each
other's jobs too (the count is read from it).

This is not the training sidecar's job table (model_store `jobs`): those jobs run in
another process and are claimed by trainers; these run inside the server that accepted
them, and their payload is a file, which belongs on disk rather than in a registry row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from server.core.errors import Conflict, NotFound, ServingError, TooManyJobs
from server.core.job_pace import soonest_done_s
from server.core.tenancy import current_scope
from server.documents.direction import detection_summary
from server.documents.service import (
    DocumentOptions,
    DocumentService,
    OpenedDocument,
    routing_summary,
)
from server.operations.replica import replica_name
from server.scheduling.clients import CLIENT
from server.textproc.languages import Detection

log = logging.getLogger(__name__)
JobState = Literal["queued", "running", "done", "failed"]
MAX_ATTEMPTS = 3
STALE_S = 120.0  # a job whose owner has not written its state for this long is taken over
SAVE_EVERY_S = 1.0  # progress is written at most this often (and at the end)
SWEEP_EVERY_S = 60.0
JOB_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class DocumentJob:
    id: str
    filename: str  # as uploaded
    output_name: str  # the translated file's name
    media_type: str
    options: dict[str, Any]  # DocumentOptions as JSON
    state: JobState = "queued"
    done: int = 0  # segments translated
    total: int = 0  # segments in the file
    chars: int = 0  # characters to translate
    routing: dict[str, Any] | None = None
    quality: dict[str, Any] | None = None  # per-unit quality (quality_report.py)
    detected: dict[str, Any] | None = None  # source=auto: {"language", "confidence"}
    versions: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    error_code: str | None = None
    attempts: int = 0
    owner: str | None = None  # replica (host:pid) running it
    tenant: str | None = None  # the tenant whose request submitted it (tenancy.py)
    client: str = ""  # who submitted it (server/scheduling/clients.py: a key's hash)
    created_at: float = 0.0  # epoch seconds
    updated_at: float = 0.0

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")


class JobFiles:
    """One job's directory."""

    def __init__(self, root: Path, job_id: str) -> None:
        self.dir = root / job_id

    @property
    def input(self) -> Path:
        return self.dir / "input"

    @property
    def result(self) -> Path:
        return self.dir / "result"

    def load(self) -> DocumentJob:
        data = json.loads((self.dir / "job.json").read_text())
        return DocumentJob(**data)

    def save(self, job: DocumentJob) -> None:
        staging = self.dir / f"job.json.{os.getpid()}.tmp"
        staging.write_text(json.dumps(asdict(job)))
        os.replace(staging, self.dir / "job.json")

    def claim(self, attempt: int) -> bool:
        try:
            os.close(os.open(self.dir / f"claim.{attempt}", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True

    def release(self, attempt: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.dir / f"claim.{attempt}")

    def write_result(self, data: bytes) -> None:
        staging = self.dir / f"result.{os.getpid()}.tmp"
        staging.write_bytes(data)
        os.replace(staging, self.result)


class DocumentJobs:
    def __init__(self, root: Path, service: DocumentService) -> None:
        self.root = root
        self.service = service
        self.settings = service.settings
        self.gate = asyncio.Semaphore(self.settings.running_jobs)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.changed: dict[str, asyncio.Event] = {}
        self.sweeper: asyncio.Task[None] | None = None
        self.me = replica_name()
        self.submitting = asyncio.Lock()  # a client's count and its new job, one at a time

    # -- the public side ----------------------------------------------------------------
    async def submit(self, document: OpenedDocument, data: bytes, *,
                     detected: Detection | None = None) -> DocumentJob:
        client = CLIENT.get()
        async with self.submitting:
            await asyncio.to_thread(self._check_room, client)
            job_id = uuid.uuid4().hex
            now = time.time()
            shown = None if detected is None else detection_summary(detected)
            job = DocumentJob(id=job_id, filename=document.filename,
                              output_name=document.output_name,
                              media_type=document.format.media_type,
                              options=asdict(document.options), total=len(document.segments),
                              chars=document.chars, detected=shown, created_at=now,
                              updated_at=now, tenant=current_scope().tenant, client=client)
            files = JobFiles(self.root, job_id)
            await asyncio.to_thread(self._create, files, job, data)
            await asyncio.to_thread(self._keep_within_room, files, client)
        self._start(job_id)
        return job

    def _check_room(self, client: str) -> None:
        """`TooManyJobs` when the client has as many unfinished jobs as it may."""
        mine = [job for job in self._all() if job.client == client and not job.finished]
        if len(mine) >= self.settings.max_client_jobs:
            raise TooManyJobs(
                f"this client has {len(mine)} unfinished document jobs, as many as one "
                "client may have (NMT_DOCUMENTS__MAX_CLIENT_JOBS); follow them to their "
                "end at their Location, then send more",
                retry_after=soonest_done_s(((job.total, job.done, job.created_at)
                                            for job in mine), time.time()))

    def _keep_within_room(self, files: JobFiles, client: str) -> None:
        """The check again once the job is written, its own counted: of replicas that
        checked at once, the last to count sees the others' jobs, so the bound is never
        passed (one over it removes its job and is refused)."""
        mine = [job for job in self._all() if job.client == client and not job.finished]
        if len(mine) > self.settings.max_client_jobs:
            shutil.rmtree(files.dir, ignore_errors=True)
            self._check_room(client)
            raise TooManyJobs("another replica took this client's last place for "
                              "unfinished document jobs (NMT_DOCUMENTS__MAX_CLIENT_JOBS); "
                              "send again in a moment", retry_after=1)

    def get(self, job_id: str) -> DocumentJob:
        """The job, when the request's scope submitted it (another tenant's job is
        answered as an unknown one)."""
        files = self._files(job_id)
        try:
            job = files.load()
            if not current_scope().follows(job.tenant):
                raise ValueError("another tenant's job")
            return job
        except (OSError, ValueError, TypeError):
            raise NotFound(f"unknown document job {job_id!r} (finished jobs are kept "
                           f"{self.settings.job_ttl_s:g} s)", field="job_id") from None

    async def wait(self, job_id: str, timeout_s: float) -> DocumentJob:
        """The job once finished, or as it is after `timeout_s` (long polling)."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = await asyncio.to_thread(self.get, job_id)
            left = deadline - time.monotonic()
            if job.finished or left <= 0:
                return job
            event = self.changed.setdefault(job_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, SAVE_EVERY_S)):
                    await event.wait()

    def result(self, job_id: str) -> tuple[DocumentJob, bytes]:
        job = self.get(job_id)
        if job.state == "failed":
            raise Conflict(f"the job failed: {job.error}", field="job_id")
        if job.state != "done":
            raise Conflict(f"the job is {job.state} ({job.done} of {job.total} segments "
                           "translated); its result is not ready", field="job_id")
        return job, self._files(job_id).result.read_bytes()

    # -- life cycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Resume the unfinished jobs nobody runs; sweep expired ones (and keep doing so).
        The directory is made by the first job."""
        await self.sweep()
        self.sweeper = asyncio.create_task(self._keep_sweeping(), name="nmt-document-jobs")

    async def stop(self) -> None:
        """Running jobs go back to the queue (resumed by the next start)."""
        tasks = [*self.tasks.values(), *([self.sweeper] if self.sweeper else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def sweep(self) -> None:
        for job in await asyncio.to_thread(self._all):
            if job.finished:
                if time.time() - job.updated_at > self.settings.job_ttl_s:
                    await asyncio.to_thread(shutil.rmtree, self._files(job.id).dir, True)
            elif job.id not in self.tasks and self._orphaned(job):
                if job.attempts >= MAX_ATTEMPTS:
                    await asyncio.to_thread(self._fail, job, "the server stopped "
                                            f"{job.attempts} times while translating it")
                else:
                    self._start(job.id)

    async def _keep_sweeping(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            try:
                await self.sweep()
            except OSError:
                log.exception("sweeping document jobs failed; retrying later")

    # -- running one job -----------------------------------------------------------
    def _start(self, job_id: str) -> None:
        task = asyncio.create_task(self._run(job_id), name=f"nmt-document-job-{job_id}")
        self.tasks[job_id] = task
        task.add_done_callback(lambda _: self.tasks.pop(job_id, None))

    async def _run(self, job_id: str) -> None:
        async with self.gate:
            files = self._files(job_id)
            job = await asyncio.to_thread(files.load)
            if job.finished or not await asyncio.to_thread(files.claim, job.attempts + 1):
                return
            job = replace(job, state="running", attempts=job.attempts + 1, owner=self.me,
                          updated_at=time.time())
            await asyncio.to_thread(files.save, job)
            try:
                left = job.created_at + self.settings.job_timeout_s - time.time()
                async with asyncio.timeout(max(left, 0.0)):
                    job = await self._translate(files, job)
            except asyncio.CancelledError:  # a graceful stop: resumed by the next start
                files.release(job.attempts)
                files.save(replace(job, state="queued", owner=None, attempts=job.attempts - 1))
                raise
            except TimeoutError:
                job = self._failed(job, f"not finished within {self.settings.job_timeout_s:g} "
                                        "s (NMT_DOCUMENTS__JOB_TIMEOUT_S)", "timeout")
            except ServingError as error:
                job = self._failed(job, error.message, error.code)
            except Exception:
                log.exception("document job %s failed", job_id)
                job = self._failed(job, "internal error; the server log has details",
                                   "internal")
            await asyncio.to_thread(files.save, job)
            self._notify(job_id)

    async def _translate(self, files: JobFiles, job: DocumentJob) -> DocumentJob:
        data = await asyncio.to_thread(files.input.read_bytes)
        document = await asyncio.to_thread(self.service.open, job.filename, data,
                                           DocumentOptions(**job.options))
        saved = [time.monotonic()]

        def progress(done: int, total: int) -> None:
            nonlocal job
            job = replace(job, done=done, total=total, updated_at=time.time())
            if time.monotonic() - saved[0] >= SAVE_EVERY_S:
                saved[0] = time.monotonic()
                files.save(job)  # small; a blocking write of a few hundred bytes
                self._notify(job.id)

        result = await self.service.translate(document, progress=progress, patient=True)
        await asyncio.to_thread(files.write_result, result.data)
        routing = routing_summary(result.decision, result.versions)
        return replace(job, state="done", done=job.total, routing=routing,
                       quality=result.quality,
                       versions=result.versions, updated_at=time.time())

    # -- helpers -------------------------------------------------------------------
    def _files(self, job_id: str) -> JobFiles:
        if not JOB_ID.match(job_id):
            raise NotFound(f"unknown document job {job_id[:40]!r}", field="job_id")
        return JobFiles(self.root, job_id)

    def _create(self, files: JobFiles, job: DocumentJob, data: bytes) -> None:
        files.dir.mkdir(parents=True)
        try:
            files.input.write_bytes(data)
            files.save(job)
        except BaseException:
            shutil.rmtree(files.dir, ignore_errors=True)
            raise

    def _all(self) -> list[DocumentJob]:
        found: list[DocumentJob] = []
        for entry in self.root.iterdir() if self.root.exists() else []:
            if JOB_ID.match(entry.name):
                with contextlib.suppress(OSError, ValueError, TypeError):
                    found.append(JobFiles(self.root, entry.name).load())
        return found

    def _orphaned(self, job: DocumentJob) -> bool:
        if job.owner is None:
            return True
        host, _, pid = job.owner.rpartition(":")
        if host == self.me.rpartition(":")[0] and pid.isdigit():
            return not _alive(int(pid)) or int(pid) == os.getpid()
        return time.time() - job.updated_at > STALE_S

    def _fail(self, job: DocumentJob, message: str) -> None:
        self._files(job.id).save(self._failed(job, message, "interrupted"))

    @staticmethod
    def _failed(job: DocumentJob, message: str, code: str) -> DocumentJob:
        return replace(job, state="failed", error=message, error_code=code, owner=None,
                       updated_at=time.time())

    def _notify(self, job_id: str) -> None:
        event = self.changed.pop(job_id, None)
        if event is not None:
            event.set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def job_root(store_dir: Path, configured: str | None) -> Path:
    """Where jobs live: the setting, or `<store_dir>/document-jobs`."""
    return Path(configured) if configured else store_dir / "document-jobs"


