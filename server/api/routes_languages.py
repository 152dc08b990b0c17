"""`GET /languages`: the directions this server serves, each with its domains."""

from __future__ import annotations

from fastapi import APIRouter

from server.api.deps import DirectionsDep, ListingScopeDep
from server.api.schemas_served import DirectionInfo, LanguagesResponse
from server.core.errors import NotReady
from server.textproc.languages import language_name

router = APIRouter(tags=["translation"])


@router.get("/languages", response_model=LanguagesResponse)
async def languages(directions: DirectionsDep, scope: ListingScopeDep) -> LanguagesResponse:
    """Exactly the directions served (backbones loaded, or unloaded by the residency
    limit and loaded on demand), the default first."""
    if directions is None:
        raise NotReady("the server is starting: no direction is served yet")
    listed = []
    for direction in directions.all:
        backbone = direction.runtime.backbone
        if backbone is None or not direction.serving:
            continue
        pair = direction.pair
        listed.append(DirectionInfo(
            source=pair.source if pair else None, target=pair.target if pair else None,
            source_name=language_name(pair.source) if pair else None,
            target_name=language_name(pair.target) if pair else None,
            backbone=backbone.name, version=backbone.version,
            default=direction is directions.default,
            domains=scope.visible_names("domain", await direction.domains())))
    return LanguagesResponse(directions=listed)
