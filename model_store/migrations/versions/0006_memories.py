"""memories: translation memories, their pairs, their change feed and import jobs

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

STATES = ("queued", "running", "done", "failed")


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("backbone", sa.String(64), nullable=False, server_default=""),
        sa.Column("domain", sa.String(64), nullable=True),
        sa.Column("owner", sa.String(64), nullable=False, server_default="shared"),
        sa.Column("source_lang", sa.String(16), nullable=False, server_default=""),
        sa.Column("target_lang", sa.String(16), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("backbone", "name", name="uq_memories_backbone_name"),
        sa.UniqueConstraint("backbone", "domain", name="uq_memories_backbone_domain"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "memory_pairs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("memory_id", sa.Integer, nullable=False),
        sa.Column("tuid", sa.String(255), nullable=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("source_key", sa.String(64), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("attributes_json", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_memory_pairs_memory_key", "memory_pairs", ["memory_id", "source_key"])
    op.create_index("ix_memory_pairs_memory_tuid", "memory_pairs", ["memory_id", "tuid"])
    op.create_table(
        "memory_changes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("memory_id", sa.Integer, nullable=False),
        sa.Column("pair_id", sa.Integer, nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("at", sa.DateTime, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "memory_imports",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("memory_id", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("progress", sa.Float, nullable=False),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("filename", sa.String(255), nullable=False, server_default=""),
        sa.Column("report_json", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in STATES) + ")",
                           name="ck_memory_imports_state"),
    )
    op.create_index("ix_memory_imports_memory", "memory_imports", ["memory_id"])


def downgrade() -> None:
    op.drop_index("ix_memory_imports_memory", "memory_imports")
    op.drop_table("memory_imports")
    op.drop_table("memory_changes")
    op.drop_index("ix_memory_pairs_memory_tuid", "memory_pairs")
    op.drop_index("ix_memory_pairs_memory_key", "memory_pairs")
    op.drop_table("memory_pairs")
    op.drop_table("memories")
