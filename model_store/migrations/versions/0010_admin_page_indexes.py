"""admin page indexes: keys and jobs paged oldest first by (created_at, id), and a page
of memories reading only its memories' latest changes

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # /admin/keys and /admin/jobs read `limit` rows past a (created_at, id) cursor: without
    # these each page sorted the whole table; glossaries and memories page by their keys
    op.create_index("ix_api_keys_created", "api_keys", ["created_at", "id"])
    op.create_index("ix_jobs_created", "jobs", ["created_at", "id"])
    op.create_index("ix_memory_changes_memory", "memory_changes", ["memory_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_memory_changes_memory", table_name="memory_changes")
    op.drop_index("ix_jobs_created", table_name="jobs")
    op.drop_index("ix_api_keys_created", table_name="api_keys")
