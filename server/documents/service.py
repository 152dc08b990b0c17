"""A whole file through the translation pipeline: read it, route it once, translate its
segments as a series of batch requests, write it back in its own format.

1. read (a worker thread): the format by the file name's extension, the bytes into
   segments (server/documents/formats); the size limits (bytes while they arrive,
   characters here: 413);
2. route once per document (unless a domain is named): the classifier's posteriors of
   every segment, weighted by its length, averaged, and decided on like one text's
   (`RoutingPolicy.from_posteriors`); every segment is then translated with that
   decision, so a file never mixes domains;
3. translate: segments are packed into batches of at most `chunk_chars` characters and
   the request limits' items, each one `Translator.translate` call, so a document passes
   the same admission (429), fairness (round-robin between requests) and deadlines as a
   /translate/batch request; `parallel_chunks` batches are in flight at once, so the
   engine is not idle between them. A text segment longer than a request's text limit is
   cut between sentences first;
4. write (a worker thread): the file, named `<stem>.<target><suffix>`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from server.core.errors import (
    Busy,
    DeadlineExceeded,
    InvalidInput,
    NotReady,
    TooLarge,
    UnsupportedLanguage,
    UnsupportedMediaType,
)
from server.core.settings import DocumentSettings
from server.documents import formats
from server.documents.formats.base import (
    DocumentError,
    DocumentTooLarge,
    FileFormat,
    ParsedDocument,
    ReadOptions,
    Segment,
    SegmentFormat,
    UnsupportedFormat,
)
from server.documents.quality_report import UnitQuality, merged, summary
from server.routing.policy import AUTO, DomainSpec, RoutingDecision
from server.serving.directions import Directions
from server.serving.glossaries import GlossaryChoice
from server.serving.requests import DecodingRequest, Item, ItemResult
from server.serving.tenant_view import routable
from server.serving.translation import Translator
from server.textproc.document import build_document
from server.textproc.sentences import split_text

log = logging.getLogger(__name__)
ROUTING_SAMPLE = 2000  # segments whose posteriors are averaged at most (spread evenly)
PATIENT_RETRIES = 5  # a job's batch that timed out is tried again this often
Progress = Callable[[int, int], None]  # (segments done, segments in all)


@dataclass(frozen=True)
class DocumentOptions:
    source: str
    target: str
    domain: DomainSpec = None
    glossary_id: str | None = None
    overwrite_existing: bool = False
    backbone: str | None = None  # the direction that translates it; None: the default one


@dataclass(frozen=True)
class OpenedDocument:
    filename: str
    format: FileFormat
    parsed: ParsedDocument
    options: DocumentOptions

    @property
    def segments(self) -> Sequence[Segment]:
        return self.parsed.segments

    @property
    def chars(self) -> int:
        return sum(len(segment.text) for segment in self.parsed.segments)

    @property
    def output_name(self) -> str:
        return translated_name(self.filename, self.options.target)


@dataclass(frozen=True)
class TranslatedDocument:
    filename: str
    media_type: str
    data: bytes
    decision: RoutingDecision
    versions: dict[str, int]
    segments: int
    quality: dict[str, Any] | None = None  # server/documents/quality_report.py


@dataclass(frozen=True)
class _Piece:
    """Work for one batch item: a segment, or a run of a long one's sentences."""

    segment: int
    text: str
    fmt: SegmentFormat


@dataclass
class _Outcome:
    texts: dict[int, list[str]] = field(default_factory=dict)  # by piece index
    quality: dict[int, list[UnitQuality]] = field(default_factory=dict)  # by segment
    versions: dict[str, int] = field(default_factory=dict)


def translated_name(filename: str, target: str) -> str:
    """`leaflet.srt` -> `leaflet.fr.srt` (the target language before the extension)."""
    path = PurePath(PurePath(filename.replace("\\", "/")).name or "document")
    return f"{path.stem}.{target}{path.suffix}"


