"""The ModernMT door's own dependencies (the native ones are server/api/deps.py's).
ModernMT authenticates with the `MMT-ApiKey` header: it is the API key of translations
(NMT_ACCESS__API_KEYS, when keys are on) and, for the memories, the admin token
(NMT_ADMIN_TOKEN) or a tenant admin's key: memories are an admin matter on the native
API too.

ModernMT's clients hold one key for both (Weblate translates and syncs its glossaries as
memories with the key of its ModernMT service), so where the door's memory calls are
served (the main port, or the admin listener with NMT_ADMIN_PORT) the admin token also
translates, as the operator: no API key is looked up and no key's limits apply. On a
public port whose memory calls moved to the admin listener it is refused like any
unknown key, so that port never tells whether a guess is the admin token."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader
from starlette.routing import NoMatchFound

from server.access import AccessGuard
from server.api.deps import AccessDep, SettingsDep
from server.api.modernmt.errors import ModernMTError
from server.api.modernmt.memories import ModernMTMemories
from server.core.errors import NotReady
from server.core.tenancy import OPERATOR, enter_scope
from server.settings import Settings

MEMORY_LISTING = "modernmt_memories"  # the name of the door's GET /memories route

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
    if settings.admin_secret() is None:
        raise ModernMTError(403, "memories need the admin API: set NMT_ADMIN_TOKEN and "
                                 "send it as MMT-ApiKey")
    if not key:
        raise ModernMTError(401, "memory calls need the admin token in the MMT-ApiKey "
                                 "header")
    if is_admin_token(settings, key):
        enter_scope(OPERATOR)
    elif await access.admin_scope(key) is None:
        raise ModernMTError(403, "the MMT-ApiKey is not the admin token")


def is_admin_token(settings: Settings, key: str | None) -> bool:
    token = settings.admin_secret()
    return bool(key) and token is not None and hmac.compare_digest(
        (key or "").encode(), token.encode())


def serves_memories(request: Request) -> bool:
    """Whether the app that received `request` serves the door's memory calls (the
    public port's answer that they moved is another route)."""
    try:
        request.app.url_path_for(MEMORY_LISTING)
    except NoMatchFound:
        return False
    return True


async def admit_translation(request: Request, settings: Settings, access: AccessGuard,
                            key: str | None, *, chars: int) -> None:
    """A translation call: the admin token where memories are managed, else an API key
    (server/access: 401 without one when keys are on, 403 refused, 429/413 limits)."""
    if is_admin_token(settings, key) and serves_memories(request):
        enter_scope(OPERATOR)
        return
    await access.check(key, chars=chars, field="MMT-ApiKey")


MmtMemoriesDep = Annotated[ModernMTMemories, Depends(get_modernmt_memories)]
MemoryKeyDep = Annotated[None, Depends(require_memory_key)]
