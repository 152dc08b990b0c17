"""HTTP only: routes (`routes_*.py`), their bodies (`schemas*.py`), their dependencies
(`deps.py`), the mapping between bodies and the layers below (`*_views.py`, `*_upload.py`)
and the one exception -> HTTP mapping (`errors.py`)."""

from fastapi import APIRouter

from server.api import (
    deepl,
    libretranslate,
    modernmt,
    routes_admin,
    routes_admin_corrections,
    routes_batch_jobs,
    routes_corrections,
    routes_documents,
    routes_glossaries,
    routes_health,
    routes_jobs,
    routes_keys,
    routes_languages,
    routes_memories,
    routes_tenants,
    routes_translate,
)
from server.api.libretranslate import suggest

# TRAINING SIDECAR: `POST /admin/domains` (add a domain from data) and
# `GET /admin/jobs[/{id}]` live in `server/api/routes_jobs.py`; the sidecar (`python -m trainer`)
# runs the jobs.
PUBLIC_ROUTERS: list[APIRouter] = [routes_translate.router, routes_batch_jobs.router,
                                   routes_documents.router,
                                   routes_health.router, routes_languages.router,
                                   libretranslate.router, suggest.router,
                                   routes_corrections.router, modernmt.router,
                                   deepl.router, deepl.joined]
# Served on the main port, or only on the admin listener when NMT_ADMIN_PORT is set.
ADMIN_ROUTERS: list[APIRouter] = [routes_admin.router, routes_jobs.router, routes_keys.router,
                                  routes_glossaries.router, routes_admin_corrections.router,
                                  routes_memories.router, modernmt.memory_router,
                                  routes_tenants.router]
# With NMT_ADMIN_PORT: the public port answers the ModernMT door's memory calls with a 404
# naming the admin listener; the admin listener serves the whole ModernMT door (its
# clients, Weblate's and ModernMT's own, have one base URL for translations and memories;
# its translations still need an API key when keys are on).
PUBLIC_WITHOUT_ADMIN: list[APIRouter] = [modernmt.memories_moved]
ADMIN_LISTENER_EXTRA: list[APIRouter] = [modernmt.router]
ROUTERS: list[APIRouter] = [*PUBLIC_ROUTERS, *ADMIN_ROUTERS]

__all__ = ["ADMIN_LISTENER_EXTRA", "ADMIN_ROUTERS", "PUBLIC_ROUTERS", "PUBLIC_WITHOUT_ADMIN",
           "ROUTERS"]