def open_document(filename: str, data: bytes, options: DocumentOptions, *,
                  settings: DocumentSettings) -> OpenedDocument:
    """The file read into segments (CPU work: call it off the event loop); 415 for an
    unknown type, 422 for a file its format refuses, 413 above the limits."""
    try:
        fmt = formats.by_filename(filename)
    except UnsupportedFormat as error:
        raise UnsupportedMediaType(str(error), field="file") from None
    if len(data) > settings.max_bytes:
        raise TooLarge(f"document of {len(data)} bytes; at most {settings.max_bytes} "
                       "(NMT_DOCUMENTS__MAX_BYTES)", field="file")
    if not data:
        raise InvalidInput("the file is empty", field="file")
    read = ReadOptions(source=options.source, target=options.target,
                       overwrite_existing=options.overwrite_existing)
    try:
        parsed = fmt.read(data, read)
    except DocumentTooLarge as error:
        raise TooLarge(f"{filename}: {error}", field="file") from None
    except UnsupportedFormat as error:
        raise UnsupportedMediaType(f"{filename}: {error}", field="file") from None
    except DocumentError as error:
        raise InvalidInput(f"{filename} ({fmt.name}): {error}", field="file") from None
    opened = OpenedDocument(filename, fmt, parsed, options)
    if opened.chars > settings.max_chars:
        raise TooLarge(f"the document has {opened.chars} characters to translate; at most "
                       f"{settings.max_chars} (NMT_DOCUMENTS__MAX_CHARS)", field="file")
    return opened


class DocumentService:
    def __init__(self, translator: Translator, settings: DocumentSettings,
                 directions: Directions | None = None) -> None:
        self.translator = translator  # the default direction's
        self.settings = settings
        self.directions = directions

    def open(self, filename: str, data: bytes, options: DocumentOptions) -> OpenedDocument:
        return open_document(filename, data, options, settings=self.settings)

    def translator_for(self, document: OpenedDocument) -> Translator:
        """The translator of the document's direction (server/documents/direction.py)."""
        backbone = document.options.backbone
        if backbone is None:
            return self.translator
        direction = self.directions.by_name(backbone) if self.directions else None
        if direction is None or not direction.serving:
            served = self.directions.describe() if self.directions else "none"
            raise UnsupportedLanguage(f"the backbone {backbone!r} that was to translate "
                                      f"this document is not served now; served "
                                      f"directions: {served}", field="target")
        return direction.translator

    # -- 2. one routing decision ------------------------------------------------------
    def route(self, document: OpenedDocument) -> RoutingDecision:
        """The document's routing (CPU work: call it off the event loop)."""
        translator = self.translator_for(document)
        state = translator.runtime.state
        served = routable(state)  # the tenant's domains and the shared ones
        policy = translator.policy
        spec = document.options.domain
        mixture = policy.settings.mixture
        automatic = spec is None or spec == AUTO
        if not automatic or served.classifier is None or (
                mixture is not None and mixture in served.mixtures):
            return policy.decide(spec, "", domains=served.versions,
                                 classifier=served.classifier, mixtures=served.mixtures)
        classifier = served.classifier
        totals: dict[str, float] = {}
        weight = 0.0
        for segment in _sample(document.segments, ROUTING_SAMPLE):
            text = (build_document(segment.text, fmt="html").plain_text()
                    if segment.fmt == "html" else segment.text).strip()
            if not text:
                continue
            for label, posterior in classifier.posteriors(text).items():
                totals[label] = totals.get(label, 0.0) + posterior * len(text)
            weight += len(text)
        if weight == 0:
            return policy.decide(spec, "", domains=served.versions, classifier=None)
        averaged = {label: total / weight for label, total in totals.items()}
        return policy.from_posteriors(averaged, domains=served.versions,
                                      router=classifier.origin)

    # -- 3. the segments, batch by batch ----------------------------------------------
    async def translate(self, document: OpenedDocument, *, progress: Progress | None = None,
                        patient: bool = False) -> TranslatedDocument:
        """`patient` (jobs): a batch refused for a full queue waits its Retry-After and
        one that timed out is tried again, instead of failing the document."""
        translator = self.translator_for(document)
        decision = await asyncio.to_thread(self.route, document)
        spec = decision_spec(decision)
        pieces = self._pieces(translator, document.segments)
        chunks = self._chunks(translator, pieces)
        outcome = _Outcome()
        done = 0
        total = len(document.segments)
        glossary = GlossaryChoice(glossary_id=document.options.glossary_id)
        gate = asyncio.Semaphore(self.settings.parallel_chunks)
        if progress is not None:
            progress(0, total)

        async def run(chunk: list[int]) -> None:
            nonlocal done
            async with gate:
                items = [Item(pieces[i].text, spec, text_field="file", domain_field="domain",
                              format=pieces[i].fmt, glossary=glossary) for i in chunk]
                results = await self._translate(translator, items, patient=patient)
            for index, result in zip(chunk, results, strict=True):
                outcome.texts.setdefault(pieces[index].segment, []).append(result.translation)
                outcome.quality.setdefault(pieces[index].segment, []).append(merged(
                    [UnitQuality(s.quality, s.flagged) for s in result.sentences or ()]))
                outcome.versions.update(result.versions)
            done += len({pieces[i].segment for i in chunk})
            if progress is not None:
                progress(min(done, total), total)

        await _gather_all([run(chunk) for chunk in chunks])
        translations = ["".join(outcome.texts.get(i, [""])) for i in range(total)]
        data = await asyncio.to_thread(document.parsed.write, translations)
        quality = summary([merged(outcome.quality.get(i, [])) for i in range(total)])
        return TranslatedDocument(document.output_name, document.format.media_type, data,
                                  decision, outcome.versions, total, quality)

    @staticmethod
    async def _translate(translator: Translator, items: list[Item], *,
                         patient: bool) -> list[ItemResult]:
        attempts = 0
        while True:
            try:
                return await translator.translate(items, DecodingRequest())
            except Busy as busy:
                if not patient:
                    raise
                await asyncio.sleep(max(busy.retry_after, 1))
            except (DeadlineExceeded, NotReady):
                attempts += 1
                if not patient or attempts > PATIENT_RETRIES:
                    raise
                await asyncio.sleep(attempts)

    def _pieces(self, translator: Translator, segments: Sequence[Segment]) -> list[_Piece]:
        limit = min(translator.limits.max_text_chars, self.settings.chunk_chars)
        pieces: list[_Piece] = []
        for index, segment in enumerate(segments):
            if len(segment.text) <= limit:
                pieces.append(_Piece(index, segment.text, segment.fmt))
            elif segment.fmt == "html":
                raise TooLarge(f"segment {index + 1} of the document is {len(segment.text)} "
                               f"characters of HTML without a block element to cut at; at "
                               f"most {limit}", field="file")
            else:
                pieces += [_Piece(index, text, "text") for text in _cut_text(segment.text,
                                                                              limit)]
        return pieces

    def _chunks(self, translator: Translator, pieces: Sequence[_Piece]) -> list[list[int]]:
        limits = translator.limits
        budget = min(self.settings.chunk_chars, limits.max_request_chars)
        chunks: list[list[int]] = []
        size = 0
        for index, piece in enumerate(pieces):
            if not chunks or len(chunks[-1]) >= limits.max_batch_items or \
                    size + len(piece.text) > budget:
                chunks.append([])
                size = 0
            chunks[-1].append(index)
            size += len(piece.text)
        return chunks


