"""Copy every row of one registry into another: how an operator moves from the embedded
SQLite registry to PostgreSQL (or between databases) without losing versions,
activations, jobs or the event history.

Both databases are first upgraded to the current schema. The target must be empty (no
artifact, activation, job or event), so nothing is merged or overwritten; the whole copy
is one transaction on the target: it lands completely or not at all. Artifact bytes stay
where they are: the store directory (`NMT_STORE_DIR`) is shared, only the rows move.
"""

from __future__ import annotations

from sqlalchemy import func, insert, select, text

from .errors import ConflictError
from .registry import Registry
from .tables import metadata

SERIAL_TABLES = ("events", "memories", "memory_pairs", "memory_changes")


def copy_registry(source_url: str, target_url: str) -> dict[str, int]:
    """Copy all rows from `source_url` to the empty registry at `target_url`; returns the
    number of rows copied per table."""
    source, target = Registry(source_url), Registry(target_url)
    try:
        copied: dict[str, int] = {}
        with source.engine.connect() as reader, target.engine.begin() as writer:
            occupied = [t.name for t in metadata.sorted_tables
                        if writer.execute(select(func.count()).select_from(t)).scalar()]
            if occupied:
                raise ConflictError(f"the target registry is not empty (rows in: "
                                    f"{', '.join(occupied)}); copy into a new database")
            for table in metadata.sorted_tables:
                rows = [dict(row) for row in reader.execute(select(table)).mappings()]
                if rows:
                    writer.execute(insert(table), rows)
                copied[table.name] = len(rows)
            if writer.dialect.name == "postgresql":
                # Explicit ids bypassed the sequences: move them past them, or the next
                # event (memory, pair, change) would collide with a copied one.
                for serial in SERIAL_TABLES:
                    writer.execute(text(
                        f"SELECT setval(pg_get_serial_sequence('{serial}', 'id'), "
                        f"COALESCE((SELECT max(id) FROM {serial}), 0) + 1, false)"))
        return copied
    finally:
        source.close()
        target.close()

