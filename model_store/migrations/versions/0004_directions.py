"""directions: modules, classifiers, activations, jobs and glossaries belong to a backbone

Revision ID: 0004
Revises: 0003

Every existing row is kept. A module or classifier row gets the name of the backbone whose
fingerprint it carries (the backbone it was built for); a row whose backbone is not in the
registry, and every job, event and glossary, gets the registry's default backbone (the
oldest one registered, as `Registry.default_backbone` picks it), or "" when the registry
holds no backbone. A job whose config names its backbone (`config.backbone.name`) keeps
that one. Backbone rows have "" (a backbone belongs to no other).
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SCOPED = ("module", "classifier")


def upgrade() -> None:
    conn = op.get_bind()
    default = conn.execute(sa.text(
        "SELECT name FROM artifacts WHERE kind = 'backbone' ORDER BY created_at, name "
        "LIMIT 1")).scalar() or ""
    # The rows move with INSERT ... SELECT, so values never leave the database (SQLite
    # keeps datetimes as text that its DateTime type would not read back in).
    _recreate("artifacts", [
        sa.Column("backbone", sa.String(64), primary_key=True, server_default=""),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("manifest_json", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    ], fill=(
        "COALESCE((SELECT b.name FROM artifacts b WHERE b.kind = 'backbone' "
        "AND b.fingerprint = artifacts.fingerprint ORDER BY b.created_at, b.name LIMIT 1), "
        ":default)"), default=default)
    _recreate("active", [
        sa.Column("backbone", sa.String(64), primary_key=True, server_default=""),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    ], fill=(
        "COALESCE((SELECT a.backbone FROM artifacts_0004 a WHERE a.kind = active.kind "
        "AND a.name = active.name AND a.version = active.version), :default)"),
        default=default)
    _recreate("glossaries", [
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("entries_json", sa.Text, nullable=False),
        sa.Column("backbone", sa.String(64), nullable=False, server_default=""),
        sa.Column("default_for", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("backbone", "default_for",
                            name="uq_glossaries_backbone_default_for"),
    ], fill=":default", default=default, scoped_only=False)
    for table in ("artifacts", "active", "glossaries"):
        op.drop_table(table)
        op.rename_table(f"{table}_0004", table)
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("backbone", sa.String(64), nullable=False, server_default=""))
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("backbone", sa.String(64), nullable=False, server_default=""))
    for job in conn.execute(sa.text("SELECT id, config_json FROM jobs")).all():
        named = (json.loads(job.config_json).get("backbone") or {}).get("name")
        conn.execute(sa.text("UPDATE jobs SET backbone = :b WHERE id = :i"),
                     {"b": str(named or default), "i": job.id})
    conn.execute(sa.text("UPDATE events SET backbone = :b WHERE kind IN ('module', "
                         "'classifier')"), {"b": default})


def _recreate(table: str, columns: list[sa.Column[Any] | sa.UniqueConstraint], *,
              fill: str, default: str, scoped_only: bool = True) -> None:
    """Copy `table` into `<table>_0004` (the new shape, renamed into place by the caller),
    its `backbone` computed by the SQL expression `fill` for modules and classifiers
    (`scoped_only`) or every row. A new table, not ALTERs: the primary key changes, which
    SQLite cannot alter."""
    op.create_table(f"{table}_0004", *columns)
    names = [c.name for c in columns if isinstance(c, sa.Column) and c.name != "backbone"]
    listed = ", ".join(names)
    expression = fill if not scoped_only else (
        f"CASE WHEN {table}.kind IN ('module', 'classifier') THEN {fill} ELSE '' END")
    op.get_bind().execute(sa.text(
        f"INSERT INTO {table}_0004 (backbone, {listed}) "
        f"SELECT {expression}, {listed} FROM {table}"), {"default": default})


def downgrade() -> None:
    raise NotImplementedError("revision 0004 (directions) is not reversible: restore the "
                              "backup taken before the upgrade")
