"""What each tenant owns, as every request's scope needs it: the registry's tenants and
`tenant_resources` rows held in memory and brought up to date when older than `cache_s`
(a claim made on this replica is seen here at once, on others within that time).

The first read takes every owned resource; later ones read only the claims and releases
logged since (`tenant_resource_changes`, by increasing id), so a reread costs the same at
10 or 10,000 owned modules. On PostgreSQL a writer may take an id before another and
commit after it: each reread starts `OVERLAP` ids back, and applying a change twice, in
order, leaves the same owners."""

from __future__ import annotations

import asyncio
import threading
import time

from model_store import Registry
from server.core.tenancy import Kind, Owners, Role, TenantScope

OVERLAP = 64  # ids reread before the last one seen (late commits, see above)


class OwnerBook:
    def __init__(self, registry: Registry, *, cache_s: float) -> None:
        self.registry = registry
        self.cache_s = cache_s
        self._owners: dict[tuple[str, str], str] = {}
        self._tenants: frozenset[str] = frozenset()
        self._read_at = -float("inf")
        self._seen: int | None = None  # the last change read (None: nothing read yet)
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
        if self._seen is None:
            seen = self.registry.last_resource_change()  # before the rows: none is missed
            owners = {(r.kind, r.name): r.tenant for r in self.registry.tenant_resources()}
            with self._lock:
                self._owners, self._tenants, self._read_at = owners, tenants, started
                self._seen = seen
            return
        changes = self.registry.resource_changes(max(0, self._seen - OVERLAP))
        latest: dict[tuple[str, str], str | None] = {}
        for change in changes:  # oldest first: the last change of a resource stands
            latest[(change.kind, change.name)] = change.tenant
        with self._lock:
            if any(self._owners.get(key) != tenant for key, tenant in latest.items()):
                owners = dict(self._owners)  # scopes hold the old mapping: never mutate it
                for key, tenant in latest.items():
                    if tenant is None:
                        owners.pop(key, None)
                    else:
                        owners[key] = tenant
                self._owners = owners
            self._tenants, self._read_at = tenants, started
            self._seen = max([self._seen, *(change.id for change in changes)])

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
