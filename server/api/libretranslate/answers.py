"""LibreTranslate's answers from the native path's results: `translatedText`,
`detectedLanguage` (confidence 0..100), `alternatives`, and the extra `routing`."""

from __future__ import annotations

from typing import Any

from server.api.libretranslate.requests import TranslateParams
from server.api.translate_views import to_response
from server.serving.requests import ItemResult
from server.textproc.languages import Detection


def translate_answer(params: TranslateParams, results: list[ItemResult],
                     detected: Detection | None) -> dict[str, Any]:
    texts = [result.translation for result in results]
    routings = [to_response(result).routing.model_dump() for result in results]
    others = [_alternatives(result) for result in results]
    body: dict[str, Any] = {"translatedText": texts if params.batch else texts[0]}
    if detected is not None:
        shown = detection(detected)
        body["detectedLanguage"] = [shown] * len(texts) if params.batch else shown
    if params.alternatives > 0:
        body["alternatives"] = others if params.batch else others[0]
    body["routing"] = routings if params.batch else routings[0]
    return body


def _alternatives(result: ItemResult) -> list[str]:
    """The n-best list minus the translation itself and duplicates, best first."""
    found = [a.translation for a in result.alternatives or []]
    return [text for text in dict.fromkeys(found) if text != result.translation]


def detection(found: Detection) -> dict[str, Any]:
    return {"confidence": round(found.confidence * 100, 2), "language": found.language}
