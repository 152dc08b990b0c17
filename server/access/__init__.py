"""API keys and per-key rate limits of the public endpoints (optional, off by default).

`AccessGuard.check(key, chars=...)` is the one call every front door makes before it
translates: the native API, and any other layer (LibreTranslate's `api_key` field).
"""

from server.access.guard import AccessGuard, KeyIdentity
from server.access.keys import hash_key, new_key

__all__ = ["AccessGuard", "KeyIdentity", "hash_key", "new_key"]
