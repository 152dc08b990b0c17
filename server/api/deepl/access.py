"""A DeepL call's admission: the server's API keys (server/access) with DeepL's answers.
DeepL answers 403 for a missing or refused key; a request larger than the key's whole
allowance of characters is DeepL's 456 (the quota is used up: the call cannot succeed
before the allowance grows), and a key that must wait is 429."""

from __future__ import annotations

from server.access import AccessGuard
from server.access.guard import KeyIdentity
from server.api.deepl.errors import QUOTA_EXCEEDED, DeepLError
from server.core.errors import Forbidden, TooLarge, Unauthorized


async def admit(access: AccessGuard, key: str | None, chars: int) -> KeyIdentity | None:
    try:
        return await access.check(key, chars=chars, field="Authorization")
    except (Unauthorized, Forbidden) as refused:
        raise DeepLError(403, f"Authorization failure: {refused}") from None
    except TooLarge as exceeded:
        raise DeepLError(QUOTA_EXCEEDED, f"Quota exceeded: {exceeded}") from None
