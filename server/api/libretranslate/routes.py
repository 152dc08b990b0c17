"""The LibreTranslate-compatible API under `/libretranslate`: a client configured with
`http://HOST:PORT/libretranslate` works unchanged. Thin: every translation goes through the
native translation path (`Translator.translate`), one item per text of `q`; this layer only
maps LibreTranslate's parameters, answers and errors (LibreTranslate 1.9's field names,
shapes and status codes). Extras that LibreTranslate clients ignore: an optional `domain`
in requests and the routing decision (`routing`) in answers."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from server.api.deps import (
    AccessDep,
    ApiKeyDep,
    DirectionsDep,
    RuntimeDep,
    SettingsDep,
    TranslatorDep,
)
from server.api.disconnect import until_disconnected
from server.api.libretranslate.answers import detection, translate_answer
from server.api.libretranslate.deps import DetectorsDep
from server.api.libretranslate.directions import chosen_direction, detected_source, served_pair
from server.api.libretranslate.errors import LibreTranslateRoute, bad_request
from server.api.libretranslate.requests import (
    detect_texts,
    optional_text,
    read_values,
    translate_params,
)
from server.api.libretranslate.schemas import DETECT_BODY, ERRORS, TRANSLATE_BODY
from server.documents.formats import supported_extensions
from server.serving.requests import DecodingRequest, Item
from server.textproc.languages import language_name

router = APIRouter(prefix="/libretranslate", tags=["libretranslate"],
                   route_class=LibreTranslateRoute)
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default; its web page's typing debounce


@router.post("/translate", responses=ERRORS, openapi_extra=TRANSLATE_BODY)
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
        translator, detected = await chosen_direction(params, directions, translator)
    else:
        detected = await detected_source(params, pair, detectors)
        if params.target != pair.target:
            raise bad_request(f"{params.target} is not supported as a target language; "
                              f"{pair.describe()}")
    # LibreTranslate gives no alternatives for html
    alternatives = params.alternatives if params.format == "text" else 0
    work = translator.translate(items, DecodingRequest(n_best=alternatives + 1))
    results = await until_disconnected(request, work)
    return JSONResponse(translate_answer(params, results, detected))


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


@router.post("/detect", responses=ERRORS, openapi_extra=DETECT_BODY)
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
    return JSONResponse([detection(found) for found in ranked])


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
