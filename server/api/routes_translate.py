"""Public translation endpoints: /translate, /translate/batch, /domains."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from server.api.batch_views import (
    NDJSON,
    batch_items,
    item_work,
    job_path,
    job_response,
    ndjson_lines,
    wants_stream,
)
from server.api.deps import (
    AccessDep,
    ApiKeyDep,
    BatchJobsDep,
    ClientDeadlineDep,
    DirectionsDep,
    ListingScopeDep,
    RuntimeDep,
    SettingsDep,
    TranslatorDep,
)
from server.api.disconnect import until_disconnected
from server.api.schemas import (
    BatchRequest,
    BatchResponse,
    DetectedBatchResponse,
    DetectedTranslateResponse,
    ErrorResponse,
    TranslateRequest,
    TranslateResponse,
)
from server.api.schemas_batch_jobs import BatchJobResponse
from server.api.schemas_memories import memory_choice
from server.api.schemas_served import BackboneInfo, DomainInfo, DomainsResponse
from server.api.translate_views import (
    decoding_request,
    explanation,
    glossary_choice,
    quality_request,
    to_response,
    with_detection,
)
from server.core.errors import NotReady
from server.serving.requests import Item
from server.serving.translation import Translator
from server.textproc.languages import Detection

router = APIRouter(tags=["translation"])
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (401, "an API key is required (NMT_ACCESS__API_KEYS)"),
        (403, "the API key is unknown or revoked"),
        (404, "unknown domain (the message names the known ones)"),
        (413, "a size limit is exceeded"), (422, "invalid request (the field is named)"),
        (429, "the queue is full, or the API key's allowance is used up (see Retry-After)"),
        (503, "not ready, or the server is draining"),
        (504, "the request's deadline passed, or the one it asked for (X-NMT-Deadline) "
              "cannot be met behind the queued work (see Retry-After)"))}


@router.post("/translate", response_model=TranslateResponse, responses=ERRORS)
async def translate(body: TranslateRequest, request: Request, translator: TranslatorDep,
                    access: AccessDep, api_key: ApiKeyDep, directions: DirectionsDep,
                    deadline_s: ClientDeadlineDep) -> TranslateResponse | JSONResponse:
    """Translate one text; `routing` says which domain module(s) did it and why;
    `source`/`target` pick the direction (backbone)."""
    await access.check(api_key, chars=len(body.text))
    if body.source is not None or body.target is not None:  # before detection reads it
        translator.check_limits([Item(body.text, None)])
    translator, detected = await _direction_of(directions, translator, body.source,
                                               body.target, [body.text])
    item = Item(body.text, body.domain, format=body.format, glossary=glossary_choice(body),
                split=body.split_sentences, memory=memory_choice(body.memory))
    results = await until_disconnected(
        request, translator.translate([item], decoding_request(body.options),
                                      proportions=body.return_proportions,
                                      explain=body.explain, quality=quality_request(body),
                                      deadline_s=deadline_s))
    response = to_response(results[0])
    if body.explain:
        response.explanation = explanation(results[0].decision,
                                           threshold=translator.policy.settings.threshold)
    if detected is not None:
        return with_detection(DetectedTranslateResponse, response, detected)
    return response


@router.post("/translate/batch", response_model=BatchResponse, responses={
    202: {"model": BatchJobResponse, "description": "a job (async, or a large batch): "
                                                    "follow Location"},
    200: {"content": {NDJSON: {"schema": {"type": "string", "description": (
        "streamed: one JSON line per item, in order: /translate's answer plus `index` "
        "(BatchStreamLine)")}}}, "description": "the results"},
    **ERRORS})
async def translate_batch(body: BatchRequest, request: Request, translator: TranslatorDep,
                          access: AccessDep, api_key: ApiKeyDep, directions: DirectionsDep,
                          jobs: BatchJobsDep, settings: SettingsDep,
                          deadline_s: ClientDeadlineDep) -> Response:
    """Translate many texts (domains may differ) in one direction; results come in the
    items' order. `"async": true`, or more than NMT_SCHEDULER__BATCH_ASYNC_CHARS
    characters, answers 202 with a job (`Location`); `"stream": true` (or
    `Accept: application/x-ndjson`) answers one NDJSON line per item as it finishes."""
    chars = sum(len(item.text) for item in body.items)
    await access.check(api_key, chars=chars)
    if body.source is not None or body.target is not None:
        translator.check_limits([Item(item.text, None) for item in body.items])
    translator, detected = await _direction_of(directions, translator, body.source,
                                               body.target, [item.text for item in body.items])
    items = batch_items(body)
    if wants_stream(body, request):
        translator.check_limits(items)
        return StreamingResponse(ndjson_lines(item_work(translator, items, body,
                                                           deadline_s)),
                                 media_type=NDJSON)
    if body.run_async or chars > settings.scheduler.batch_async_chars:
        translator.check_limits(items)
        job = jobs.submit(item_work(translator, items, body, deadline_s))
        return JSONResponse(job_response(job).model_dump(mode="json"), status_code=202,
                            headers={"Location": job_path(job.id)})
    results = await until_disconnected(
        request, translator.translate(items, decoding_request(body.options),
                                      quality=quality_request(body),
                                      deadline_s=deadline_s))
    response = BatchResponse(results=[to_response(result) for result in results])
    if detected is not None:
        return with_detection(DetectedBatchResponse, response, detected)
    return JSONResponse(response.model_dump(mode="json"))


async def _direction_of(directions: DirectionsDep, translator: Translator,
                        source: str | None, target: str | None, texts: list[str]
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


@router.get("/domains", response_model=DomainsResponse)
async def domains(runtime: RuntimeDep, scope: ListingScopeDep) -> DomainsResponse:
    """The active domains and their served versions ("generic", the backbone, is always
    servable); a domain that no loaded version serves is listed as broken. With tenants:
    the shared domains and those of the key's tenant (X-API-Key)."""
    state = runtime.state
    backbone = runtime.backbone
    listed = [DomainInfo(name=entry.name, version=entry.version, family=entry.family,
                         size=entry.size,
                         status=("stale: " + state.module_failures[name])
                         if name in state.module_failures else "ready")
              for name, entry in sorted(scope.visible("domain", state.domains).items())]
    listed += [DomainInfo(name=name, version=version, family=None, size=None,
                          status="broken: " + problem)
               for name, (version, problem)
               in sorted(scope.visible("domain", state.broken()).items())]
    info = (BackboneInfo(name=backbone.name, version=backbone.version,
                         fingerprint=backbone.backbone_fingerprint) if backbone else None)
    return DomainsResponse(backbone=info, domains=listed)
