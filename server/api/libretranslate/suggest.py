"""LibreTranslate's `POST /suggest` under `/libretranslate`: `q` (the original text), `s`
(the suggested translation), `source`, `target` (JSON or form, as LibreTranslate reads
them), `api_key`; answers `{"success": true}`. 403 when corrections are disabled, as
LibreTranslate answers with suggestions off. Extra: an optional `domain`. The suggestion
becomes a correction (server/corrections): an implausible one is refused with 400 and the
reason (LibreTranslate calls every bad parameter 400)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from server.api.deps import AccessDep, ApiKeyDep, DeskDep, RuntimeDep
from server.api.libretranslate.directions import served_pair
from server.api.libretranslate.errors import LibreTranslateError, LibreTranslateRoute, bad_request
from server.api.libretranslate.requests import read_values, required_string
from server.api.libretranslate.routes import preflight
from server.api.libretranslate.schemas import ERRORS, SUGGEST_BODY
from server.corrections.desk import Submission

router = APIRouter(prefix="/libretranslate", tags=["libretranslate"],
                   route_class=LibreTranslateRoute)


@router.post("/suggest", responses=ERRORS | {403: {"description": "suggestions disabled"}},
             openapi_extra=SUGGEST_BODY)
async def suggest(request: Request, runtime: RuntimeDep, desk: DeskDep, access: AccessDep,
                  header_key: ApiKeyDep) -> JSONResponse:
    """Submit a suggestion to improve a translation."""
    if not desk.settings.enabled:
        raise LibreTranslateError(403, "Suggestions are disabled on this server.")
    values = await read_values(request)
    q, s = required_string(values, "q"), required_string(values, "s")
    source, target = required_string(values, "source"), required_string(values, "target")
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
