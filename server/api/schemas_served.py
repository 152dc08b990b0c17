"""What the server serves, and whether it can: the bodies of GET /domains, GET /languages
and the health checks (/health/live, /health/ready)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class BackboneInfo(BaseModel):
    name: str
    version: int
    fingerprint: str


class DomainInfo(BaseModel):
    name: str
    version: int = Field(description="the served version (a broken domain: the active "
                                      "version that failed to load)")
    family: str | None = Field(description="null for a broken domain")
    size: int | None = Field(description="parameter count of the module; null for a broken "
                                         "domain")
    status: str = Field(description='"ready", "stale: ..." when a newer version failed (the '
                                    'listed one serves), or "broken: ..." when no version '
                                    "serves (its requests get 503)")


class DomainsResponse(BaseModel):
    backbone: BackboneInfo | None
    domains: list[DomainInfo]



class DirectionInfo(BaseModel):
    source: str | None = Field(description="ISO 639-1; null when the backbone does not "
                                           "say (reachable only as the default direction)")
    target: str | None
    source_name: str | None
    target_name: str | None
    backbone: str
    version: int
    default: bool = Field(description="requests without source and target use it")
    domains: list[str] = Field(description="its served domains (`generic`, the plain "
                                           "backbone, always serves)")


class LanguagesResponse(BaseModel):
    directions: list[DirectionInfo]


class LiveResponse(BaseModel):
    status: Literal["alive"]


class ReadyResponse(BaseModel):
    status: Literal["ready"]
    replica: str = Field(description="<host>:<pid> of the process that answered")
    registry_revision: int = Field(
        description="the latest registry event this replica has applied (-1: none yet)")
    checks: dict[str, Any]

