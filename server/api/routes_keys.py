"""Admin endpoints for API keys (bearer token `NMT_ADMIN_TOKEN`): create (the key is in
this one answer only), list, revoke. Keys are checked only with `NMT_ACCESS__API_KEYS`."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Path, status

from model_store.api_keys import ApiKeyRecord
from model_store.errors import NotFoundError
from server.access import hash_key, new_key
from server.access.keys import shown_prefix
from server.api.deps import AccessDep, require_admin
from server.api.list_pages import (
    DEFAULT_LIMIT,
    ListAfter,
    ListLimit,
    created_cursor,
    created_key,
    next_after,
)
from server.api.schemas import ErrorResponse
from server.api.schemas_keys import CreatedKey, CreateKeyRequest, KeyInfo, KeyListResponse
from server.core.tenancy import current_scope

router = APIRouter(prefix="/admin", tags=["admin", "keys"], dependencies=[Depends(require_admin)],
                   responses={401: {"model": ErrorResponse, "description": "no bearer token"},
                              403: {"model": ErrorResponse,
                                    "description": "wrong token, or admin disabled"}})


def _key_info(record: ApiKeyRecord) -> KeyInfo:
    return KeyInfo(id=record.id, name=record.name, prefix=record.prefix,
                   requests_per_minute=record.requests_per_minute,
                   chars_per_minute=record.chars_per_minute, created_at=record.created_at,
                   revoked_at=record.revoked_at, active=record.active)


@router.post("/keys", response_model=CreatedKey, status_code=status.HTTP_201_CREATED,
             responses={422: {"model": ErrorResponse}})
async def create_key(body: CreateKeyRequest, access: AccessDep) -> CreatedKey:
    """A new API key; the answer is the only place the key is ever shown (the registry
    keeps its SHA-256). A tenant's admin makes a member key of its tenant."""
    key = new_key()
    record = await asyncio.to_thread(
        access.registry.create_api_key, name=body.name, key_hash=hash_key(key),
        prefix=shown_prefix(key), requests_per_minute=body.requests_per_minute,
        chars_per_minute=body.chars_per_minute)
    tenant = current_scope().tenant
    if tenant is not None:
        await asyncio.to_thread(access.registry.add_tenant_key, record.id, tenant, "member")
    return CreatedKey(key=key, **_key_info(record).model_dump())


@router.get("/keys", response_model=KeyListResponse)
async def list_keys(access: AccessDep, limit: ListLimit = DEFAULT_LIMIT,
                    after: ListAfter = None) -> KeyListResponse:
    """The keys, oldest first, revoked ones included (never the keys themselves), a page
    at a time (`next_after`: the next page's cursor); a tenant's admin: its tenant's.
    422: `after` that is no cursor of this list."""
    page = await asyncio.to_thread(access.registry.api_key_page,
                                   tenant=current_scope().tenant, after=created_key(after),
                                   limit=limit)
    return KeyListResponse(keys=[_key_info(record) for record in page.entries],
                           next_after=next_after(page, lambda r: created_cursor(r.created_at,
                                                                                 r.id)))


@router.delete("/keys/{key_id}", response_model=KeyInfo,
               responses={404: {"model": ErrorResponse}})
async def revoke_key(key_id: Annotated[str, Path(max_length=64, description="the key's id")],
                     access: AccessDep) -> KeyInfo:
    """Revoke a key: refused at once on this replica, within NMT_ACCESS__CACHE_S on
    others. A tenant's admin revokes its tenant's keys only."""
    tenant = current_scope().tenant
    if tenant is not None and \
            key_id not in await asyncio.to_thread(access.registry.tenant_key_ids, tenant):
        raise NotFoundError("API key", key_id)  # as for a key that does not exist
    record = await asyncio.to_thread(access.registry.revoke_api_key, key_id)
    access.forget(record)
    return _key_info(record)
