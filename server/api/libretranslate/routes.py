"""The LibreTranslate-compatible API under `/libretranslate`: a client configured with
`http://HOST:PORT/libretranslate` works unchanged. Thin: every translation goes through the
native translation path (`Translator.translate`), one item per text of `q`; this layer only
maps LibreTranslate's parameters, answers and errors (LibreTranslate 1.9's field names,
shapes and status codes). Extras that LibreTranslate clients ignore: an optional `domain`
in requests and the routing decision (`routing`) in answers."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from server.api.deps import (
    AccessDep,
    ApiKeyDep,
    DirectionsDep,
    RuntimeDep,
    SettingsDep,
    TranslatorDep,
)
from server.api.libretranslate.errors import LibreTranslateError, LibreTranslateRoute, bad_request
from server.api.libretranslate.requests import (
    TranslateParams,
    detect_texts,
    optional_text,
    read_values,
    translate_params,
)
from server.api.routes_translate import to_response, until_disconnected
from server.documents.formats import supported_extensions
from server.serving.directions import Directions
from server.serving.requests import DecodingRequest, Item, ItemResult
from server.serving.runtime import Runtime
from server.serving.translation import Translator
from server.textproc.languages import (
    Detection,
    LanguageDetectors,
    LanguagePair,
    language_name,
    language_pair,
)

router = APIRouter(prefix="/libretranslate", tags=["libretranslate"],
                   route_class=LibreTranslateRoute)
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default; its web page's typing debounce
ERROR_BODY = {"content": {"application/json": {"schema": {
    "type": "object", "properties": {"error": {"type": "string"}}}}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description, **ERROR_BODY}
    for status, description in ((400, "a missing, invalid or unsupported parameter"),
                                (429, "slow down (the queue is full)"),
                                (503, "no backbone is loaded"))}


TRANSLATE_FIELDS: dict[str, Any] = {
    "q": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
          "description": "text(s) to translate"},
    "source": {"type": "string", "example": "en", "description": 'a language code or "auto"'},
    "target": {"type": "string", "example": "fr"},
    "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
    "alternatives": {"type": "integer", "default": 0,
                     "description": "other translations to return; a negative number counts "
                                    "as 0 (as LibreTranslate reads it)"},
    "api_key": {"type": "string", "description": "an API key (with NMT_ACCESS__API_KEYS; "
                                                 "or the X-API-Key header)"},
    "domain": {"description": "extra: a domain, generic, auto, or {domain: weight}"}}


def body_schema(fields: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """OpenAPI for a body read by hand (JSON or form, as LibreTranslate accepts both)."""
    schema = {"type": "object", "properties": fields, "required": required}
    return {"requestBody": {"required": True, "content": {
        media: {"schema": schema} for media in (
            "application/json", "application/x-www-form-urlencoded", "multipart/form-data")}}}


def get_detectors(request: Request) -> LanguageDetectors:
    detectors: LanguageDetectors = request.app.state.language_detectors
    return detectors


DetectorsDep = Annotated[LanguageDetectors, Depends(get_detectors)]


def served_pair(runtime: Runtime) -> LanguagePair:
    backbone = runtime.backbone
    if backbone is None or not runtime.available:
        raise LibreTranslateError(503, "no backbone is loaded; see /health/ready")
    pair = language_pair(backbone)
    if pair is None:
        raise LibreTranslateError(
            503, f"backbone {backbone.name!r} does not say which languages it translates: "
                 "publish it with provenance.languages = {\"source\": ..., \"target\": ...} "
                 "or a name ending in -<source>-<target> (ISO 639-1)")
    return pair


@router.post("/translate", responses=ERRORS,
             openapi_extra=body_schema(TRANSLATE_FIELDS, ["q", "source", "target"]))
async def translate(request: Request, runtime: RuntimeDep, translator: TranslatorDep,
                    settings: SettingsDep, detectors: DetectorsDep, access: AccessDep,
                    header_key: ApiKeyDep, directions: DirectionsDep) -> JSONResponse:
    """Translate `q` (a string or a list) from `source` (a code or `auto`) to `target`.
    JSON or form body: `q`, `source`, `target`, `format` (`text`/`html`), `alternatives`,
    `api_key`; extra: `domain` (as on `/translate`). Answers `translatedText`,
    `detectedLanguage` (only for `source: auto`), `alternatives` (only when asked) and
    `routing`; lists when `q` is a list."""
    params = translate_params(await read_values(request))
    await access.check(params.api_key or header_key, chars=sum(map(len, params.texts)),
                       field="api_key")
    most = settings.decoding.max_beam_size - 1
    if params.alternatives > most:
        raise bad_request(f"Invalid request: alternatives parameter must be <= {most}")
    pair = served_pair(runtime)
    items = [Item(text, params.domain, text_field=f"q[{i}]" if params.batch else "q",
                  format=params.format) for i, text in enumerate(params.texts)]
    translator.check_limits(items)  # before detection reads the texts
    if directions is not None and len(directions.served()) > 1:
        translator, detected = await _direction(params, directions, translator)
    else:
        detected = await _detected_source(params, pair, detectors)
        if params.target != pair.target:
            raise bad_request(f"{params.target} is not supported as a target language; "
                              f"{pair.describe()}")
    # LibreTranslate gives no alternatives for html
    alternatives = params.alternatives if params.format == "text" else 0
    work = translator.translate(items, DecodingRequest(n_best=alternatives + 1))
    results = await until_disconnected(request, work)
    return JSONResponse(_answer(params, results, detected))


async def _detected_source(params: TranslateParams, pair: LanguagePair,
                           detectors: LanguageDetectors) -> Detection | None:
    """`auto`: the language of all texts together (as LibreTranslate detects it once per
    request); an explicit source must be the backbone's."""
    if params.source != "auto":
        if params.source != pair.source:
            raise bad_request(f"{params.source} is not supported as a source language; "
                              f"{pair.describe()}")
        return None
    text = "\n".join(params.texts)
    if not text.strip():  # nothing to detect; nothing will be translated either
        return Detection(pair.source, 0.0)
    detector = detectors.get(pair.codes)
    ranked = await asyncio.to_thread(detector.rank, text)
    if not ranked or ranked[0].language != pair.source:
        found = ranked[0].language if ranked else "the language of q"
        raise bad_request(f"{found} (detected) is not supported as a source language; "
                          f"{pair.describe()}")
    return ranked[0]


