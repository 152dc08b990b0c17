"""API keys in the registry: the typed view of an `api_keys` row, and its rows (a mixin of
`Registry`).

The registry stores a key's SHA-256, never the key: keys are long random strings (not
passwords), so one fast hash suffices to make a stolen table useless for calling the API.
"""

from __future__ import annotations

import uuid
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, RowMapping, insert, select, update

from .errors import NotFoundError
from .tables import api_keys


@dataclass(frozen=True)
class ApiKeyRecord:
    id: str
    name: str
    key_hash: str  # sha256 hex of the key
    prefix: str  # the key's first characters, to recognise it in a list
    requests_per_minute: int | None  # None: the server's default
    chars_per_minute: int | None
    created_at: datetime
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def api_key_from_row(row: RowMapping) -> ApiKeyRecord:
    return ApiKeyRecord(
        id=row["id"], name=row["name"], key_hash=row["key_hash"], prefix=row["prefix"],
        requests_per_minute=row["requests_per_minute"],
        chars_per_minute=row["chars_per_minute"], created_at=row["created_at"],
        revoked_at=row["revoked_at"])


def _now() -> datetime:
    return datetime.now(UTC)


class ApiKeyRows:
    """Registry rows of API keys (table `api_keys`, hashes only): a mixin of `Registry`."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Connection]: ...

    def create_api_key(self, *, name: str, key_hash: str, prefix: str,
                       requests_per_minute: int | None = None,
                       chars_per_minute: int | None = None) -> ApiKeyRecord:
        key_id = uuid.uuid4().hex
        with self._write() as conn:
            conn.execute(insert(api_keys).values(
                id=key_id, name=name, key_hash=key_hash, prefix=prefix,
                requests_per_minute=requests_per_minute, chars_per_minute=chars_per_minute,
                created_at=_now(), revoked_at=None))
        return self.get_api_key(key_id)

    def get_api_key(self, key_id: str) -> ApiKeyRecord:
        with self._read() as conn:
            row = conn.execute(select(api_keys).where(api_keys.c.id == key_id)).mappings().first()
        if row is None:
            raise NotFoundError("API key", key_id)
        return api_key_from_row(row)

    def find_api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash (revoked or not), or None."""
        query = select(api_keys).where(api_keys.c.key_hash == key_hash)
        with self._read() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else api_key_from_row(row)

    def list_api_keys(self) -> list[ApiKeyRecord]:
        query = select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id)
        with self._read() as conn:
            return [api_key_from_row(row) for row in conn.execute(query).mappings()]

    def revoke_api_key(self, key_id: str) -> ApiKeyRecord:
        """Mark a key revoked (idempotent: a revoked key keeps its first revocation time)."""
        with self._write() as conn:
            conn.execute(update(api_keys).where(api_keys.c.id == key_id,
                                                api_keys.c.revoked_at.is_(None))
                         .values(revoked_at=_now()))
        return self.get_api_key(key_id)
