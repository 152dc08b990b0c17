"""Which direction a LibreTranslate call translates: the served backbone's pair (one
direction), or among several the one from `source` (or the detected language) into
`target`; LibreTranslate's 400 when none does, naming what is served."""

from __future__ import annotations

import asyncio

from server.api.libretranslate.errors import LibreTranslateError, bad_request
from server.api.libretranslate.requests import TranslateParams
from server.serving.directions import Directions
from server.serving.runtime import Runtime
from server.serving.translation import Translator
from server.textproc.languages import (
    Detection,
    LanguageDetectors,
    LanguagePair,
    language_pair,
)


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


async def detected_source(params: TranslateParams, pair: LanguagePair,
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


async def chosen_direction(params: TranslateParams, directions: Directions,
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
