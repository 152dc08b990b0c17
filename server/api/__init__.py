"""HTTP only: routes, schemas, dependencies and the one exception -> HTTP mapping."""

from fastapi import APIRouter

from server.api import (
    jobs,
    libretranslate,
    routes_admin,
    routes_glossaries,
    routes_health,
    routes_translate,
)

# TRAINING SIDECAR: `POST /admin/domains` (add a domain from data) and
# `GET /admin/jobs[/{id}]` live in `server/api/jobs.py`; the sidecar (`python -m trainer`)
# runs the jobs.
ROUTERS: list[APIRouter] = [routes_translate.router, routes_admin.router, jobs.router,
                            routes_glossaries.router, routes_health.router,
                            libretranslate.router]

__all__ = ["ROUTERS"]
