"""Public translation endpoints: /translate, /translate/batch, /domains."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from server.api.deps import AccessDep, ApiKeyDep, DirectionsDep, RuntimeDep, TranslatorDep
from server.api.errors import ClientGone
from server.api.schemas import (
    Alternative,
    BackboneInfo,
    BatchRequest,
    BatchResponse,
    DecodingOptions,
    Detected,
    DetectedBatchResponse,
    DetectedTranslateResponse,
    DomainInfo,
    DomainsResponse,
    ErrorResponse,
    Explanation,
    GlossaryResult,
    Proportions,
    QualityOptions,
    Routing,
    Sentence,
    SentenceProportions,
    TextOptions,
    TranslateRequest,
    TranslateResponse,
)
from server.api.schemas_memories import memory_choice, memory_fields
from server.core.errors import NotReady
from server.quality.policy import QualityRequest
from server.routing.policy import RoutingDecision
from server.serving.glossaries import GlossaryChoice
from server.serving.requests import DecodingRequest, Item, ItemResult
from server.serving.translation import Translator
from server.textproc.languages import Detection

T = TypeVar("T")
router = APIRouter(tags=["translation"])
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (401, "an API key is required (NMT_ACCESS__API_KEYS)"),
        (403, "the API key is unknown or revoked"),
        (404, "unknown domain (the message names the known ones)"),
        (413, "a size limit is exceeded"), (422, "invalid request (the field is named)"),
        (429, "the queue is full, or the API key's allowance is used up (see Retry-After)"),
        (503, "not ready"),
        (504, "the request's deadline passed"))}


@router.post("/translate", response_model=TranslateResponse, responses=ERRORS)
async def translate(body: TranslateRequest, request: Request, translator: TranslatorDep,
                    access: AccessDep, api_key: ApiKeyDep,
                    directions: DirectionsDep) -> TranslateResponse | JSONResponse:
    """Translate one text; `routing` says which domain module(s) did it and why;
    `source`/`target` pick the direction (backbone)."""
    await access.check(api_key, chars=len(body.text))
    if body.source is not None or body.target is not None:  # before detection reads it
        translator.check_limits([Item(body.text, None)])
    translator, detected = await direction_of(directions, translator, body.source,
                                              body.target, [body.text])
    item = Item(body.text, body.domain, format=body.format, glossary=glossary_choice(body),
                split=body.split_sentences, memory=memory_choice(body.memory))
    results = await until_disconnected(
        request, translator.translate([item], decoding_request(body.options),
                                      proportions=body.return_proportions,
                                      explain=body.explain, quality=quality_request(body)))
    response = to_response(results[0])
    if body.explain:
        response.explanation = explanation(results[0].decision,
                                           threshold=translator.policy.settings.threshold)
    if detected is not None:
        return with_detection(DetectedTranslateResponse, response, detected)
    return response


@router.post("/translate/batch", response_model=BatchResponse, responses=ERRORS)
async def translate_batch(body: BatchRequest, request: Request, translator: TranslatorDep,
                          access: AccessDep, api_key: ApiKeyDep,
                          directions: DirectionsDep) -> BatchResponse | JSONResponse:
    """Translate many texts (domains may differ) in one direction; results come in the
    items' order."""
    await access.check(api_key, chars=sum(len(item.text) for item in body.items))
    if body.source is not None or body.target is not None:
        translator.check_limits([Item(item.text, None) for item in body.items])
    translator, detected = await direction_of(directions, translator, body.source,
                                              body.target, [item.text for item in body.items])
    items = [Item(item.text, item.domain if "domain" in item.model_fields_set else body.domain,
                  text_field=f"items[{index}].text",
                  domain_field=(f"items[{index}].domain" if "domain" in item.model_fields_set
                                else "domain"),
                  format=item.format if "format" in item.model_fields_set else body.format,
                  split=(item.split_sentences if "split_sentences" in item.model_fields_set
                         else body.split_sentences),
                  glossary=(glossary_choice(item, f"items[{index}].")
                            if {"glossary", "glossary_id"} & item.model_fields_set
                            else glossary_choice(body)),
                  memory=(memory_choice(item.memory, f"items[{index}].memory")
                          if "memory" in item.model_fields_set else memory_choice(body.memory)))
             for index, item in enumerate(body.items)]
    results = await until_disconnected(
        request, translator.translate(items, decoding_request(body.options),
                                      quality=quality_request(body)))
    response = BatchResponse(results=[to_response(result) for result in results])
    if detected is not None:
        return with_detection(DetectedBatchResponse, response, detected)
    return response


