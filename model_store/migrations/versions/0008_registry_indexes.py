"""registry indexes: lookups by kind and name, and the default backbone, at 10,000 modules

Revision ID: 0008
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a call that names no backbone finds a name's owner by (kind, name); every call finds
    # the default backbone, the oldest row of kind "backbone": both scanned the table
    op.create_index("ix_artifacts_kind_name", "artifacts", ["kind", "name", "created_at"])
    op.create_index("ix_artifacts_kind_created", "artifacts", ["kind", "created_at", "name"])
    op.create_index("ix_active_kind_name", "active", ["kind", "name", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_active_kind_name", table_name="active")
    op.drop_index("ix_artifacts_kind_created", table_name="artifacts")
    op.drop_index("ix_artifacts_kind_name", table_name="artifacts")
