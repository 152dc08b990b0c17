"""The ModernMT door's own dependencies (the native ones are server/api/deps.py's).
ModernMT authenticates with the `MMT-ApiKey` header: it is the API key of translations
(NMT_ACCESS__API_KEYS, when keys are on) and, for the memories, the admin token
(NMT_ADMIN_TOKEN) or a tenant admin's key: memories are an admin matter on the native
API too."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader

from server.api.deps import AccessDep, SettingsDep
from server.api.modernmt.errors import ModernMTError
from server.api.modernmt.memories import ModernMTMemories
from server.core.errors import NotReady
from server.core.tenancy import OPERATOR, enter_scope

mmt_api_key = APIKeyHeader(name="MMT-ApiKey", auto_error=False,
                           description="the API key (translations) or the admin token "
                                       "(memories)")
MmtKeyDep = Annotated[str | None, Depends(mmt_api_key)]


async def get_modernmt_memories(request: Request) -> ModernMTMemories:
    directions = getattr(request.app.state, "directions", None)
    if directions is None:
        raise NotReady("the server is starting: no direction is served yet")
    return ModernMTMemories(directions, request.app.state.memory_imports)


async def require_memory_key(settings: SettingsDep, key: MmtKeyDep,
                             access: AccessDep) -> None:
    """Memory calls: the admin token in `MMT-ApiKey` (401 without one, 403 when wrong or
    when admin is off); a tenant admin's API key there manages its tenant's memories."""
    token = settings.admin_secret()
    if token is None:
        raise ModernMTError(403, "memories need the admin API: set NMT_ADMIN_TOKEN and "
                                 "send it as MMT-ApiKey")
    if not key:
        raise ModernMTError(401, "memory calls need the admin token in the MMT-ApiKey "
                                 "header")
    if hmac.compare_digest(key.encode(), token.encode()):
        enter_scope(OPERATOR)
    elif await access.admin_scope(key) is None:
        raise ModernMTError(403, "the MMT-ApiKey is not the admin token")


MmtMemoriesDep = Annotated[ModernMTMemories, Depends(get_modernmt_memories)]
MemoryKeyDep = Annotated[None, Depends(require_memory_key)]