async def direction_of(directions: DirectionsDep, translator: Translator, source: str | None,
                       target: str | None, texts: list[str]
                       ) -> tuple[Translator, Detection | None]:
    """The translator of the request's direction: `translator` (the default direction's,
    the dependency) when the request names no language."""
    if source is None and target is None:
        return translator, None
    if directions is None:
        raise NotReady("the server is starting: no direction is served yet")
    choice = await directions.choose(source, target, texts)
    if choice.direction is directions.default:
        return translator, choice.detected
    return choice.direction.translator, choice.detected


def with_detection(kind: type[BaseModel], response: BaseModel,
                   detected: Detection) -> JSONResponse:
    """The answer plus `detected` (sent as is: the route's response model has no such
    field, so that answers to requests without source "auto" keep exactly theirs)."""
    shown = Detected(language=detected.language, confidence=round(detected.confidence, 4))
    answer = kind.model_validate({**response.model_dump(), "detected": shown.model_dump()})
    return JSONResponse(answer.model_dump(mode="json"))


@router.get("/domains", response_model=DomainsResponse)
async def domains(runtime: RuntimeDep) -> DomainsResponse:
    """The active domains and their served versions ("generic", the backbone, is always
    servable); a domain that no loaded version serves is listed as broken."""
    state = runtime.state
    backbone = runtime.backbone
    listed = [DomainInfo(name=entry.name, version=entry.version, family=entry.family,
                         size=entry.size,
                         status=("stale: " + state.module_failures[name])
                         if name in state.module_failures else "ready")
              for name, entry in sorted(state.domains.items())]
    listed += [DomainInfo(name=name, version=version, family=None, size=None,
                          status="broken: " + problem)
               for name, (version, problem) in sorted(state.broken().items())]
    info = (BackboneInfo(name=backbone.name, version=backbone.version,
                         fingerprint=backbone.backbone_fingerprint) if backbone else None)
    return DomainsResponse(backbone=info, domains=listed)


def explanation(decision: RoutingDecision, *, threshold: float) -> Explanation:
    posteriors = decision.posteriors
    shown = dict(sorted(posteriors.items())) if posteriors is not None else None
    return Explanation(posteriors=shown, threshold=threshold)


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
    glossary = (GlossaryResult(applied=result.glossary.applied, missed=result.glossary.missed)
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


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it when the client disconnects first (its queued sentences
    are then dropped before compute). `work` runs in the calling task; a watcher task
    cancels that task when the disconnect comes (a done-callback: no extra task for the
    work, no `asyncio.wait`, which at saturation were a few percent of the event loop)."""
    current = asyncio.current_task()
    assert current is not None, "until_disconnected runs inside a task"
    watcher = asyncio.ensure_future(_disconnect(request))
    gone = finished = False

    def on_disconnect(done: asyncio.Future[None]) -> None:
        nonlocal gone
        # `finished`: the callback may have been scheduled before the work returned
        if not finished and not done.cancelled() and done.exception() is None:
            gone = True
            current.cancel()

    watcher.add_done_callback(on_disconnect)
    try:
        return await work
    except asyncio.CancelledError:
        if gone and current.uncancel() == 0:  # our cancel alone: the client left
            raise ClientGone("the client disconnected") from None
        raise
    finally:
        finished = True
        watcher.cancel()


async def _disconnect(request: Request) -> None:
    """Returns when the ASGI server reports `http.disconnect` (the body was read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
