"""Registry rows of training jobs (table `jobs`): a mixin of `Registry`.

The sidecar's claims are exclusive on both databases: a conditional UPDATE (`... WHERE
state = 'queued'`), with `FOR UPDATE SKIP LOCKED` on PostgreSQL so that many trainers
claim different jobs in parallel; a running job's updates are fenced by its owner
(`heartbeat_job`), and a dead worker's job is taken over by one worker only.
"""

from __future__ import annotations

import uuid
from abc import abstractmethod
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from .errors import ConflictError, NotFoundError
from .hashing import canonical_json
from .jobs import Job, JobState, JobUpdate, job_from_row
from .tables import active, jobs

RUNNING_STATES: tuple[JobState, ...] = ("running", "evaluating")
UNFINISHED_STATES: tuple[JobState, ...] = ("queued", *RUNNING_STATES)


def _now() -> datetime:
    return datetime.now(UTC)


class JobRows:
    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self, *, serial: bool = False) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def scope(self, kind: str, backbone: str | None) -> str: ...

    def create_job(self, domain: str, *, config: dict[str, Any], data_location: str,
                   backbone: str | None = None) -> Job:
        now = _now()
        job_id = str(uuid.uuid4())
        row = {
            "id": job_id,
            "domain": domain,
            "backbone": self.scope("module", backbone),
            "state": "queued",
            "progress": 0.0,
            "scores_json": "{}",
            "config_json": canonical_json(config),
            "data_location": data_location,
            "created_at": now,
            "updated_at": now,
            "attempts": 0,
        }
        with self._write() as conn:
            conn.execute(insert(jobs).values(row))
        return self.get_job(job_id)

    def get_job(self, job_id: str) -> Job:
        with self._read() as conn:
            row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
        if row is None:
            raise NotFoundError("job", job_id)
        return job_from_row(row)

    def update_job(self, job_id: str, **fields: Any) -> Job:
        """Update the named fields (see `JobUpdate`); `updated_at` is set automatically."""
        values = JobUpdate.model_validate(fields).to_columns()
        values["updated_at"] = _now()
        with self._write() as conn:
            if conn.execute(update(jobs).where(jobs.c.id == job_id).values(values)).rowcount == 0:
                raise NotFoundError("job", job_id)
        return self.get_job(job_id)

    def claim_next_job(self, worker: str) -> Job | None:
        """Atomically move the oldest queued job to running for `worker`; None if none queued.

        PostgreSQL locks the chosen row and skips rows other claimers hold (`FOR UPDATE
        SKIP LOCKED`), so concurrent trainers take different jobs without waiting; SQLite
        ignores the clause (its writers are serialized anyway). The conditional UPDATE
        (`state = 'queued'`) keeps the claim exclusive either way: a worker that loses a
        race updates zero rows and tries the next job.
        """
        while True:
            with self._write() as conn:
                oldest = (
                    select(jobs.c.id)
                    .where(jobs.c.state == "queued")
                    .order_by(jobs.c.created_at, jobs.c.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                )
                job_id = conn.execute(oldest).scalar()
                if job_id is None:
                    return None
                now = _now()
                claim = (
                    update(jobs)
                    .where(jobs.c.id == job_id, jobs.c.state == "queued")
                    .values(
                        state="running",
                        worker=worker,
                        attempts=jobs.c.attempts + 1,
                        heartbeat_at=now,
                        updated_at=now,
                    )
                )
                claimed = conn.execute(claim).rowcount == 1
            if claimed:
                return self.get_job(str(job_id))

    def list_jobs(self, state: JobState | None = None) -> list[Job]:
        query = select(jobs).order_by(jobs.c.created_at, jobs.c.id)
        if state is not None:
            query = query.where(jobs.c.state == state)
        with self._read() as conn:
            return [job_from_row(row) for row in conn.execute(query).mappings()]

    def create_domain_job(
        self, domain: str, *, config: dict[str, Any], data_location: str, job_id: str,
        backbone: str | None = None, refresh_of: int | None = None,
    ) -> Job:
        """A queued job for `domain` of `backbone`, unless the domain is active there or
        has an unfinished job there (ConflictError): the check and the insert share one
        write transaction. A refresh (`refresh_of`: the module version it fine-tunes)
        needs that version active instead."""
        now = _now()
        scope = self.scope("module", backbone)
        with self._write(serial=True) as conn:
            served = conn.execute(select(active.c.version).where(
                active.c.backbone == scope, active.c.kind == "module",
                active.c.name == domain)).scalar()
            if refresh_of is not None and served != refresh_of:
                raise ConflictError(f"domain {domain!r}: module v{refresh_of} is not active "
                                    f"(active: {served})")
            if refresh_of is None and served is not None:
                raise ConflictError(f"domain {domain!r} exists (module v{served} is active)")
            busy = conn.execute(select(jobs.c.id, jobs.c.state).where(
                jobs.c.backbone == scope, jobs.c.domain == domain,
                jobs.c.state.in_(UNFINISHED_STATES))).first()
            if busy is not None:
                raise ConflictError(f"domain {domain!r} has a {busy.state} job ({busy.id})")
            conn.execute(insert(jobs).values(
                id=job_id, domain=domain, backbone=scope, state="queued", progress=0.0,
                scores_json="{}",
                config_json=canonical_json(config), data_location=data_location,
                created_at=now, updated_at=now, attempts=0))
        return self.get_job(job_id)

    def heartbeat_job(self, job_id: str, owner: str, /, **fields: Any) -> bool:
        """Refresh a running job's heartbeat (+ `fields`) if `owner` owns it; else False."""
        values = JobUpdate.model_validate(fields).to_columns()
        values["heartbeat_at"] = values["updated_at"] = _now()
        mine = (jobs.c.id == job_id, jobs.c.worker == owner, jobs.c.state.in_(RUNNING_STATES))
        with self._write() as conn:
            return bool(conn.execute(update(jobs).where(*mine).values(values)).rowcount)

    def take_over_job(self, job: Job, worker: str) -> Job | None:
        """Claim a running job whose worker died (or restarted). Conditional on the worker
        and heartbeat the caller saw: of two workers taking it over one wins (None: lost)."""
        beat, now = jobs.c.heartbeat_at, _now()
        where = (jobs.c.id == job.id, jobs.c.state.in_(RUNNING_STATES),
                 beat.is_(None) if job.heartbeat_at is None else beat == job.heartbeat_at,
                 jobs.c.worker.is_(None) if job.worker is None else jobs.c.worker == job.worker)
        values = {"worker": worker, "attempts": jobs.c.attempts + 1, "heartbeat_at": now,
                  "updated_at": now}
        with self._write() as conn:
            claimed = conn.execute(update(jobs).where(*where).values(values)).rowcount == 1
        return self.get_job(job.id) if claimed else None
