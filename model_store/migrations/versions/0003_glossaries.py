"""glossaries: named term lists that requests use by glossary_id or as a domain's default

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "glossaries",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("entries_json", sa.Text, nullable=False),
        sa.Column("default_for", sa.String(64), nullable=True, unique=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("glossaries")
