"""After a tenant's request created a resource: record that the tenant owns it (the
registry's `tenant_resources`; server/access/owners.py). Nothing is recorded for the
operator or a key of no tenant: what they create is shared."""

from __future__ import annotations

import asyncio

from server.access import AccessGuard
from server.core.tenancy import Kind, current_scope


async def claim_created(access: AccessGuard, kind: Kind, name: str) -> None:
    tenant = current_scope().tenant
    if tenant is not None:
        await asyncio.to_thread(access.owners.claim, kind, name, tenant)
