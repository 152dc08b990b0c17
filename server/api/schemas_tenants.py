"""Bodies of the tenants' admin endpoints (/admin/tenants): tenants, their keys and what
they own (docs/API.md, "Tenants")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from server.api.schemas import Strict
from server.api.schemas_keys import CreatedKey, CreateKeyRequest
from server.core.tenancy import TENANT_NAME

# prefixes of names the server itself gives (DeepL v3 `ml-...` glossaries, ModernMT
# memories' `modernmt-memory-...` glossaries, the built-in `default-...` backbones): a
# tenant of such a name would own them by the prefix rule
RESERVED_TENANT_NAMES = frozenset({"ml", "modernmt", "default", "shared", "operator"})


class TenantCreate(Strict):
    name: str = Field(pattern=TENANT_NAME, description="1-24 lowercase letters and digits; "
                      "the tenant's resources are named `<name>-...`; not one of "
                      + ", ".join(sorted(RESERVED_TENANT_NAMES)))

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name in RESERVED_TENANT_NAMES:
            raise ValueError(f"{name!r} is reserved (the server names some of its own "
                             f"resources with it); choose another name, not one of "
                             f"{', '.join(sorted(RESERVED_TENANT_NAMES))}")
        return name


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
