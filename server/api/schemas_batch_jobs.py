"""Bodies of /translate/batch's jobs (`"async": true`, or a batch past
NMT_SCHEDULER__BATCH_ASYNC_CHARS) and of its NDJSON stream's lines."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from server.api.schemas import TranslateResponse
from server.api.schemas_documents import DocumentJobError, JobProgress


class BatchJobResponse(BaseModel):
    id: str
    state: Literal["queued", "running", "done", "failed"]
    progress: JobProgress = Field(description="items translated of all (done: in order, "
                                              "the first `done` items' results are final)")
    results: list[TranslateResponse] = Field(
        description="the finished items' results in the items' order (all of them once "
                    "done), as /translate/batch answers them")
    error: DocumentJobError | None = Field(description="why the job failed")
    created_at: datetime
    updated_at: datetime


class BatchStreamLine(TranslateResponse):
    """One line of a streamed batch: an item's result and its index in the request."""

    index: int = Field(description="the item's position in the request's items")
