"""memory gates: each memory's calibrated gate per module and backbone, shared by the
replicas and kept across restarts

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_gates",
        sa.Column("memory_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("module_id", sa.String(160), primary_key=True, server_default=""),
        sa.Column("backbone_fingerprint", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("pairs", sa.Integer, nullable=False),
        sa.Column("gate", sa.Float, nullable=False),
        sa.Column("off", sa.Float, nullable=False),
        sa.Column("scores_json", sa.Text, nullable=False),
        sa.Column("held_out", sa.Integer, nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_memory_gates_backbone", "memory_gates", ["backbone_fingerprint"])


def downgrade() -> None:
    op.drop_index("ix_memory_gates_backbone", table_name="memory_gates")
    op.drop_table("memory_gates")