def routing_summary(decision: RoutingDecision, versions: dict[str, int]) -> dict[str, Any]:
    """The decision as the API's `routing` object shows it."""
    single = decision.mode in ("explicit", "classifier", "mixture")
    return {"mode": decision.mode, "domain": decision.domain,
            "confidence": decision.confidence, "weights": decision.weights,
            "module_version": versions.get(decision.domain or "") if single else None,
            "module_versions": dict(versions) if decision.mode == "ensemble" else None}


def decision_spec(decision: RoutingDecision) -> DomainSpec:
    """What each batch item names so that it is translated as the document was routed."""
    if decision.mode == "ensemble":
        return dict(decision.weights or {})
    return decision.domain or "generic"


def _cut_text(text: str, limit: int) -> list[str]:
    """`text` in runs of whole sentences (and the layout between them) of at most `limit`
    characters; a single longer sentence stays whole (the translator then names it)."""
    runs: list[str] = [""]
    for piece in split_text(text):
        if runs[-1] and len(runs[-1]) + len(piece.text) > limit:
            runs.append("")
        runs[-1] += piece.text
    return runs


def _sample(segments: Sequence[Segment], count: int) -> list[Segment]:
    if len(segments) <= count:
        return list(segments)
    step = len(segments) / count
    return [segments[int(i * step)] for i in range(count)]


async def _gather_all(work: list[Coroutine[Any, Any, None]]) -> None:
    """Run all; on the first failure cancel the rest and raise it."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
