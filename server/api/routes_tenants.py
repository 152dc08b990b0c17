"""Admin endpoints of tenants (docs/API.md, "Tenants"): the operator (NMT_ADMIN_TOKEN) creates
tenants and gives them resources; a tenant's admin (its admin key as the bearer token)
creates its own tenant's keys. What a tenant owns is seen and used by its keys only;
what no tenant owns is shared."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, status

from model_store.errors import ConflictError, NotFoundError
from server.access import hash_key, new_key
from server.access.keys import shown_prefix
from server.api.deps import AccessDep, require_admin, require_operator
from server.api.schemas import ErrorResponse
from server.api.schemas_tenants import (
    CreatedTenantKey,
    OwnedResource,
    TenantCreate,
    TenantInfo,
    TenantKeyRequest,
    TenantsResponse,
)
from server.core.errors import Conflict, NotFound
from server.core.tenancy import TENANT_NAME, current_scope

router = APIRouter(prefix="/admin/tenants", tags=["admin", "tenants"],
                   dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse,
                                    "description": "wrong token, admin disabled, or a "
                                                   "tenant's admin doing the operator's work"},
                              404: {"model": ErrorResponse}})
TenantPath = Annotated[str, Path(pattern=TENANT_NAME, description="the tenant's name")]
KindPath = Annotated[Literal["domain", "glossary", "memory"], Path(description="what it is")]
NamePath = Annotated[str, Path(max_length=64, description="the resource's name")]
OPERATOR_ONLY = [Depends(require_operator)]


@router.post("", response_model=TenantInfo, status_code=status.HTTP_201_CREATED,
             dependencies=OPERATOR_ONLY, responses={409: {"model": ErrorResponse}})
async def create_tenant(body: TenantCreate, access: AccessDep) -> TenantInfo:
    try:
        await asyncio.to_thread(access.registry.create_tenant, body.name)
    except ConflictError as error:
        raise Conflict(str(error), field="name") from None
    access.owners.forget()
    return TenantInfo(name=body.name)


@router.get("", response_model=TenantsResponse, dependencies=OPERATOR_ONLY)
async def list_tenants(access: AccessDep) -> TenantsResponse:
    names = await asyncio.to_thread(access.registry.list_tenants)
    return TenantsResponse(tenants=[TenantInfo(name=name) for name in names])


@router.post("/{tenant}/keys", response_model=CreatedTenantKey,
             status_code=status.HTTP_201_CREATED)
async def create_tenant_key(tenant: TenantPath, body: TenantKeyRequest,
                            access: AccessDep) -> CreatedTenantKey:
    """A key of the tenant (the operator: of any tenant; a tenant's admin: of its own);
    the answer is the only place the key is shown."""
    scope = current_scope()
    if not scope.operator and scope.tenant != tenant:
        raise NotFound(f"tenant {tenant!r} does not exist", field="tenant")
    if not await asyncio.to_thread(access.registry.has_tenant, tenant):
        raise NotFound(f"tenant {tenant!r} does not exist", field="tenant")
    key = new_key()
    record = await asyncio.to_thread(
        access.registry.create_api_key, name=body.name, key_hash=hash_key(key),
        prefix=shown_prefix(key), requests_per_minute=body.requests_per_minute,
        chars_per_minute=body.chars_per_minute)
    await asyncio.to_thread(access.registry.add_tenant_key, record.id, tenant, body.role)
    return CreatedTenantKey(
        key=key, id=record.id, name=record.name, prefix=record.prefix,
        requests_per_minute=record.requests_per_minute,
        chars_per_minute=record.chars_per_minute, created_at=record.created_at,
        revoked_at=record.revoked_at, active=record.active, tenant=tenant, role=body.role)


@router.put("/{tenant}/{kind}s/{name}", response_model=OwnedResource,
            dependencies=OPERATOR_ONLY, responses={409: {"model": ErrorResponse}})
async def give(tenant: TenantPath, kind: KindPath, name: NamePath,
               access: AccessDep) -> OwnedResource:
    """Give a resource (existing or to come) to the tenant: from now on only its keys
    see it (409 when another tenant owns it)."""
    try:
        await asyncio.to_thread(access.owners.claim, kind, name, tenant)
    except NotFoundError:
        raise NotFound(f"tenant {tenant!r} does not exist", field="tenant") from None
    except ConflictError as error:
        raise Conflict(str(error), field="name") from None
    return OwnedResource(kind=kind, name=name, tenant=tenant)


@router.delete("/{tenant}/{kind}s/{name}", response_model=OwnedResource,
               dependencies=OPERATOR_ONLY)
async def take_back(tenant: TenantPath, kind: KindPath, name: NamePath,
                    access: AccessDep) -> OwnedResource:
    """Make a resource given to the tenant shared again (404 when it was not given)."""
    owners = access.owners.owners
    if owners.get((kind, name)) != tenant:
        raise NotFound(f"tenant {tenant!r} was not given {kind} {name!r}", field="name")
    await asyncio.to_thread(access.owners.release, kind, name)
    return OwnedResource(kind=kind, name=name, tenant=None)
