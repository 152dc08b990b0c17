"""Training-job records of the sidecar: the typed view of a `jobs` row and its updates."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from sqlalchemy import RowMapping

from .hashing import canonical_json

JobState = Literal["queued", "running", "evaluating", "published", "failed"]


@dataclass(frozen=True)
class Job:
    id: str
    domain: str
    state: JobState
    progress: float
    loss: float | None
    scores: dict[str, Any]
    error: str | None
    config: dict[str, Any]
    data_location: str
    worker: str | None
    created_at: datetime
    updated_at: datetime
    heartbeat_at: datetime | None
    attempts: int
    result: dict[str, Any] | None
    backbone: str = ""  # the backbone the domain's module is trained against


_NOT_NULL = frozenset({"state", "progress", "scores", "config", "data_location", "attempts"})


class JobUpdate(BaseModel):
    """Fields `Registry.update_job` accepts; unknown names and wrong types are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    state: JobState | None = None
    progress: float | None = Field(default=None, ge=0.0, le=1.0)
    loss: float | None = None
    scores: dict[str, Any] | None = None
    error: str | None = None
    config: dict[str, Any] | None = None
    data_location: str | None = None
    worker: str | None = None
    heartbeat_at: AwareDatetime | None = None
    attempts: int | None = Field(default=None, ge=0)
    result: dict[str, Any] | None = None

    def to_columns(self) -> dict[str, Any]:
        """Column values for the fields that were given (JSON fields encoded)."""
        values: dict[str, Any] = {}
        for field in sorted(self.model_fields_set):
            value = getattr(self, field)
            if value is None and field in _NOT_NULL:
                raise ValueError(f"job field {field!r} cannot be None")
            if field in ("scores", "config", "result"):
                values[f"{field}_json"] = None if value is None else canonical_json(value)
            else:
                values[field] = value
        return values


def job_from_row(row: RowMapping) -> Job:
    return Job(
        id=row["id"],
        domain=row["domain"],
        state=row["state"],
        progress=row["progress"],
        loss=row["loss"],
        scores=json.loads(row["scores_json"]),
        error=row["error"],
        config=json.loads(row["config_json"]),
        data_location=row["data_location"],
        worker=row["worker"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        heartbeat_at=row["heartbeat_at"],
        attempts=row["attempts"],
        result=None if row["result_json"] is None else json.loads(row["result_json"]),
        backbone=row["backbone"],
    )