async def _direction(params: TranslateParams, directions: Directions,
                     translator: Translator) -> tuple[Translator, Detection | None]:
    """Several directions: the one from `source` (or the detected language) into
    `target`; `translator` (the default direction's) when it is the default."""
    served = directions.served()
    detected = None
    source = params.source
    if source == "auto":
        detected = await directions.detect_source("\n".join(params.texts))
        if detected is None:  # nothing to detect: the default direction's source
            default_pair = directions.default.pair
            source = default_pair.source if default_pair else ""
            detected = Detection(source, 0.0)
        else:
            source = detected.language
    shown = f"{source} (detected)" if params.source == "auto" else source
    routes = f"this server translates {directions.describe()}"
    if source not in {pair.source for pair, _ in served}:
        raise bad_request(f"{shown} is not supported as a source language; {routes}")
    chosen = next((d for pair, d in served
                   if (pair.source, pair.target) == (source, params.target)), None)
    if chosen is None:
        raise bad_request(f"{params.target} is not supported as a target language from "
                          f"{source}; {routes}")
    return (translator if chosen is directions.default else chosen.translator), detected


def _answer(params: TranslateParams, results: list[ItemResult],
            detected: Detection | None) -> dict[str, Any]:
    texts = [result.translation for result in results]
    routings = [to_response(result).routing.model_dump() for result in results]
    others = [_alternatives(result) for result in results]
    body: dict[str, Any] = {"translatedText": texts if params.batch else texts[0]}
    if detected is not None:
        shown = _detection(detected)
        body["detectedLanguage"] = [shown] * len(texts) if params.batch else shown
    if params.alternatives > 0:
        body["alternatives"] = others if params.batch else others[0]
    body["routing"] = routings if params.batch else routings[0]
    return body


