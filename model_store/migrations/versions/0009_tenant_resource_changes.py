"""tenant resource changes: every claim and release in order, so that a server's owner
book reads what changed since its last read instead of every owned resource

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    changes = op.create_table(
        "tenant_resource_changes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(32), nullable=True),
        sa.Column("at", sa.DateTime, nullable=False),
        sqlite_autoincrement=True,
    )
    # what is owned already: the first changes, so the log alone rebuilds the owners
    owned = sa.table("tenant_resources", sa.column("kind"), sa.column("name"),
                     sa.column("tenant"))
    rows = op.get_bind().execute(sa.select(owned.c.kind, owned.c.name, owned.c.tenant)
                                 .order_by(owned.c.kind, owned.c.name)).all()
    now = datetime.now(UTC).replace(tzinfo=None)
    if rows:
        op.bulk_insert(changes, [{"kind": kind, "name": name, "tenant": tenant, "at": now}
                                 for kind, name, tenant in rows])


def downgrade() -> None:
    op.drop_table("tenant_resource_changes")
