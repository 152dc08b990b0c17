"""API key records of the registry: the typed view of an `api_keys` row.

The registry stores a key's SHA-256, never the key: keys are long random strings (not
passwords), so one fast hash suffices to make a stolen table useless for calling the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import RowMapping


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
