"""Whose request this is: the tenant scope every floor reads (docs/API.md, "Tenants").

A tenant owns API keys and named resources (domains, glossaries, memories); a resource no
tenant owns is shared. A request's scope says which tenant sent it and what each tenant
owns, so any floor can ask "may this request see domain X?" without the registry. The
front doors enter the scope once per request (`AccessGuard.check`, the admin check); the
serving layers read it with `current_scope()`. Work that no request started (reloads,
refreshes, the operator's admin calls) runs in `OPERATOR`, which sees everything.

Another tenant's resource is treated exactly as one that does not exist (404 and the
same message), so a key cannot learn that it exists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from server.core.errors import Forbidden, NotFound

Kind = Literal["domain", "glossary", "memory"]
Role = Literal["shared", "member", "admin", "operator"]
Owners = Mapping[tuple[str, str], str]  # (kind, name) -> tenant; absent: shared
V = TypeVar("V")
METRIC_BUCKETS = 16  # tenants share this many metric label values (bounded cardinality)
TENANT_NAME = r"^[a-z0-9]{1,24}$"  # no "-": a tenant's names start with "<tenant>-"


@dataclass(frozen=True)
class TenantScope:
    """`tenant`: the request's tenant (None: a key of no tenant, or no key: it sees the
    shared resources only). `role`: "operator" sees and manages everything, "admin"
    manages its tenant's resources, "member" uses them, "shared" has no tenant."""

    tenant: str | None
    role: Role
    owners: Owners = field(default_factory=dict, compare=False)
    tenants: frozenset[str] = field(default_factory=frozenset, compare=False)

    @property
    def operator(self) -> bool:
        return self.role == "operator"

    def owner(self, kind: Kind, name: str) -> str | None:
        """The tenant that owns `kind` `name`: the one it was given to, else the tenant
        its name's prefix names (`acme-legal`: tenant `acme`), else None (shared)."""
        owner = self.owners.get((kind, name))
        if owner is not None:
            return owner
        prefix, dash, _ = name.partition("-")
        return prefix if dash and prefix in self.tenants else None

    def sees(self, kind: Kind, name: str) -> bool:
        if self.operator or not self.tenants:
            return True
        owner = self.owner(kind, name)
        return owner is None or owner == self.tenant

    def visible(self, kind: Kind, named: Mapping[str, V]) -> Mapping[str, V]:
        """`named` without what another tenant owns (the same mapping when all is seen)."""
        if self.operator or not self.tenants:
            return named
        return {name: value for name, value in named.items() if self.sees(kind, name)}

    def visible_names(self, kind: Kind, names: Iterable[str]) -> list[str]:
        return [name for name in names if self.sees(kind, name)]

    def follows(self, tenant: str | None) -> bool:
        """May this request follow a job that a request of `tenant` started (a document,
        a batch, a memory import, a training job)? The operator follows every job; any
        other scope only its own tenant's (None: those of keys of no tenant). A job of
        another is answered as an unknown id."""
        return self.operator or tenant == self.tenant

    def follows_job_of(self, kind: Kind, name: str) -> bool:
        """`follows` for a job tied to a resource (a memory's import, a domain's
        training): only the resource's owner (or, for a shared one, a scope of no
        tenant) can have started it."""
        return self.follows(self.owner(kind, name) if self.tenants else self.tenant)

    def check_manages(self, kind: Kind, name: str) -> None:
        """May this request change (or create) `kind` `name`? A tenant's key changes its
        tenant's own: 404 for a name of another tenant's prefix (as for one that does not
        exist), 403 for a shared one or a new name outside its prefix (`<tenant>-`). A
        key of no tenant changes shared ones, as before tenants."""
        if self.operator:
            return
        owner = self.owner(kind, name)
        # decided by the name alone, never by whether it exists: another tenant's prefix
        # is a 404 whether or not the resource is there; any other name outside the
        # tenant's prefix a 403, whoever was given it
        if owner is not None and owner != self.tenant \
                and name.startswith(tenant_prefix(owner)):
            raise NotFound(f"{kind} {name[:64]!r} does not exist")
        if owner != self.tenant and self.tenant is not None \
                and not name.startswith(tenant_prefix(self.tenant)):
            raise Forbidden(f"shared {kind}s are managed by the operator; the names of "
                            f"tenant {self.tenant!r} start with "
                            f"{tenant_prefix(self.tenant)!r}")

    def own_name(self, name: str) -> str:
        """The name a tenant's new resource is stored under: prefixed with `<tenant>-`
        (unless it is), so tenants' names never collide and a taken name reveals
        nothing."""
        if self.tenant is None or name.startswith(tenant_prefix(self.tenant)):
            return name
        return tenant_prefix(self.tenant) + name

    def metric_label(self, kind: Kind, name: str) -> str:
        """`name` as a metric label: a tenant's resource is counted under its tenant's
        bucket, so the label values stay bounded however many tenants there are."""
        owner = self.owner(kind, name) if self.tenants else None
        return name if owner is None else tenant_bucket(owner)


def tenant_prefix(tenant: str) -> str:
    return f"{tenant}-"


def tenant_bucket(tenant: str | None) -> str:
    """One of METRIC_BUCKETS label values for a tenant ("shared" for none): stable across
    processes (a hash of the name, not Python's salted hash)."""
    if tenant is None:
        return "shared"
    digest = hashlib.sha256(tenant.encode()).digest()
    return f"tenant-{int.from_bytes(digest[:4], 'big') % METRIC_BUCKETS:02d}"


OPERATOR = TenantScope(None, "operator")
_current: ContextVar[TenantScope] = ContextVar("nmt_tenant_scope", default=OPERATOR)


def current_scope() -> TenantScope:
    """The scope of the request being served (OPERATOR outside any request)."""
    return _current.get()


def enter_scope(scope: TenantScope) -> None:
    """Serve the rest of this request (its task and what it starts) in `scope`."""
    _current.set(scope)
