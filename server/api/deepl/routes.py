"""The DeepL API v2 under `/deepl`: the official clients (`deepl.Translator(key,
server_url="http://HOST:PORT/deepl")`) and tools with a DeepL backend (Weblate) work
unchanged. Thin: every translation goes through the native translation path
(`Translator.translate`), one item per `text`; this layer only maps DeepL's parameters,
answers and errors. `tag_handling` xml/html translates the texts as markup (tags, and
placeables like `<x id="1"></x>`, are kept exactly; `ignore_tags` elements come back
untranslated: ignored_tags.py); an identical request while one runs
(a client's retry) joins its work (joined.py), and a long one is answered behind
heartbeats within the client's read timeout (heartbeat.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from server.api.deepl.access import admit
from server.api.deepl.deps import DeepLKeyDep
from server.api.deepl.directions import check_target, chosen_direction, served_pairs
from server.api.deepl.errors import DeepLError, DeepLRoute
from server.api.deepl.glossary_ids import resolve_glossary_id
from server.api.deepl.heartbeat import answer_when_done
from server.api.deepl.ignored_tags import hide, show, tag_names
from server.api.deepl.joined import fingerprint, joiner
from server.api.deepl.requests import (
    deepl_code,
    optional,
    read_values,
    target_codes,
    translate_params,
    translation_memory,
)
from server.api.deepl.schemas import ERRORS, TRANSLATE_BODY
from server.api.deps import AccessDep, DirectionsDep, RuntimeDep, TranslatorDep
from server.api.disconnect import until_disconnected
from server.serving.glossaries import GlossaryChoice
from server.serving.requests import DecodingRequest, Item, ItemResult
from server.textproc.document import Format
from server.textproc.languages import LanguagePair, language_name

router = APIRouter(tags=["deepl"], route_class=DeepLRoute)
UNLIMITED = 1_000_000_000_000  # what DeepL reports for an account without a limit
FORMAL = ("more", "less")  # the formalities DeepL refuses on a target without formality


@router.post("/v2/translate", responses=ERRORS, openapi_extra=TRANSLATE_BODY)
async def translate(request: Request, runtime: RuntimeDep, translator: TranslatorDep,
                    directions: DirectionsDep, access: AccessDep,
                    key: DeepLKeyDep) -> Response:
    """Translate `text` (one or a list) into `target_lang` (JSON or form body, as DeepL's
    `/v2/translate`). Answers `{"translations": [{"detected_source_language", "text",
    "billed_characters"}]}`."""
    values = await read_values(request)
    params = translate_params(values)
    chars = sum(map(len, params.texts))
    await admit(access, key or optional(values, "auth_key"), chars)
    check_target(served_pairs(runtime, directions), params.source, params.target,
                 params.target_shown)
    if params.formality in FORMAL:  # no served target has formality
        raise DeepLError(400, "'formality' is not supported for the given 'target_lang' "
                              f"{params.target_shown}; use prefer_{params.formality}")
    detected = None
    if directions is not None:
        direction, detected = await chosen_direction(directions, params.source,
                                                     params.target, params.texts)
        if direction is not directions.default:
            translator = direction.translator
        source = direction.pair.source if direction.pair is not None else params.source
    else:
        source = params.source or served_pairs(runtime, directions)[0].source
    if detected is not None:
        source = detected.language
    markup: Format = "html" if params.tag_handling is not None else "text"
    # a multilingual (v3) glossary: its dictionary of this direction
    glossary_id = resolve_glossary_id(params.glossary_id,
                                      LanguagePair(source or "", params.target))
    glossary = GlossaryChoice(glossary_id=glossary_id, id_field="glossary_id")
    # ignore_tags (with tag_handling): those elements come back exactly as sent
    ignored = tag_names(values.get("ignore_tags")) if markup == "html" else frozenset()
    hidden = [hide(text, ignored) for text in params.texts]
    memory = translation_memory(values)
    items = [Item(text.text, None, text_field=f"text[{i}]", format=markup,
                  glossary=glossary, split=params.split, context=params.context,
                  memory=memory)
             for i, text in enumerate(hidden)]
    # an identical request (a client's retry) joins this one's work while it runs
    identity = fingerprint(key or optional(values, "auth_key"), "translate", values)
    work = asyncio.ensure_future(joiner(request.app.state).join(
        identity, lambda: translator.translate(items, DecodingRequest())))
    shown = deepl_code(source or "")

    def render(results: list[ItemResult]) -> dict[str, Any]:
        return {"translations": [
            {"detected_source_language": shown, "text": show(result.translation, sent),
             "billed_characters": len(text)}
            for text, sent, result in zip(params.texts, hidden, results, strict=True)]}

    # a long one is answered behind heartbeats, within the client's read timeout
    return await until_disconnected(request, answer_when_done(work, render))


@router.get("/v2/languages", responses=ERRORS)
async def languages(request: Request, runtime: RuntimeDep, directions: DirectionsDep,
                    access: AccessDep, key: DeepLKeyDep) -> JSONResponse:
    """The served source (`type=source`, the default) or target (`type=target`) languages
    in DeepL's codes; no target supports formality."""
    values = await read_values(request)
    await admit(access, key, 0)
    kind = values.get("type") or "source"
    if kind not in ("source", "target"):
        raise DeepLError(400, f"Value for 'type' not supported: {kind}; source or target")
    pairs = served_pairs(runtime, directions)
    if kind == "source":
        codes = dict.fromkeys(pair.source for pair in pairs)
        return JSONResponse([{"language": deepl_code(code), "name": language_name(code)}
                             for code in codes])
    targets = dict.fromkeys(pair.target for pair in pairs)
    return JSONResponse([{"language": shown, "name": language_name(code),
                          "supports_formality": False}
                         for code in targets for shown in target_codes(code)])


@router.get("/v2/usage", responses=ERRORS)
async def usage(access: AccessDep, key: DeepLKeyDep) -> JSONResponse:
    """The key's characters in use and its limit (characters per minute: the allowance
    refills continuously); without keys, 0 of an unlimited allowance (DeepL's maximum)."""
    await admit(access, key, 0)
    found = await access.usage(key)
    used, limit = found if found is not None else (0, UNLIMITED)
    return JSONResponse({"character_count": used, "character_limit": limit})


# DeepL also answers these methods (older clients): the same routes, once in the schema
router.add_api_route("/v2/translate", translate, methods=["GET"], include_in_schema=False)
router.add_api_route("/v2/usage", usage, methods=["POST"], include_in_schema=False)
