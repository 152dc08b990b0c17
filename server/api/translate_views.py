"""The translation endpoints' mapping between HTTP bodies and the serving layer's values:
a request's decoding, glossary and quality options, and an item's result as the answer
(`/translate`, `/translate/batch`, and the LibreTranslate door's routing)."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from server.api.schemas import (
    Alternative,
    DecodingOptions,
    Detected,
    Explanation,
    GlossaryResult,
    Proportions,
    QualityOptions,
    RouterInfo,
    Routing,
    Sentence,
    SentenceProportions,
    TextOptions,
    TranslateResponse,
)
from server.api.schemas_memories import memory_fields
from server.quality.policy import QualityRequest
from server.routing.policy import RoutingDecision
from server.serving.glossaries import GlossaryChoice
from server.serving.requests import DecodingRequest, ItemResult
from server.textproc.languages import Detection


def with_detection(kind: type[BaseModel], response: BaseModel,
                   detected: Detection) -> JSONResponse:
    """The answer plus `detected` (sent as is: the route's response model has no such
    field, so that answers to requests without source "auto" keep exactly theirs)."""
    shown = Detected(language=detected.language, confidence=round(detected.confidence, 4))
    answer = kind.model_validate({**response.model_dump(), "detected": shown.model_dump()})
    return JSONResponse(answer.model_dump(mode="json"))


def explanation(decision: RoutingDecision, *, threshold: float) -> Explanation:
    posteriors = decision.posteriors
    shown = dict(sorted(posteriors.items())) if posteriors is not None else None
    origin = decision.router if posteriors is not None else None
    router = (RouterInfo(backbone=origin.backbone, name=origin.name, version=origin.version,
                         shared=origin.shared) if origin is not None else None)
    return Explanation(posteriors=shown, router=router, threshold=threshold)


def glossary_choice(body: TextOptions, prefix: str = "") -> GlossaryChoice:
    return GlossaryChoice(body.glossary, body.glossary_id, field=f"{prefix}glossary",
                          id_field=f"{prefix}glossary_id")


def decoding_request(options: DecodingOptions) -> DecodingRequest:
    return DecodingRequest(beam_size=options.beam_size, n_best=options.n_best,
                           max_length=options.max_length)


def quality_request(body: QualityOptions) -> QualityRequest:
    return QualityRequest(body.min_quality, body.on_low_quality)


def to_response(result: ItemResult) -> TranslateResponse:
    decision = result.decision
    single = decision.mode in ("explicit", "classifier", "mixture")
    routing = Routing(
        mode=decision.mode, domain=decision.domain, confidence=decision.confidence,
        weights=decision.weights,
        module_version=result.versions.get(decision.domain or "") if single else None,
        module_versions=dict(result.versions) if decision.mode == "ensemble" else None)
    alternatives = None
    if result.alternatives is not None:
        alternatives = [Alternative(translation=a.translation, score=a.score)
                        for a in result.alternatives]
    proportions = None
    if result.proportions is not None:
        shown = result.proportions
        proportions = Proportions(
            domain=shown.domain, domains=shown.domains,
            sentences=[SentenceProportions(pieces=s.pieces, layers=s.layers)
                       for s in shown.sentences])
    glossary = (GlossaryResult(applied=result.glossary.applied, missed=result.glossary.missed,
                               forbidden=result.glossary.forbidden)
                if result.glossary is not None else None)
    sentences = None
    if result.sentences is not None:
        sentences = [Sentence(source=s.source, translation=s.translation, quality=s.quality,
                              flagged=s.flagged, issues=list(s.issues), recovered=s.recovered)
                     for s in result.sentences]
    lowest = min((s.quality for s in sentences), default=None) if sentences else None
    return TranslateResponse(translation=result.translation, routing=routing,
                             quality=lowest, sentences=sentences,
                             alternatives=alternatives, proportions=proportions,
                             glossary=glossary, **memory_fields(result.memory))
