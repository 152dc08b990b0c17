"""The last refresh of each domain from its corrections, for the admin summary and the
web page's Operate view: its job, state, and the gate's scores (the served and the
refreshed module on the dev set and on the held-back corrections)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from model_store import Job, Store
from server.serving.refresh_jobs import is_refresh


class PairScores(BaseModel):
    served: dict[str, float] = Field(description="BLEU and chrF of the module it refreshed")
    refreshed: dict[str, float] = Field(description="... of the refreshed module")


class HeldOutScores(PairScores):
    sentences: int | None = None
    delta_chrf_95: list[float] | None = Field(
        None, description="95% paired-bootstrap interval of the chrF gain")


class LastRefresh(BaseModel):
    job_id: str
    state: str = Field(description="queued, running, evaluating, published or failed")
    trigger: str | None = Field(None, description="admin, or corrections (enough new ones)")
    created_at: str
    updated_at: str
    base_version: int | None = Field(None, description="the module version it refreshed")
    module_version: int | None = Field(None, description="the version it trained")
    active: bool = Field(False, description="the trained version was activated")
    gate: str | None = Field(None, description="passed or refused (null: not gated yet)")
    dev: PairScores | None = None
    held_out_corrections: HeldOutScores | None = None
    corrections: dict[str, Any] | None = Field(
        None, description="how many trained, were held back, were left out and why")
    error: str | None = None


def last_refreshes(store: Store) -> dict[str, LastRefresh]:
    """Domain -> its newest refresh job (of any backbone)."""
    newest: dict[str, Job] = {}
    for job in store.registry.list_jobs():
        if is_refresh(job) and (job.domain not in newest
                                or job.created_at > newest[job.domain].created_at):
            newest[job.domain] = job
    return {domain: describe(job) for domain, job in sorted(newest.items())}


def describe(job: Job) -> LastRefresh:
    scores, result = job.scores or {}, job.result or {}
    dev, held = scores.get("dev"), scores.get("held_out_corrections")
    return LastRefresh(
        job_id=job.id, state=job.state, trigger=job.config["refresh"].get("trigger"),
        created_at=job.created_at.isoformat(), updated_at=job.updated_at.isoformat(),
        base_version=job.config["refresh"].get("base_version"),
        module_version=result.get("module_version"), active=bool(result.get("active")),
        gate=scores.get("gate") if dev else None,
        dev=PairScores(served=dev["served"], refreshed=dev["refreshed"]) if dev else None,
        held_out_corrections=HeldOutScores(
            served=held["served"], refreshed=held["refreshed"],
            sentences=held.get("sentences"), delta_chrf_95=held.get("delta_chrf_95"))
        if held else None,
        corrections=scores.get("refresh"), error=job.error)
