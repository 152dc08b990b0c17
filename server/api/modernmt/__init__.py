"""The ModernMT-compatible API (`/modernmt/...`), a thin layer over the native
translation path and translation memories."""

from server.api.modernmt.routes import router

__all__ = ["router"]
