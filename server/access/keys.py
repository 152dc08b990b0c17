"""API key strings: made from 32 random bytes, stored only as their SHA-256."""

from __future__ import annotations

import hashlib
import secrets

PREFIX = "nmt_"
SHOWN = 12  # characters of a key kept in the registry to recognise it ("nmt_AbCdEfGh")


def new_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def shown_prefix(key: str) -> str:
    return key[:SHOWN]
