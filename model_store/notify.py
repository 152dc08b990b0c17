"""Waiting for registry changes: PostgreSQL announces every event with NOTIFY, so replicas
wake at once; SQLite has no such channel, so its waiter just sleeps out the poll interval.

Either way the caller then compares `Registry.latest_event_id()` with what it served: a
notification only cuts the wait short, the event counter stays the truth. A dropped
listening connection therefore costs latency, never a change (polling covers it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

import psycopg

from .database import registry_url

log = logging.getLogger(__name__)

CHANNEL = "nmt_registry"


class ChangeWaiter(Protocol):
    async def wait(self, timeout: float) -> bool:
        """Return True as soon as a change is announced, False after `timeout` seconds."""
        ...

    async def close(self) -> None: ...


class SleepingWaiter:
    """No announcements (SQLite): every wait lasts the full poll interval."""

    async def wait(self, timeout: float) -> bool:
        await asyncio.sleep(timeout)
        return False

    async def close(self) -> None:
        return None


class PostgresListener:
    """`LISTEN nmt_registry` on a connection of its own, (re)connected lazily; a wait that
    (re)connects returns True at once (whatever changed meanwhile went unannounced)."""

    def __init__(self, conninfo: str, channel: str = CHANNEL) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._conn: psycopg.AsyncConnection[object] | None = None

    async def wait(self, timeout: float) -> bool:
        try:
            if self._conn is None or self._conn.closed:
                # Changes made before LISTEN took effect were not announced to us: report
                # one, so the caller checks the event counter now rather than after `timeout`.
                await self._connect()
                return True
            conn = self._conn
            announced = False
            # Notifications that arrived between two waits are kept and come first.
            async for _notify in conn.notifies(timeout=timeout, stop_after=1):
                announced = True
            return announced
        except psycopg.Error as error:
            log.warning("registry change listener lost its connection (%s); polling until "
                        "it reconnects", error)
            await self.close()
            await asyncio.sleep(timeout)
            return False

    async def _connect(self) -> None:
        conn: psycopg.AsyncConnection[object] = await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True)
        await conn.execute(f"LISTEN {self._channel}")
        self._conn = conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


def libpq_conninfo(url: str) -> str:
    """The libpq URI of a SQLAlchemy PostgreSQL URL (`postgresql+psycopg://...`)."""
    parsed = registry_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def change_waiter(url: str, channel: str = CHANNEL) -> ChangeWaiter:
    """The waiter that fits a registry URL (`channel`: the announcements it waits for;
    the memories' feed has its own, model_store/memory_rows.py)."""
    if registry_url(url).get_backend_name() == "postgresql":
        return PostgresListener(libpq_conninfo(url), channel)
    return SleepingWaiter()
