"""`POST /corrections`: a translator's post-edit of a machine translation (the native
form; LibreTranslate clients use `/libretranslate/suggest`). Checked for plausibility
(422 saying why not), tied to the API key (and its rate limits) when keys are on, stored
in the registry; the sidecar refreshes the domain's module from them (docs/API.md)."""

from __future__ import annotations

from fastapi import APIRouter, status

from server.api.deps import AccessDep, ApiKeyDep, DeskDep
from server.api.schemas import ErrorResponse
from server.api.schemas_corrections import CorrectionReceived, CorrectionRequest
from server.corrections.desk import Submission

router = APIRouter(tags=["corrections"])


@router.post("/corrections", response_model=CorrectionReceived,
             status_code=status.HTTP_201_CREATED,
             responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse},
                        404: {"model": ErrorResponse}, 422: {"model": ErrorResponse},
                        429: {"model": ErrorResponse}})
async def post_correction(body: CorrectionRequest, desk: DeskDep, access: AccessDep,
                          key: ApiKeyDep) -> CorrectionReceived:
    """Store a correction of a machine translation."""
    desk.check_enabled()
    identity = await access.check(key, chars=len(body.source) + len(body.corrected))
    routed = None
    if body.routing is not None:
        routed = body.routing.domain if body.routing.mode in ("explicit", "classifier") \
            else body.routing.mode
    record = await desk.receive(Submission(
        source=body.source, corrected=body.corrected, machine=body.machine,
        domain=body.domain, routed=routed, direction=body.direction), identity)
    return CorrectionReceived(id=record.id, status=record.status, domain=record.domain,
                              direction=record.direction, created_at=record.created_at)
