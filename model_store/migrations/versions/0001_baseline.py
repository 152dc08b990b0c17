"""baseline: artifacts, active versions, training jobs, events

Revision ID: 0001
Revises:

The registry as every release before migrations created it (from the metadata, without a
revision table). Such registries hold exactly these tables: `upgrade_schema` stamps them
with this revision instead of running it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JOB_STATES = ("queued", "running", "evaluating", "published", "failed")


def upgrade() -> None:
    op.create_table(
        "artifacts",
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("manifest_json", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "active",
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("domain", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("progress", sa.Float, nullable=False),
        sa.Column("loss", sa.Float, nullable=True),
        sa.Column("scores_json", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("config_json", sa.Text, nullable=False),
        sa.Column("data_location", sa.Text, nullable=False),
        sa.Column("worker", sa.String(128), nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.Column("heartbeat_at", sa.DateTime, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("result_json", sa.Text, nullable=True),
        sa.CheckConstraint(
            "state IN (" + ", ".join(f"'{s}'" for s in JOB_STATES) + ")", name="ck_jobs_state"
        ),
    )
    op.create_index("ix_jobs_state_created", "jobs", ["state", "created_at"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer, nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("at", sa.DateTime, nullable=False),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    for table in ("events", "jobs", "active", "artifacts"):
        op.drop_table(table)
