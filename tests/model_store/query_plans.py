"""SQLite's query plan of every SELECT a registry call runs: the tests that check a hot
path reads an index, not the whole table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event

from model_store import Registry


def query_plans(registry: Registry, calls: list[Callable[[], object]]
                ) -> list[tuple[str, list[str]]]:
    """(statement, SQLite's query plan) of every SELECT that `calls` ran."""
    ran: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            ran.append((statement, parameters))

    event.listen(registry.engine, "before_cursor_execute", record)
    try:
        for call in calls:
            call()
    finally:
        event.remove(registry.engine, "before_cursor_execute", record)
    found = []
    with registry.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        for statement, parameters in ran:
            rows = raw.execute("EXPLAIN QUERY PLAN " + statement, parameters).fetchall()
            found.append((statement, [str(row[-1]) for row in rows]))
    return found
