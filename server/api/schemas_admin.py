"""Bodies of the admin endpoints of domain versions (/admin/domains...): list, upload,
activate or roll back, delete."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from server.api.schemas import Strict

MAX_VERSION = 2**31 - 1  # the registry's version column (32-bit on PostgreSQL)


class VersionInfo(BaseModel):
    version: int
    created_at: datetime
    family: str
    active: bool
    scores: dict[str, Any]


class AdminDomain(BaseModel):
    name: str
    active_version: int | None
    versions: list[VersionInfo]


class AdminDomainsResponse(BaseModel):
    domains: list[AdminDomain]
    next_after: str | None = Field(
        None, description="more domains follow: ask again with `after` set to this; null "
                          "on the last page")


class ActivateRequest(Strict):
    version: int = Field(ge=1, le=MAX_VERSION,
                         description="the version to serve (newer or older)")


class VersionResponse(BaseModel):
    name: str
    version: int
    active: bool
    family: str
    size: int | None = Field(None, description="parameter count, when loaded")


class DeleteResponse(BaseModel):
    name: str
    deactivated_version: int
    drained: bool = Field(description="in-flight requests using it finished before the answer")

