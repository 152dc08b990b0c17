"""The DeepL API v2-compatible door (`/deepl/v2/...`), a thin layer over the native
translation path, glossaries and document jobs. A client's `server_url` is
`http://HOST:PORT/deepl/`; the official clients join `v2/...` onto it the RFC 3986 way,
so `http://HOST:PORT/deepl` (no slash) reaches `/v2/...`, which answers the same
(outside the OpenAPI schema)."""

from fastapi import APIRouter

from server.api.deepl import documents, glossaries, glossaries_v3
from server.api.deepl import routes as translation

v2 = APIRouter()
for part in (translation.router, glossaries.router, glossaries_v3.router, documents.router):
    v2.include_router(part)
router = APIRouter(prefix="/deepl")
router.include_router(v2)
joined = APIRouter(include_in_schema=False)  # `server_url` without its final slash
joined.include_router(v2)

__all__ = ["joined", "router"]
