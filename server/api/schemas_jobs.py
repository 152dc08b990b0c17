"""Bodies of the training sidecar's admin endpoints (POST /admin/domains, /admin/jobs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from model_store import JobState


class JobResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    domain: str
    state: JobState = Field(description="queued, running, evaluating, published or failed")
    progress: float = Field(description="0..1")
    loss: float | None = Field(description="latest training loss")
    scores: dict[str, Any] = Field(description="training progress, then the gate's dev "
                                               "BLEU/chrF of the module and the backbone")
    error: str | None = Field(description="why the job failed (or the last retried error)")
    config: dict[str, Any]
    result: dict[str, Any] | None = Field(description="published versions and notes")
    worker: str | None
    attempts: int
    created_at: datetime
    updated_at: datetime
    heartbeat_at: datetime | None


class JobListResponse(BaseModel):
    jobs: list[JobResponse]
    next_after: str | None = Field(
        None, description="more follow: ask again with `after` set to this; null on the "
                          "last page")