def _alternatives(result: ItemResult) -> list[str]:
    """The n-best list minus the translation itself and duplicates, best first."""
    found = [a.translation for a in result.alternatives or []]
    return [text for text in dict.fromkeys(found) if text != result.translation]


def _detection(found: Detection) -> dict[str, Any]:
    return {"confidence": round(found.confidence * 100, 2), "language": found.language}


@router.get("/languages", responses=ERRORS)
async def languages(runtime: RuntimeDep, directions: DirectionsDep) -> JSONResponse:
    """Every language with the codes it translates into (`targets`): exactly the served
    directions."""
    pairs = [served_pair(runtime)]
    if directions is not None:
        pairs += [pair for pair, _ in directions.served() if pair not in pairs]
    codes = list(dict.fromkeys(code for pair in pairs for code in pair.codes))
    listed = [{"code": code, "name": language_name(code),
               "targets": list(dict.fromkeys(p.target for p in pairs if p.source == code))}
              for code in codes]
    return JSONResponse(listed)


@router.post("/detect", responses=ERRORS, openapi_extra=body_schema(
    {"q": TRANSLATE_FIELDS["q"], "api_key": TRANSLATE_FIELDS["api_key"]}, ["q"]))
async def detect(request: Request, runtime: RuntimeDep, detectors: DetectorsDep,
                 access: AccessDep, header_key: ApiKeyDep,
                 directions: DirectionsDep) -> JSONResponse:
    """The language of `q` among the server's languages, most probable first
    (`confidence` 0..100)."""
    values = await read_values(request)
    texts = detect_texts(values)
    await access.check(optional_text(values, "api_key") or header_key,
                       chars=sum(map(len, texts)), field="api_key")
    codes = served_pair(runtime).codes
    if directions is not None and len(directions.served()) > 1:
        codes = sorted({c for pair, _ in directions.served() for c in pair.codes} | set(codes))
    detector = detectors.get(codes)
    ranked = await asyncio.to_thread(detector.rank, "\n".join(texts))
    return JSONResponse([_detection(found) for found in ranked])


@router.get("/frontend/settings", responses=ERRORS)
async def frontend_settings(runtime: RuntimeDep, settings: SettingsDep,
                            access: AccessDep) -> JSONResponse:
    """What LibreTranslate's web page reads at start-up: limits and default languages."""
    pair = served_pair(runtime)
    return JSONResponse({
        "charLimit": settings.limits.max_text_chars,
        "frontendTimeout": FRONTEND_TIMEOUT_MS,
        "apiKeys": access.enabled,
        "keyRequired": access.enabled,
        "suggestions": settings.corrections.enabled,
        "filesTranslation": True,
        "supportedFilesFormat": supported_extensions(),
        "language": {"source": {"code": "auto", "name": "Auto Detect"},
                     "target": {"code": pair.target, "name": language_name(pair.target)}},
    })


@router.get("/health", responses=ERRORS)
async def health(runtime: RuntimeDep) -> JSONResponse:
    """`{"status": "ok"}` once a backbone is served."""
    served_pair(runtime)
    return JSONResponse({"status": "ok"})


async def preflight() -> Response:
    """CORS preflight of a browser's cross-origin call (the headers are the route class's)."""
    return Response(status_code=204)


for _path in ("/translate", "/languages", "/detect", "/frontend/settings", "/health"):
    router.add_api_route(_path, preflight, methods=["OPTIONS"], include_in_schema=False)
