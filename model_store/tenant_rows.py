"""Tenants in the registry (tables `tenants`, `tenant_keys`, `tenant_resources`): a mixin
of `Registry`. A tenant owns API keys (each with a role) and resources named by kind and
name; a resource no tenant owns is shared (server/tenancy reads these rows)."""

from __future__ import annotations

from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from .errors import ConflictError, NotFoundError
from .tables import tenant_keys, tenant_resource_changes, tenant_resources, tenants


@dataclass(frozen=True)
class TenantKey:
    key_id: str
    tenant: str
    role: str  # "member" or "admin"


@dataclass(frozen=True)
class TenantResource:
    kind: str  # "domain", "glossary" or "memory"
    name: str
    tenant: str


@dataclass(frozen=True)
class ResourceChange:
    id: int  # increasing: read the changes past the last one seen
    kind: str
    name: str
    tenant: str | None  # None: released (shared again)


class TenantRows:
    """Registry rows of tenants, their keys and what they own: a mixin of `Registry`."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    def create_tenant(self, name: str) -> None:
        try:
            with self._write() as conn:
                conn.execute(insert(tenants).values(name=name, created_at=datetime.now(UTC)))
        except IntegrityError as exc:
            raise ConflictError(f"tenant {name!r} exists") from exc

    def list_tenants(self) -> list[str]:
        with self._read() as conn:
            return list(conn.execute(select(tenants.c.name).order_by(tenants.c.name))
                        .scalars())

    def has_tenant(self, name: str) -> bool:
        with self._read() as conn:
            found = conn.execute(select(tenants.c.name).where(tenants.c.name == name)).first()
        return found is not None

    def add_tenant_key(self, key_id: str, tenant: str, role: str) -> TenantKey:
        if not self.has_tenant(tenant):
            raise NotFoundError("tenant", tenant)
        with self._write() as conn:
            conn.execute(insert(tenant_keys).values(key_id=key_id, tenant=tenant, role=role))
        return TenantKey(key_id, tenant, role)

    def tenant_key(self, key_id: str) -> TenantKey | None:
        """The tenant and role of a key (None: a key of no tenant)."""
        with self._read() as conn:
            row = conn.execute(select(tenant_keys).where(tenant_keys.c.key_id == key_id)
                               ).mappings().first()
        return None if row is None else TenantKey(row["key_id"], row["tenant"], row["role"])

    def tenant_key_ids(self, tenant: str) -> set[str]:
        query = select(tenant_keys.c.key_id).where(tenant_keys.c.tenant == tenant)
        with self._read() as conn:
            return set(conn.execute(query).scalars())

    def resource_owner(self, kind: str, name: str) -> str | None:
        """The tenant owning `kind` `name` (given to it, or named with its `<tenant>-`
        prefix), None for a shared one: what server/core/tenancy.py's `owner` decides,
        for the sidecar, which has no request scope."""
        r = tenant_resources.c
        with self._read() as conn:
            given = conn.execute(select(r.tenant).where(r.kind == kind, r.name == name)
                                 ).scalar()
        if given is not None:
            return str(given)
        prefix, dash, _ = name.partition("-")
        return prefix if dash and self.has_tenant(prefix) else None

    def claim_resource(self, kind: str, name: str, tenant: str) -> TenantResource:
        """Make `tenant` own the resource (idempotent for its owner; ConflictError when
        another tenant owns it)."""
        if not self.has_tenant(tenant):
            raise NotFoundError("tenant", tenant)
        with self._write() as conn:
            owner = conn.execute(select(tenant_resources.c.tenant).where(
                tenant_resources.c.kind == kind, tenant_resources.c.name == name)).scalar()
            if owner is not None and owner != tenant:
                raise ConflictError(f"{kind} {name!r} belongs to another tenant")
            if owner is None:
                now = datetime.now(UTC)
                conn.execute(insert(tenant_resources).values(
                    kind=kind, name=name, tenant=tenant, created_at=now))
                conn.execute(insert(tenant_resource_changes).values(
                    kind=kind, name=name, tenant=tenant, at=now))
        return TenantResource(kind, name, tenant)

    def release_resource(self, kind: str, name: str) -> bool:
        """Make the resource shared again; False when no tenant owned it."""
        with self._write() as conn:
            gone = conn.execute(delete(tenant_resources).where(
                tenant_resources.c.kind == kind, tenant_resources.c.name == name))
            if gone.rowcount:
                conn.execute(insert(tenant_resource_changes).values(
                    kind=kind, name=name, tenant=None, at=datetime.now(UTC)))
        return bool(gone.rowcount)

    def tenant_resources(self) -> list[TenantResource]:
        """Every owned resource (what is not listed is shared)."""
        query = select(tenant_resources.c.kind, tenant_resources.c.name,
                       tenant_resources.c.tenant)
        with self._read() as conn:
            return [TenantResource(kind, name, tenant)
                    for kind, name, tenant in conn.execute(query)]

    def last_resource_change(self) -> int:
        """The id of the latest claim or release (0: none yet)."""
        with self._read() as conn:
            return int(conn.execute(select(func.max(tenant_resource_changes.c.id))).scalar()
                       or 0)

    def resource_changes(self, after: int) -> list[ResourceChange]:
        """The claims and releases with an id past `after`, oldest first (an index range
        on the primary key, however many resources are owned)."""
        c = tenant_resource_changes.c
        query = select(c.id, c.kind, c.name, c.tenant).where(c.id > after).order_by(c.id)
        with self._read() as conn:
            return [ResourceChange(*row) for row in conn.execute(query)]
