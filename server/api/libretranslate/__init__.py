"""The LibreTranslate-compatible API (`/libretranslate/...`), a thin layer over the native
translation path."""

from server.api.libretranslate import files
from server.api.libretranslate.routes import router

router.include_router(files.router)

__all__ = ["router"]
