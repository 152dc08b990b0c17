"""Registry schema (SQLAlchemy Core, portable: SQLite by default, any SQL database works)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.types import TypeDecorator

JOB_STATES = ("queued", "running", "evaluating", "published", "failed")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps no zone: store naive UTC)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the registry; use UTC-aware datetimes")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


metadata = MetaData()

# Modules and classifiers belong to one backbone (a direction, docs/DIRECTIONS.md): their
# rows carry its name in `backbone`; a backbone's own rows have "" there. Revision 0004.
# An artifact is visible exactly when its row exists; the composite key arbitrates
# concurrent publishers of the same (backbone, kind, name).
artifacts = Table(
    "artifacts",
    metadata,
    Column("backbone", String(64), primary_key=True, server_default=""),
    Column("kind", String(16), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("location", Text, nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("manifest_json", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# Lookups by (kind, name) without a backbone, and the default backbone (the oldest row of
# kind "backbone"), read an index, not the table (revision 0008).
Index("ix_artifacts_kind_name", artifacts.c.kind, artifacts.c.name, artifacts.c.created_at)
Index("ix_artifacts_kind_created", artifacts.c.kind, artifacts.c.created_at, artifacts.c.name)

active = Table(
    "active",
    metadata,
    Column("backbone", String(64), primary_key=True, server_default=""),
    Column("kind", String(16), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_active_kind_name", active.c.kind, active.c.name, active.c.updated_at)

jobs = Table(
    "jobs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("domain", String(64), nullable=False),
    Column("backbone", String(64), nullable=False, server_default=""),
    Column("state", String(16), nullable=False),
    Column("progress", Float, nullable=False, default=0.0),
    Column("loss", Float, nullable=True),
    Column("scores_json", Text, nullable=False, default="{}"),
    Column("error", Text, nullable=True),
    Column("config_json", Text, nullable=False, default="{}"),
    Column("data_location", Text, nullable=False),
    Column("worker", String(128), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("heartbeat_at", UTCDateTime, nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("result_json", Text, nullable=True),
    CheckConstraint(
        "state IN (" + ", ".join(f"'{s}'" for s in JOB_STATES) + ")", name="ck_jobs_state"
    ),
)
Index("ix_jobs_state_created", jobs.c.state, jobs.c.created_at)
# The admin lists page oldest first by (created_at, id) (revision 0010).
Index("ix_jobs_created", jobs.c.created_at, jobs.c.id)

# sqlite_autoincrement: ids never reused, so "latest id changed" reliably means "something
# changed" for pollers.
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("name", String(64), nullable=False),
    Column("backbone", String(64), nullable=False, server_default=""),
    Column("version", Integer, nullable=True),
    Column("action", String(16), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    sqlite_autoincrement=True,
)

# API keys of the public endpoints (server/access): only a hash of each key is kept; the
# key itself is shown once, when it is created. Revoked keys stay, marked, for the record.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(64), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("requests_per_minute", Integer, nullable=True),
    Column("chars_per_minute", Integer, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime, nullable=True),
)
Index("ix_api_keys_created", api_keys.c.created_at, api_keys.c.id)  # pages (0010)

# Named glossaries (source -> target terms) that requests use by `glossary_id`;
# `default_for` names at most one domain of its backbone whose requests use it when they
# name none.
glossaries = Table(
    "glossaries",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("entries_json", Text, nullable=False),
    Column("backbone", String(64), nullable=False, server_default=""),
    Column("default_for", String(64), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("backbone", "default_for", name="uq_glossaries_backbone_default_for"),
)

# Post-edits of machine output (server/corrections): the source, what the server answered
# (when the client says), the corrected target, the domain it is for and the direction
# (and backbone) it was made with. `status`: "accepted" (sent with an API key), "pending"
# (anonymous: trains nothing until an admin approves it), "approved", "rejected".
# `fingerprint` (sha256 of direction, source and correction) refuses duplicates;
# `used_in` is the module version of the domain whose refresh trained on it.
CORRECTION_STATES = ("accepted", "pending", "approved", "rejected")
corrections = Table(
    "corrections",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("source", Text, nullable=False),
    Column("machine", Text, nullable=True),
    Column("corrected", Text, nullable=False),
    Column("domain", String(64), nullable=True),
    Column("routed", String(64), nullable=True),
    Column("direction", String(16), nullable=False),
    Column("backbone", String(64), nullable=False),
    Column("key_id", String(36), nullable=True),
    Column("key_name", String(64), nullable=True),
    Column("status", String(16), nullable=False),
    Column("fingerprint", String(64), nullable=False, unique=True),
    Column("used_in", Integer, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("reviewed_at", UTCDateTime, nullable=True),
    CheckConstraint("status IN (" + ", ".join(f"'{s}'" for s in CORRECTION_STATES) + ")",
                    name="ck_corrections_status"),
)
Index("ix_corrections_domain_status", corrections.c.domain, corrections.c.status)
Index("ix_corrections_key", corrections.c.key_id)

# Translation memories (server/memories): a memory belongs to one backbone (direction);
# `domain` names at most one domain of it whose requests use it, else it stands alone and
# requests name it. `owner` is "shared" until tenants exist. Ids are never reused (clients
# such as ModernMT's keep integer ids). Revision 0006.
memories = Table(
    "memories",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False),
    Column("backbone", String(64), nullable=False, server_default=""),
    Column("domain", String(64), nullable=True),
    Column("owner", String(64), nullable=False, server_default="shared"),
    Column("source_lang", String(16), nullable=False, server_default=""),
    Column("target_lang", String(16), nullable=False, server_default=""),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("backbone", "name", name="uq_memories_backbone_name"),
    UniqueConstraint("backbone", "domain", name="uq_memories_backbone_domain"),
    sqlite_autoincrement=True,
)

# One translation unit of a memory. `source_key` is what exact matching compares (the
# server's normalised source, hashed); `attributes_json` keeps a TMX unit's <prop>, <note>
# and attributes for export; `origin`: "import", "api" or "correction".
memory_pairs = Table(
    "memory_pairs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("memory_id", Integer, nullable=False),
    Column("tuid", String(255), nullable=True),
    Column("source", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("source_key", String(64), nullable=False),
    Column("origin", String(16), nullable=False),
    Column("attributes_json", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    sqlite_autoincrement=True,
)
Index("ix_memory_pairs_memory_key", memory_pairs.c.memory_id, memory_pairs.c.source_key)
Index("ix_memory_pairs_memory_tuid", memory_pairs.c.memory_id, memory_pairs.c.tuid)

# The memories' change feed that every replica follows: one row per pair written or
# removed (`pair_id`), or per whole memory changed ("reload": an import, "delete").
# Written in a serialized transaction, so ids grow in commit order.
memory_changes = Table(
    "memory_changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("memory_id", Integer, nullable=False),
    Column("pair_id", Integer, nullable=True),
    Column("action", String(16), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    sqlite_autoincrement=True,
)
# a page of memories reads its memories' latest changes, not the feed (revision 0010)
Index("ix_memory_changes_memory", memory_changes.c.memory_id, memory_changes.c.id)

# Each memory's gate calibrated from its own pairs (server/memories/calibrated_gates.py),
# per module it decodes with ("": the backbone alone) and per backbone (its fingerprint):
# shared by every replica and kept across restarts; with the memory's version and pair
# count it was calibrated on, which decide whether it still holds. Revision 0011.
memory_gates = Table(
    "memory_gates",
    metadata,
    Column("memory_id", Integer, primary_key=True, autoincrement=False),
    Column("module_id", String(160), primary_key=True, server_default=""),
    Column("backbone_fingerprint", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("pairs", Integer, nullable=False),
    Column("gate", Float, nullable=False),
    Column("off", Float, nullable=False),
    Column("scores_json", Text, nullable=False),
    Column("held_out", Integer, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
# a server loading a backbone reads its calibrations (server/serving/gate_calibrator.py)
Index("ix_memory_gates_backbone", memory_gates.c.backbone_fingerprint)

# Import jobs of memories (TMX, TSV, XLIFF): run by the server that accepted the upload;
# `report_json` counts the pairs imported and those skipped, by reason.
MEMORY_IMPORT_STATES = ("queued", "running", "done", "failed")
memory_imports = Table(
    "memory_imports",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("memory_id", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("progress", Float, nullable=False, default=0.0),
    Column("format", String(16), nullable=False),
    Column("mode", String(16), nullable=False),
    Column("filename", String(255), nullable=False, server_default=""),
    Column("report_json", Text, nullable=False, default="{}"),
    Column("error", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in MEMORY_IMPORT_STATES) + ")",
                    name="ck_memory_imports_state"),
)
Index("ix_memory_imports_memory", memory_imports.c.memory_id)

# Tenants (server/tenancy): a tenant owns API keys and named resources (domains, glossaries,
# memories); what no tenant owns is shared. `tenant_keys` gives a key its tenant and role
# ("member": uses the tenant's resources; "admin": also manages them); `tenant_resources`
# names what a tenant owns by kind and name (in every direction). Revision 0007.
TENANT_ROLES = ("member", "admin")
TENANT_KINDS = ("domain", "glossary", "memory")
tenants = Table(
    "tenants",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
)
tenant_keys = Table(
    "tenant_keys",
    metadata,
    Column("key_id", String(36), primary_key=True),
    Column("tenant", String(32), nullable=False),
    Column("role", String(16), nullable=False),
    CheckConstraint("role IN (" + ", ".join(f"'{r}'" for r in TENANT_ROLES) + ")",
                    name="ck_tenant_keys_role"),
)
Index("ix_tenant_keys_tenant", tenant_keys.c.tenant)
tenant_resources = Table(
    "tenant_resources",
    metadata,
    Column("kind", String(16), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("tenant", String(32), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    CheckConstraint("kind IN (" + ", ".join(f"'{k}'" for k in TENANT_KINDS) + ")",
                    name="ck_tenant_resources_kind"),
)
Index("ix_tenant_resources_tenant", tenant_resources.c.tenant)
# Every claim and release of a tenant resource, in order (`tenant` NULL: released): the
# servers' owner books read the rows past the last id they saw instead of the whole
# `tenant_resources` table (server/access/owners.py). Revision 0009.
tenant_resource_changes = Table(
    "tenant_resource_changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("name", String(64), nullable=False),
    Column("tenant", String(32), nullable=True),
    Column("at", UTCDateTime, nullable=False),
    sqlite_autoincrement=True,
)
