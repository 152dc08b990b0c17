"""Bodies of the tenants' admin endpoints (/admin/tenants): tenants, their keys and what
they own (docs/API.md, "Tenants")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from server.api.schemas import Strict
from server.api.schemas_keys import CreatedKey, CreateKeyRequest
from server.core.tenancy import TENANT_NAME


class TenantCreate(Strict):
    name: str = Field(pattern=TENANT_NAME, description="1-24 lowercase letters and digits; "
                      "the tenant's resources are named `<name>-...`")


class TenantInfo(BaseModel):
    name: str


class TenantsResponse(BaseModel):
    tenants: list[TenantInfo]


class TenantKeyRequest(CreateKeyRequest):
    role: Literal["member", "admin"] = Field(
        "member", description="member: translates with the tenant's resources; admin: "
                              "also manages them (its key is the admin bearer token)")


class CreatedTenantKey(CreatedKey):
    tenant: str
    role: str


class OwnedResource(BaseModel):
    kind: Literal["domain", "glossary", "memory"]
    name: str
    tenant: str | None = Field(description="null: shared again")
