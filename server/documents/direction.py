"""Which direction (backbone) translates a document, and in which languages.

A document names its languages as a text request does (docs/DIRECTIONS.md): without
`source` and `target` the default direction translates it, exactly as before directions
existed; with them, the served direction from `source` into `target` (either may be left
out when the other is enough); `source=auto` detects the language of the document's own
text (an even sample of its segments, as plain text, as `/translate/batch` detects all its
items together). A language no served backbone translates is refused (400
`unsupported_language`, naming the served directions) before any work starts.

The direction is recorded in the document's options by backbone name, so a job resumed
after a restart is translated by the same backbone (or fails, saying it is not served).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from server.core.errors import InvalidInput, NotReady
from server.documents.formats.base import Segment
from server.documents.service import DocumentOptions, DocumentService, OpenedDocument
from server.routing.policy import DomainSpec
from server.serving.directions import AUTO, Direction
from server.textproc.document import build_document
from server.textproc.languages import Detection, language_pair

DETECT_CHARS = 20_000  # of the document's text read by language detection, spread evenly
UNDETERMINED = "und"  # ISO 639-2 "undetermined": a backbone that does not name its languages


@dataclass(frozen=True)
class DocumentRequest:
    """The form's fields, as sent (`source` may be "auto"; None: not given)."""

    source: str | None
    target: str | None
    domain: DomainSpec = None
    glossary_id: str | None = None
    overwrite_existing: bool = False


@dataclass(frozen=True)
class DirectedDocument:
    document: OpenedDocument
    detected: Detection | None  # with source "auto"


async def open_directed(service: DocumentService, filename: str, data: bytes,
                        request: DocumentRequest) -> DirectedDocument:
    """The file read into segments for the direction that translates it: 415/413/422 for
    the file, 400 for languages no served backbone translates."""
    directions = service.directions
    if directions is None or not directions.served():
        # one backbone that may not say its languages: the codes are taken as given
        source, target = _single_pair(service, request.source, request.target)
        return DirectedDocument(await _open(service, filename, data, request, source,
                                            target, None), None)
    if request.source is None and request.target is None:
        return DirectedDocument(await _open_in(service, filename, data, request,
                                               directions.default), None)
    if request.source != AUTO:
        direction = directions.pick(request.source, request.target)
        return DirectedDocument(await _open_in(service, filename, data, request, direction),
                                None)
    # auto: read the file once to learn its language, again only if the target differs
    default_pair = directions.default.pair
    provisional_target = request.target or (default_pair.target if default_pair else
                                            UNDETERMINED)
    document = await _open(service, filename, data, request, UNDETERMINED,
                           provisional_target, None)
    text = detection_text(document.segments)
    choice = await directions.choose(AUTO, request.target, [text])
    pair = choice.direction.pair
    assert pair is not None  # served() directions say their languages
    backbone = None if choice.direction is directions.default else choice.direction.name
    options = replace(document.options, source=pair.source, target=pair.target,
                      backbone=backbone)
    if pair.target != provisional_target:
        document = await _open(service, filename, data, request, pair.source, pair.target,
                               backbone)
    else:
        document = replace(document, options=options)
    return DirectedDocument(document, choice.detected)


def detection_summary(detected: Detection) -> dict[str, Any]:
    """As answers show it: `{"language": "fr", "confidence": 0.9998}`."""
    return {"language": detected.language, "confidence": round(detected.confidence, 4)}


def detection_text(segments: Sequence[Segment], limit: int = DETECT_CHARS) -> str:
    """Up to `limit` characters of the segments' plain text, taken evenly over the file
    (a document often opens with names, dates and codes that say little of its language)."""
    total = sum(len(segment.text) for segment in segments)
    step = max(1, total // limit) if total > limit else 1
    picked: list[str] = []
    size = 0
    for index, segment in enumerate(segments):
        if index % step:
            continue
        text = (build_document(segment.text, fmt="html").plain_text()
                if segment.fmt == "html" else segment.text).strip()
        if text:
            picked.append(text)
            size += len(text)
        if size >= limit:
            break
    return "\n".join(picked)


async def _open_in(service: DocumentService, filename: str, data: bytes,
                   request: DocumentRequest, direction: Direction) -> OpenedDocument:
    pair = direction.pair
    assert pair is not None
    directions = service.directions
    backbone = None if directions is None or direction is directions.default else \
        direction.name
    return await _open(service, filename, data, request, pair.source, pair.target, backbone)


async def _open(service: DocumentService, filename: str, data: bytes,
                request: DocumentRequest, source: str, target: str,
                backbone: str | None) -> OpenedDocument:
    options = DocumentOptions(source=source, target=target, domain=request.domain,
                              glossary_id=request.glossary_id,
                              overwrite_existing=request.overwrite_existing,
                              backbone=backbone)
    return await asyncio.to_thread(service.open, filename, data, options)


def _single_pair(service: DocumentService, source: str | None,
                 target: str | None) -> tuple[str, str]:
    """The languages of a server of one backbone (or one that does not say them)."""
    backbone = service.translator.runtime.backbone
    if backbone is None:
        raise NotReady("no backbone is loaded; see /health/ready")
    pair = language_pair(backbone)
    if pair is None:  # the backbone does not say: the codes are taken as given
        return (source if source not in (None, AUTO) else None) or UNDETERMINED, \
            target or UNDETERMINED
    if source not in (None, AUTO, pair.source):
        raise InvalidInput(f"{source} is not supported as a source language; "
                           f"{pair.describe()}", field="source")
    if target not in (None, pair.target):
        raise InvalidInput(f"{target} is not supported as a target language; "
                           f"{pair.describe()}", field="target")
    return pair.source, pair.target
