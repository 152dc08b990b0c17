"""The LibreTranslate-compatible API (`/libretranslate/...`), a thin layer over the native
translation path."""

from server.api.libretranslate.routes import router

__all__ = ["router"]
