"""HTTP only: routes, schemas, dependencies and the one exception -> HTTP mapping."""

from fastapi import APIRouter

from server.api import routes_admin, routes_health, routes_translate

# TRAINING SIDECAR: `POST /admin/domains` (add a domain from data) and
# `GET /admin/jobs/{id}` belong to the training sidecar issue. Its router goes in
# `server/api/jobs.py` (prefix "/admin", dependencies=[Depends(deps.require_admin)]) and is
# added to this list; nothing else here needs to change.
ROUTERS: list[APIRouter] = [routes_translate.router, routes_admin.router, routes_health.router]

__all__ = ["ROUTERS"]
