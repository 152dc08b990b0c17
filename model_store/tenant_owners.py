"""Who owns a row's resource, in SQL: the registry's side of `TenantScope.owner`
(server/core/tenancy.py), so that an admin list filters by tenant in its WHERE clause and
reads a page through an index instead of reading the whole table to filter it in Python.

A resource's owner is the tenant it was given to (`tenant_resources`), else the tenant its
name's prefix names (`acme-legal`: tenant `acme`, when that tenant exists), else none: it
is shared. Both are primary-key lookups per row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Integer, case, func, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from .tables import tenant_resources, tenants


class first_position(FunctionElement[int]):  # noqa: N801 (an SQL function, named as one)
    """`first_position(text, part)`: the 1-based position of `part`'s first occurrence in
    `text`, 0 when it does not occur (SQLite's `instr`, PostgreSQL's `strpos`)."""

    type = Integer()
    inherit_cache = True
    name = "first_position"


@compiles(first_position)
def _instr(element: first_position, compiler: SQLCompiler, **kw: Any) -> str:
    return f"instr({compiler.process(element.clauses, **kw)})"


@compiles(first_position, "postgresql")
def _strpos(element: first_position, compiler: SQLCompiler, **kw: Any) -> str:
    return f"strpos({compiler.process(element.clauses, **kw)})"


def owner_of(kind: str, name: ColumnElement[str]) -> ColumnElement[str | None]:
    """The tenant that owns resource `kind` `name` (a column of the listed table), NULL
    when it is shared."""
    given = (select(tenant_resources.c.tenant)
             .where(tenant_resources.c.kind == kind, tenant_resources.c.name == name)
             .scalar_subquery())
    dash = first_position(name, "-")
    # no dash, no prefix (PostgreSQL refuses substr's negative length, so never ask)
    prefix = case((dash > 1, func.substr(name, 1, dash - 1)))
    named = select(tenants.c.name).where(tenants.c.name == prefix).scalar_subquery()
    owner: ColumnElement[str | None] = func.coalesce(given, named)
    return owner


def seen_by(kind: str, name: ColumnElement[str], tenant: str | None) -> ColumnElement[bool]:
    """Rows whose resource `tenant` sees: the shared ones and its own (None: a caller of
    no tenant, who sees the shared ones only)."""
    owner = owner_of(kind, name)
    if tenant is None:
        return owner.is_(None)
    return func.coalesce(owner, tenant) == tenant


def owned_by(kind: str, name: ColumnElement[str], tenant: str | None) -> ColumnElement[bool]:
    """Rows whose resource `tenant` owns (None: the shared ones)."""
    owner = owner_of(kind, name)
    return owner.is_(None) if tenant is None else owner == tenant
