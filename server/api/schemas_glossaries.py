"""Bodies of the stored glossaries' admin endpoints (/admin/glossaries)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from server.api.schemas import Strict


class GlossaryUpload(Strict):
    entries: dict[str, str] = Field(description='{"source term": "target term", ...}')
    default_for: str | None = Field(
        None, pattern=r"^[a-z][a-z0-9_-]{0,62}$",
        description="a domain whose requests use this glossary when they name none")


class GlossaryInfo(BaseModel):
    name: str
    size: int = Field(description="number of entries")
    default_for: str | None
    created_at: datetime
    updated_at: datetime


class GlossaryDetail(GlossaryInfo):
    entries: dict[str, str]
    forbidden: list[str] = Field(
        default_factory=list, description="target terms the output must not hold (a TBX "
                                          "file's deprecated, superseded, forbidden terms)")


class GlossariesResponse(BaseModel):
    glossaries: list[GlossaryInfo]
    next_after: str | None = Field(
        None, description="more follow: ask again with `after` set to this; null on the "
                          "last page")


class GlossaryDeleted(BaseModel):
    name: str
    deleted: bool
