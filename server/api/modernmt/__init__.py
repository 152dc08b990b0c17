"""The ModernMT-compatible API (`/modernmt/...`), a thin layer over the native
translation path and translation memories: `router` (public calls), `memory_router`
(memory calls, served with the admin routes) and `memories_moved` (the public port's
answer to memory calls when the admin listener is separate)."""

from server.api.modernmt.memory_routes import memories_moved, memory_router
from server.api.modernmt.routes import router

__all__ = ["memories_moved", "memory_router", "router"]
