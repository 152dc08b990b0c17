"""Database engines of the registry: SQLite with WAL, a busy timeout and `BEGIN IMMEDIATE`
for write transactions; PostgreSQL (psycopg 3) with connections checked before use."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from sqlalchemy import URL, Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from .errors import StoreError

SQLITE_BUSY_TIMEOUT_MS = 30_000
# Execution option of write transactions: SQLite begins them with BEGIN IMMEDIATE.
WRITE_OPTION = "model_store_write"
SUPPORTED = "sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB"


def registry_url(url: str) -> URL:
    """`url` parsed and checked: SQLite, or PostgreSQL through psycopg 3 (a plain
    `postgresql://` gets that driver)."""
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise StoreError(f"registry URL {url!r} is not a database URL ({SUPPORTED})") from error
    if parsed.drivername == "postgresql":
        return parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        return parsed
    raise StoreError(f"registry URL scheme {parsed.drivername!r} is not supported; "
                     f"use {SUPPORTED}")


def switch_to_wal(cursor: Any, *, timeout_s: float = SQLITE_BUSY_TIMEOUT_MS / 1000) -> None:
    """WAL journal mode for the connection's file. Switching needs an exclusive lock, and
    processes that open a fresh file at once each hold a shared lock while they ask for it:
    SQLite answers all but one 'database is locked' at once instead of waiting (waiting
    would deadlock), busy timeout or not. Those retry until the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, a busy timeout and explicit BEGINs."""
    checked = registry_url(url)
    if checked.get_backend_name() == "postgresql":
        # pre_ping: a pooled connection that a database restart or failover closed is
        # replaced instead of failing the next request.
        return create_engine(checked, pool_pre_ping=True)
    memory = url in ("sqlite://", "sqlite:///:memory:")
    # One shared connection for in-memory databases, else each connection sees its own.
    engine = create_engine(url, poolclass=StaticPool) if memory else create_engine(url)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Take BEGIN away from the sqlite3 module; _on_begin emits it (SQLAlchemy's recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if not memory:
            switch_to_wal(cursor)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
