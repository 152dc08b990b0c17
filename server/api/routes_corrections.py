"""`POST /corrections`: a translator's post-edit of a machine translation (the native
form; LibreTranslate clients use `/libretranslate/suggest`). Checked for plausibility
(422 saying why not), tied to the API key (and its rate limits) when keys are on, stored
in the registry; the sidecar refreshes the domain's module from them (docs/API.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request, status
from pydantic import BaseModel, Field, StringConstraints, field_validator

from server.api.deps import AccessDep, ApiKeyDep
from server.api.schemas import DomainName, ErrorResponse, Strict, TextField, valid_unicode
from server.corrections.desk import CorrectionDesk, Submission

router = APIRouter(tags=["corrections"])
Direction = Annotated[str, StringConstraints(max_length=16, pattern=r"^[a-z]{2,3}-[a-z]{2,3}$")]


async def get_desk(request: Request) -> CorrectionDesk:
    desk: CorrectionDesk = request.app.state.corrections
    return desk


DeskDep = Annotated[CorrectionDesk, Depends(get_desk)]


class OriginalRouting(BaseModel):
    """The `routing` object of the answer that was corrected (other fields ignored)."""

    mode: str | None = Field(None, max_length=16)
    domain: DomainName | None = None


class CorrectionRequest(Strict):
    source: TextField = Field(description="the source text that was translated")
    corrected: TextField = Field(description="the corrected translation")
    machine: TextField | None = Field(None, description="the machine translation that was "
                                                        "corrected (refused when unchanged)")
    domain: DomainName | None = Field(
        None, description="the domain the correction is for (the corrector's choice); "
                          "default: the domain of `routing`, else the router's choice now")
    routing: OriginalRouting | None = Field(
        None, description="the original answer's `routing` (mode and domain)")
    direction: Direction | None = Field(
        None, description='the translation direction, "en-fr" (default: the served one)')

    _check_text = field_validator("source", "corrected", "machine")(valid_unicode)


class CorrectionReceived(BaseModel):
    id: str
    status: Literal["accepted", "pending", "approved", "rejected"] = Field(
        description='"accepted" (sent with an API key) or "pending" (anonymous: trains '
                    "nothing until an admin approves it)")
    domain: str | None = Field(description="the domain it will train (null: none known)")
    direction: str
    created_at: datetime


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
