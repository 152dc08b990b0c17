"""tenants: tenants, the tenant and role of API keys, and what each tenant owns

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ROLES = ("member", "admin")
KINDS = ("domain", "glossary", "memory")


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "tenant_keys",
        sa.Column("key_id", sa.String(36), primary_key=True),
        sa.Column("tenant", sa.String(32), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.CheckConstraint("role IN (" + ", ".join(f"'{r}'" for r in ROLES) + ")",
                           name="ck_tenant_keys_role"),
    )
    op.create_index("ix_tenant_keys_tenant", "tenant_keys", ["tenant"])
    op.create_table(
        "tenant_resources",
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("tenant", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.CheckConstraint("kind IN (" + ", ".join(f"'{k}'" for k in KINDS) + ")",
                           name="ck_tenant_resources_kind"),
    )
    op.create_index("ix_tenant_resources_tenant", "tenant_resources", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_tenant_resources_tenant", "tenant_resources")
    op.drop_table("tenant_resources")
    op.drop_index("ix_tenant_keys_tenant", "tenant_keys")
    op.drop_table("tenant_keys")
    op.drop_table("tenants")
