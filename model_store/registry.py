"""The registry: which artifacts exist, which version of each is active, training jobs,
and a change counter (`events`) that servers watch to notice activations.

SQLAlchemy Core, on SQLite (the embedded default) or PostgreSQL (many replicas and
trainers). The schema is migrated on open (`schema.upgrade_schema`). Concurrency:

- SQLite: write transactions start with `BEGIN IMMEDIATE`, so two processes never both
  read and then fail to upgrade to a write lock; WAL lets readers proceed meanwhile.
- PostgreSQL: transactions that record an event or check-then-write (activations, domain
  job creation) first take one transaction-scoped advisory lock. They are serialized as on
  SQLite, so event ids grow in commit order and "the latest event id moved" never misses a
  change. Job claims lock the chosen row with `FOR UPDATE SKIP LOCKED`: many trainers claim
  different jobs in parallel. Every event is announced with `NOTIFY` (see `notify.py`).

Conditional UPDATEs (`... WHERE state = 'queued'`) keep every claim exclusive on both.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, func, insert, select, update
from sqlalchemy import delete as sql_delete
from sqlalchemy.exc import IntegrityError

from contract.manifest import ArtifactKind, Manifest

from .admin_pages import AdminPages
from .api_keys import ApiKeyRows
from .artifact_pages import ArtifactPages, ArtifactRecord, record_of
from .correction_rows import CorrectionRows
from .database import WRITE_OPTION, make_engine
from .errors import ConflictError, NotFoundError
from .glossary_rows import GlossaryRows
from .job_rows import JobRows
from .memory_gate_rows import MemoryGateRows
from .memory_import_rows import MemoryImportRows
from .memory_rows import MemoryRows
from .notify import CHANNEL
from .schema import upgrade_schema
from .tables import active, artifacts, events
from .tenant_rows import TenantRows

# Serializes PostgreSQL transactions that write events or check before they write.
WRITE_LOCK_KEY = 0x6E6D_7472_6567_7772  # "nmtregwr"


@dataclass(frozen=True)
class Event:
    id: int
    kind: str
    name: str
    version: int | None
    action: str
    at: datetime
    backbone: str = ""


def _now() -> datetime:
    return datetime.now(UTC)


class Registry(GlossaryRows, CorrectionRows, MemoryRows, MemoryImportRows, MemoryGateRows,
               JobRows, ApiKeyRows, TenantRows, ArtifactPages, AdminPages):
    """Artifacts, active versions, jobs and events in one SQL database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine = make_engine(url)
        self.dialect = self._engine.dialect.name
        try:
            with self._write() as conn:
                upgrade_schema(conn)
        except BaseException:
            self._engine.dispose()
            raise

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for tools that move rows wholesale; see transfer.py)."""
        return self._engine

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.begin() as conn:
            yield conn

    @contextmanager
    def _write(self, *, serial: bool = False) -> Iterator[Connection]:
        """A write transaction; `serial`: one at a time across processes (SQLite's
        BEGIN IMMEDIATE always is; PostgreSQL takes the registry's advisory lock)."""
        with self._engine.connect() as conn:
            conn = conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                if serial and self.dialect == "postgresql":
                    conn.execute(select(func.pg_advisory_xact_lock(WRITE_LOCK_KEY)))
                yield conn

    # -- artifacts ---------------------------------------------------------------

    def add_artifact(self, manifest: Manifest, *, location: str,
                     backbone: str | None = None) -> None:
        """Insert the row that makes an artifact visible; ConflictError if the version is
        taken. A module or classifier belongs to `backbone` (default: the backbone whose
        fingerprint its manifest carries, else the default backbone)."""
        owner = self.owner_of(manifest, backbone)
        row = {
            "backbone": owner,
            "kind": manifest.kind,
            "name": manifest.name,
            "version": manifest.version,
            "location": location,
            "fingerprint": manifest.backbone_fingerprint,
            "manifest_json": manifest.model_dump_json(),
            "created_at": manifest.created_at,
        }
        try:
            with self._write(serial=True) as conn:
                conn.execute(insert(artifacts).values(row))
                self._event(conn, manifest.kind, manifest.name, version=manifest.version,
                            action="publish", backbone=owner)
        except IntegrityError as exc:
            raise ConflictError(f"{manifest.label} is already registered") from exc

    def get_artifact(self, kind: ArtifactKind, name: str, version: int, *,
                     backbone: str | None = None) -> ArtifactRecord | None:
        scope = self.name_scope(kind, name, backbone, version=version)
        query = select(artifacts).where(
            artifacts.c.backbone == scope,
            artifacts.c.kind == kind, artifacts.c.name == name, artifacts.c.version == version
        )
        with self._read() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else record_of(row)

    def list_artifacts(self, kind: ArtifactKind | None = None, *,
                       backbone: str | None = None) -> list[ArtifactRecord]:
        """Rows of `kind` (None: every kind) of `backbone` (None: of every backbone)."""
        query = select(artifacts).order_by(artifacts.c.backbone, artifacts.c.kind,
                                           artifacts.c.name, artifacts.c.version)
        if kind is not None:
            query = query.where(artifacts.c.kind == kind)
        if backbone is not None:
            query = query.where(artifacts.c.backbone == backbone)
        with self._read() as conn:
            return [record_of(row) for row in conn.execute(query).mappings()]

    def relocate(self, record: ArtifactRecord, location: str) -> None:
        """Point an artifact's row at the place its directory moved to (the store's layout
        migration, layout.py); the bytes, hence the artifact, are the same."""
        with self._write() as conn:
            conn.execute(update(artifacts).where(
                artifacts.c.backbone == record.backbone, artifacts.c.kind == record.kind,
                artifacts.c.name == record.name, artifacts.c.version == record.version,
            ).values(location=location))

    def next_version(self, kind: ArtifactKind, name: str, *,
                     backbone: str | None = None) -> int:
        """1 + the highest registered version (a hint: the insert's unique key decides)."""
        query = select(func.max(artifacts.c.version)).where(
            artifacts.c.backbone == self.name_scope(kind, name, backbone),
            artifacts.c.kind == kind, artifacts.c.name == name
        )
        with self._read() as conn:
            highest = conn.execute(query).scalar()
        return 1 if highest is None else int(highest) + 1

    def list_versions(self, kind: ArtifactKind, name: str, *,
                      backbone: str | None = None) -> list[int]:
        scope = self.name_scope(kind, name, backbone)
        with self._read() as conn:
            return self._versions(conn, kind, name, scope)

    def list_names(self, kind: ArtifactKind, *, backbone: str | None = None) -> list[str]:
        scope = self.scope(kind, backbone)
        with self._read() as conn:
            return self._names(conn, kind, scope)

    # -- backbones: which one a row belongs to --------------------------------------

    def default_backbone(self) -> str:
        """The backbone that rows written without a backbone belong to: the oldest
        registered one ("" while there is none), so a store with one backbone behaves as
        before directions existed."""
        query = (select(artifacts.c.name).where(artifacts.c.kind == "backbone")
                 .order_by(artifacts.c.created_at, artifacts.c.name).limit(1))
        with self._read() as conn:
            name = conn.execute(query).scalar()
        return "" if name is None else str(name)

    def scope(self, kind: str, backbone: str | None) -> str:
        """The `backbone` column of `kind`'s rows: "" for backbones; for modules and
        classifiers the given backbone, or the default one."""
        if kind == "backbone":
            return ""
        return self.default_backbone() if backbone is None else backbone

    def name_scope(self, kind: str, name: str, backbone: str | None, *,
                   version: int | None = None, active_only: bool = False) -> str:
        """The `backbone` column for a call about one name that names no backbone, as
        calls did before directions existed (tools, recipes, tests: the server, the
        sidecar and the admin API always name it): for a given `version`, the backbone
        that published that version of `name` last; otherwise the backbone where `name`
        was activated last, else the one that published it last; else the default
        backbone."""
        if kind == "backbone" or backbone is not None:
            return self.scope(kind, backbone)
        with self._read() as conn:
            owner = None if version is not None else conn.execute(
                select(active.c.backbone)
                .where(active.c.kind == kind, active.c.name == name)
                .order_by(active.c.updated_at.desc()).limit(1)).scalar()
            if owner is None and not active_only:
                query = select(artifacts.c.backbone).where(artifacts.c.kind == kind,
                                                           artifacts.c.name == name)
                if version is not None:
                    query = query.where(artifacts.c.version == version)
                owner = conn.execute(query.order_by(artifacts.c.created_at.desc())
                                     .limit(1)).scalar()
        return self.default_backbone() if owner is None else str(owner)

    def owner_of(self, manifest: Manifest, backbone: str | None = None) -> str:
        return self.owner(manifest.kind, manifest.backbone_fingerprint, backbone)

    def owner(self, kind: str, fingerprint: str | None, backbone: str | None = None) -> str:
        """The backbone a new artifact belongs to: the given one; else the backbone whose
        fingerprint it carries (the one it was built for); else the default."""
        if kind == "backbone":
            return ""
        if backbone is not None:
            return backbone
        query = (select(artifacts.c.name)
                 .where(artifacts.c.kind == "backbone",
                        artifacts.c.fingerprint == fingerprint)
                 .order_by(artifacts.c.created_at, artifacts.c.name).limit(1))
        with self._read() as conn:
            owner = conn.execute(query).scalar()
        return self.default_backbone() if owner is None else str(owner)

    # -- active versions -----------------------------------------------------------

    def get_active(self, kind: ArtifactKind, name: str, *,
                   backbone: str | None = None) -> int | None:
        scope = self.name_scope(kind, name, backbone)
        query = select(active.c.version).where(active.c.backbone == scope,
                                               active.c.kind == kind, active.c.name == name)
        with self._read() as conn:
            version = conn.execute(query).scalar()
        return None if version is None else int(version)

    def active_versions(self, kind: ArtifactKind, *,
                        backbone: str | None = None) -> dict[str, int]:
        query = select(active.c.name, active.c.version).where(
            active.c.backbone == self.scope(kind, backbone), active.c.kind == kind)
        with self._read() as conn:
            return {str(n): int(v) for n, v in conn.execute(query)}

    def set_active(self, kind: ArtifactKind, name: str, version: int, *,
                   backbone: str | None = None) -> None:
        """Make `version` the active one (activation and rollback alike); records an event."""
        scope = self.name_scope(kind, name, backbone, version=version)
        with self._write(serial=True) as conn:
            versions = self._versions(conn, kind, name, scope)
            if not versions:
                raise NotFoundError(kind, name, self._names(conn, kind, scope))
            if version not in versions:
                raise NotFoundError(f"{kind} {name!r} version", version, versions)
            self._activate(conn, kind, name, version, scope)

    def _activate(self, conn: Connection, kind: str, name: str, version: int,
                  scope: str) -> None:
        where = (active.c.backbone == scope, active.c.kind == kind, active.c.name == name)
        values = {"version": version, "updated_at": _now()}
        if conn.execute(update(active).where(*where).values(values)).rowcount == 0:
            conn.execute(insert(active).values(backbone=scope, kind=kind, name=name, **values))
        self._event(conn, kind, name, version=version, action="activate", backbone=scope)

    def clear_active(self, kind: ArtifactKind, name: str, *,
                     backbone: str | None = None) -> None:
        """Deactivate `name` (a deleted domain); its artifacts stay for a later rollback."""
        scope = self.name_scope(kind, name, backbone, active_only=True)
        with self._write(serial=True) as conn:
            where = (active.c.backbone == scope, active.c.kind == kind, active.c.name == name)
            if conn.execute(sql_delete(active).where(*where)).rowcount == 0:
                known = conn.execute(select(active.c.name).where(
                    active.c.backbone == scope, active.c.kind == kind))
                raise NotFoundError(f"active {kind}", name, sorted(known.scalars()))
            self._event(conn, kind, name, version=None, action="deactivate", backbone=scope)

    # -- events -----------------------------------------------------------------------

    def latest_event_id(self) -> int:
        """Cheap change counter: servers reload when it differs from what they last saw."""
        with self._read() as conn:
            latest = conn.execute(select(func.max(events.c.id))).scalar()
        return 0 if latest is None else int(latest)

    def events_since(self, event_id: int) -> list[Event]:
        query = select(events).where(events.c.id > event_id).order_by(events.c.id)
        with self._read() as conn:
            return [Event(**dict(row)) for row in conn.execute(query).mappings()]

    # -- training sidecar: atomic flips, exclusive job creation, fenced updates --------

    def set_active_many(
        self, versions: Sequence[tuple[ArtifactKind, str, int]], *,
        expect: Mapping[tuple[ArtifactKind, str], int | None] | None = None,
        backbone: str | None = None,
    ) -> None:
        """Activate several versions of one backbone's artifacts in ONE transaction (a
        domain's module and the router that knows it): pollers see all or none. `expect`:
        `(kind, name)` -> the active version the caller's work is based on; ConflictError
        if one changed meanwhile."""
        scope = self.scope("module", backbone)
        with self._write(serial=True) as conn:
            for (kind, name), seen in sorted((expect or {}).items()):
                now = conn.execute(select(active.c.version).where(
                    active.c.backbone == self.scope(kind, scope),
                    active.c.kind == kind, active.c.name == name)).scalar()
                if now != seen:
                    raise ConflictError(f"active {kind} {name!r} is version {now}, not {seen}")
            for kind, name, version in versions:
                own = self.scope(kind, scope)
                if version not in (known := self._versions(conn, kind, name, own)):
                    raise NotFoundError(f"{kind} {name!r} version", version, known)
                self._activate(conn, kind, name, version, own)

    @staticmethod
    def _event(conn: Connection, kind: str, name: str, *, version: int | None, action: str,
               backbone: str = "") -> None:
        """Record a change (callers hold a serial write transaction); PostgreSQL also
        announces it to listeners, delivered when the transaction commits."""
        values = {"kind": kind, "name": name, "version": version, "action": action,
                  "at": _now(), "backbone": backbone}
        event_id = conn.execute(insert(events).values(values).returning(events.c.id)).scalar()
        if conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_notify(CHANNEL, str(event_id))))

    @staticmethod
    def _versions(conn: Connection, kind: str, name: str, scope: str) -> list[int]:
        query = (
            select(artifacts.c.version)
            .where(artifacts.c.backbone == scope, artifacts.c.kind == kind,
                   artifacts.c.name == name)
            .order_by(artifacts.c.version)
        )
        return [int(v) for v in conn.execute(query).scalars()]

    @staticmethod
    def _names(conn: Connection, kind: str, scope: str) -> list[str]:
        query = select(artifacts.c.name).where(artifacts.c.backbone == scope,
                                               artifacts.c.kind == kind).distinct()
        return sorted(str(n) for n in conn.execute(query).scalars())

