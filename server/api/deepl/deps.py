"""The DeepL door's dependency: the caller's key, as DeepL clients send it
(`Authorization: DeepL-Auth-Key KEY`, or the older `auth_key` parameter), mapped onto
the server's API keys (server/access; with keys off any key is accepted)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from server.serving.glossaries import GlossaryBook

AUTH_SCHEME = "deepl-auth-key"


async def get_deepl_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() == AUTH_SCHEME and key.strip():
        return key.strip()
    return request.query_params.get("auth_key") or request.headers.get("x-api-key")


DeepLKeyDep = Annotated[str | None, Depends(get_deepl_key)]


async def get_deepl_glossaries(request: Request) -> GlossaryBook:
    """The stored glossaries (the registry's; DeepL names no backbone)."""
    glossaries: GlossaryBook = request.app.state.glossaries
    return glossaries


DeepLGlossariesDep = Annotated[GlossaryBook, Depends(get_deepl_glossaries)]
