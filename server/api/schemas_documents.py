"""Bodies of the document endpoints (/translate/file and its jobs). The translated file
itself is answered as it is; these are the job's answers."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from server.api.schemas import Routing


class JobProgress(BaseModel):
    done: int = Field(description="segments translated")
    total: int = Field(description="segments in the file")
    fraction: float = Field(description="done / total (1 for an empty file)")


class DocumentJobError(BaseModel):
    code: str
    message: str


class DetectedLanguage(BaseModel):
    language: str
    confidence: float = Field(description="0..1")


class DocumentJobResponse(BaseModel):
    id: str
    state: Literal["queued", "running", "done", "failed"]
    filename: str = Field(description="the uploaded file's name")
    output_name: str = Field(description="the translated file's name")
    characters: int = Field(description="characters to translate")
    progress: JobProgress
    routing: Routing | None = Field(description="the document's routing, once done")
    detected: DetectedLanguage | None = Field(
        default=None, description="source=auto: the document's detected language")
    quality: dict[str, Any] | None = Field(
        default=None, description="once done: the units' quality, as the result's "
                                  "X-NMT-Quality header (docs/API.md, Documents)")
    error: DocumentJobError | None = Field(description="why it failed")
    result_url: str | None = Field(description="where the file is, once done")
    created_at: datetime
    updated_at: datetime
