"""What each tenant owns, as every request's scope needs it: the registry's tenants and
`tenant_resources` rows held in memory and reread when older than `cache_s` (a claim
made on this replica is seen here at once, on others within that time)."""

from __future__ import annotations

import asyncio
import threading
import time

from model_store import Registry
from server.core.tenancy import Kind, Owners, Role, TenantScope


class OwnerBook:
    def __init__(self, registry: Registry, *, cache_s: float) -> None:
        self.registry = registry
        self.cache_s = cache_s
        self._owners: dict[tuple[str, str], str] = {}
        self._tenants: frozenset[str] = frozenset()
        self._read_at = -float("inf")
        self._lock = threading.Lock()

    async def scope(self, tenant: str | None, role: Role) -> TenantScope:
        """A request's scope, with what every tenant owns (reread first when the copy in
        memory is older than `cache_s`)."""
        if time.monotonic() - self._read_at >= self.cache_s:
            await asyncio.to_thread(self.reread)
        return TenantScope(tenant, role, self._owners, self._tenants)

    @property
    def owners(self) -> Owners:
        return self._owners

    def reread(self) -> None:
        started = time.monotonic()
        tenants = frozenset(self.registry.list_tenants())
        owners = {(r.kind, r.name): r.tenant for r in self.registry.tenant_resources()}
        with self._lock:
            self._owners, self._tenants, self._read_at = owners, tenants, started

    def forget(self) -> None:
        """Reread at the next request (a tenant was added here)."""
        self._read_at = -float("inf")

    def claim(self, kind: Kind, name: str, tenant: str) -> None:
        """Record (in the registry and here) that `tenant` owns `kind` `name`."""
        self.registry.claim_resource(kind, name, tenant)
        with self._lock:
            self._owners = {**self._owners, (kind, name): tenant}

    def release(self, kind: Kind, name: str) -> bool:
        released = self.registry.release_resource(kind, name)
        with self._lock:
            self._owners = {k: v for k, v in self._owners.items() if k != (kind, name)}
        return released
