"""corrections: post-edits of machine output, the input of domain refreshes

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

STATES = ("accepted", "pending", "approved", "rejected")


def upgrade() -> None:
    op.create_table(
        "corrections",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("machine", sa.Text, nullable=True),
        sa.Column("corrected", sa.Text, nullable=False),
        sa.Column("domain", sa.String(64), nullable=True),
        sa.Column("routed", sa.String(64), nullable=True),
        sa.Column("direction", sa.String(16), nullable=False),
        sa.Column("backbone", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(36), nullable=True),
        sa.Column("key_name", sa.String(64), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
        sa.Column("used_in", sa.Integer, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("reviewed_at", sa.DateTime, nullable=True),
        sa.CheckConstraint("status IN (" + ", ".join(f"'{s}'" for s in STATES) + ")",
                           name="ck_corrections_status"),
    )
    op.create_index("ix_corrections_domain_status", "corrections", ["domain", "status"])
    op.create_index("ix_corrections_key", "corrections", ["key_id"])


def downgrade() -> None:
    op.drop_index("ix_corrections_key", "corrections")
    op.drop_index("ix_corrections_domain_status", "corrections")
    op.drop_table("corrections")
