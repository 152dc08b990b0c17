"""LibreTranslate's `POST /suggest` under `/libretranslate`: `q` (the original text), `s`
(the suggested translation), `source`, `target` (JSON or form, as LibreTranslate reads
them), `api_key`; answers `{"success": true}`. 403 when corrections are disabled, as
LibreTranslate answers with suggestions off. Extra: an optional `domain`. The suggestion
becomes a correction (server/corrections): an implausible one is refused with 400 and the
reason (LibreTranslate calls every bad parameter 400)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from server.api.deps import AccessDep, ApiKeyDep, RuntimeDep
from server.api.libretranslate.errors import (
    LibreTranslateError,
    LibreTranslateRoute,
    bad_request,
    missing,
)
from server.api.libretranslate.requests import read_values
from server.api.libretranslate.routes import ERRORS, body_schema, preflight, served_pair
from server.api.routes_corrections import DeskDep
from server.corrections.desk import Submission

router = APIRouter(prefix="/libretranslate", tags=["libretranslate"],
                   route_class=LibreTranslateRoute)
SUGGEST_FIELDS = {
    "q": {"type": "string", "description": "original text"},
    "s": {"type": "string", "description": "suggested translation"},
    "source": {"type": "string", "example": "en"},
    "target": {"type": "string", "example": "fr"},
    "api_key": {"type": "string"},
    "domain": {"type": "string", "description": "extra: the domain the suggestion is for"}}


def _text(values: dict[str, object], name: str) -> str:
    value = values.get(name)
    if not value:
        raise missing(name)
    if not isinstance(value, str):
        raise bad_request(f"Invalid request: {name} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise bad_request(f"Invalid request: {name} is not valid Unicode (lone surrogate)"
                          ) from None
    return value


@router.post("/suggest", responses=ERRORS | {403: {"description": "suggestions disabled"}},
             openapi_extra=body_schema(SUGGEST_FIELDS, ["q", "s", "source", "target"]))
async def suggest(request: Request, runtime: RuntimeDep, desk: DeskDep, access: AccessDep,
                  header_key: ApiKeyDep) -> JSONResponse:
    """Submit a suggestion to improve a translation."""
    if not desk.settings.enabled:
        raise LibreTranslateError(403, "Suggestions are disabled on this server.")
    values = await read_values(request)
    q, s = _text(values, "q"), _text(values, "s")
    source, target = _text(values, "source"), _text(values, "target")
    key = values.get("api_key")
    identity = await access.check(key if isinstance(key, str) and key else header_key,
                                  chars=len(q) + len(s), field="api_key")
    pair = served_pair(runtime)
    if (source, target) != (pair.source, pair.target):
        raise bad_request(f"{source}-{target} is not supported; {pair.describe()}")
    domain = values.get("domain")
    if domain is not None and not isinstance(domain, str):
        raise bad_request("Invalid request: domain must be a domain name")
    await desk.receive(Submission(source=q, corrected=s, domain=domain or None,
                                  direction=f"{source}-{target}"), identity)
    return JSONResponse({"success": True})


router.add_api_route("/suggest", preflight, methods=["OPTIONS"], include_in_schema=False)
