"""Bodies of the API keys' admin endpoints (/admin/keys): create, list, revoke."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from server.api.schemas import Strict


class CreateKeyRequest(Strict):
    name: str = Field(min_length=1, max_length=64, description="who or what the key is for")
    requests_per_minute: int | None = Field(
        None, ge=1, le=1_000_000, description="default: NMT_ACCESS__REQUESTS_PER_MINUTE")
    chars_per_minute: int | None = Field(
        None, ge=1, le=1_000_000_000, description="default: NMT_ACCESS__CHARS_PER_MINUTE")


class KeyInfo(BaseModel):
    id: str
    name: str
    prefix: str = Field(description="the key's first characters, to recognise it")
    requests_per_minute: int | None = Field(description="null: the server's default")
    chars_per_minute: int | None = Field(description="null: the server's default")
    created_at: datetime
    revoked_at: datetime | None
    active: bool


class CreatedKey(KeyInfo):
    key: str = Field(description="the key itself: shown in this answer only, store it now")


class KeyListResponse(BaseModel):
    keys: list[KeyInfo]
    next_after: str | None = Field(
        None, description="more follow: ask again with `after` set to this; null on the "
                          "last page")
