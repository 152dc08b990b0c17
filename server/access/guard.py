"""`AccessGuard.check`: is this API key allowed to send this request now?

With `NMT_ACCESS__API_KEYS` off (the default) every request passes and nothing is looked
up. With it on, a public request needs a key that the registry knows and has not revoked,
and the key's allowance of requests and characters per minute (its own limits, or the
server's defaults) must cover it. Looked-up keys are cached for `cache_s` seconds, so a
revocation reaches other replicas within that time (this replica forgets at once).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from model_store import Registry
from model_store.api_keys import ApiKeyRecord
from model_store.tenant_rows import TenantKey
from server.access.keys import hash_key
from server.access.limiter import RateLimiter
from server.access.owners import OwnerBook
from server.core.errors import Forbidden, RateLimited, TooLarge, Unauthorized
from server.core.metrics import Metrics
from server.core.settings import AccessSettings
from server.core.tenancy import TenantScope, enter_scope, tenant_bucket
from server.scheduling.clients import identify

Found = tuple[ApiKeyRecord, TenantKey | None]  # a key and its tenant


@dataclass(frozen=True)
class KeyIdentity:
    """Who a request came from: the key's id and name (never the key), its tenant."""

    id: str
    name: str
    tenant: str | None = None
    role: str = "member"


class AccessGuard:
    def __init__(self, registry: Registry, settings: AccessSettings, *,
                 metrics: Metrics) -> None:
        self.registry = registry
        self.settings = settings
        self.metrics = metrics
        self.limiter = RateLimiter()
        self.owners = OwnerBook(registry, cache_s=settings.cache_s)
        self._cache: dict[str, tuple[float, Found | None]] = {}  # hash -> (when, found)

    @property
    def enabled(self) -> bool:
        return self.settings.api_keys

    async def check(self, key: str | None, *, chars: int, field: str = "X-API-Key"
                    ) -> KeyIdentity | None:
        """Admit one request of `chars` characters sent with `key` (None: no key).

        Returns the key's identity (None when keys are off). Raises `Unauthorized` (401)
        without a key, `Forbidden` (403) for an unknown or revoked key, `RateLimited`
        (429, `retry_after`) when the key's per-minute allowance is used up, `TooLarge`
        (413) when the request alone exceeds it. `field` names where the key was expected
        (a header or a form field) in the messages. The rest of the request is served in
        the key's tenant scope (server/core/tenancy.py). A key makes the request that key's
        client (its fair share: server/scheduling/clients.py), whether keys are on or off."""
        identify(key)
        if not self.enabled:
            enter_scope(await self.owners.scope(None, "shared"))
            return None
        if not key:
            self._count("missing")
            raise Unauthorized(f"an API key is required: send it in {field}", field=field)
        found = await self._lookup(hash_key(key))
        if found is None or not found[0].active:
            self._count("refused")
            raise Forbidden("the API key is not valid (unknown or revoked)", field=field)
        record, tenant = found
        settings = self.settings
        refusal = self.limiter.take(
            record.id, chars=chars,
            requests_per_minute=record.requests_per_minute or settings.requests_per_minute,
            chars_per_minute=record.chars_per_minute or settings.chars_per_minute)
        if refusal is not None:
            self._count("rate_limited")
            self.metrics.rate_limited.labels(limit=refusal.limit).inc()
            if refusal.never:
                raise TooLarge(refusal.message)
            raise RateLimited(refusal.message, retry_after=refusal.retry_after_s)
        self._count("accepted")
        enter_scope(await self.owners.scope(
            tenant.tenant if tenant else None,
            "shared" if tenant is None else "admin" if tenant.role == "admin" else "member"))
        self.metrics.tenant_requests.labels(
            tenant=tenant_bucket(tenant.tenant if tenant else None)).inc()
        return KeyIdentity(record.id, record.name, tenant.tenant if tenant else None,
                           tenant.role if tenant else "member")

    async def scope_of(self, key: str | None) -> TenantScope:
        """The scope of a request that only reads lists (languages, domains): its key's
        tenant's when it sends a valid key, else the shared one; charges nothing."""
        found = await self._lookup(hash_key(key)) if key and self.enabled else None
        tenant = found[1] if found is not None and found[0].active else None
        scope = await self.owners.scope(tenant.tenant if tenant else None,
                                        "member" if tenant else "shared")
        enter_scope(scope)
        return scope

    async def usage(self, key: str | None) -> tuple[int, int] | None:
        """(characters in use, the key's characters per minute) for an admitted key; None
        when keys are off. Call `check` first: it refuses unknown keys."""
        if not self.enabled or not key:
            return None
        found = await self._lookup(hash_key(key))
        if found is None:
            return None
        record = found[0]
        limit = record.chars_per_minute or self.settings.chars_per_minute
        return self.limiter.used(record.id, chars_per_minute=limit), limit

    def forget(self, record: ApiKeyRecord) -> None:
        """A key changed here (revoked): drop what this replica cached about it."""
        self._cache.pop(record.key_hash, None)
        self.limiter.forget(record.id)

    async def _lookup(self, key_hash: str) -> Found | None:
        now = time.monotonic()
        cached = self._cache.get(key_hash)
        if cached is not None and now - cached[0] < self.settings.cache_s:
            return cached[1]
        found = await asyncio.to_thread(self._find, key_hash)
        if found is not None or len(self._cache) < MAX_CACHED_UNKNOWN:
            self._cache[key_hash] = (now, found)
        return found

    def _find(self, key_hash: str) -> Found | None:
        record = self.registry.find_api_key(key_hash)
        if record is None:
            return None
        return record, self.registry.tenant_key(record.id)

    async def admin_scope(self, key: str) -> TenantScope | None:
        """The scope of a tenant admin's key sent as the admin bearer token (None: not an
        active key of a tenant's admin)."""
        found = await self._lookup(hash_key(key))
        if found is None or not found[0].active or found[1] is None \
                or found[1].role != "admin":
            return None
        scope = await self.owners.scope(found[1].tenant, "admin")
        enter_scope(scope)
        return scope

    def _count(self, outcome: str) -> None:
        self.metrics.access.labels(outcome=outcome).inc()


MAX_CACHED_UNKNOWN = 10_000  # unknown keys are cached only while the cache is this small
