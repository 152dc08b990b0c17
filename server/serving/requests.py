"""One request's values: the texts and options a client asks for (`Item`,
`DecodingRequest`), what it gets back (`ItemResult`), and what preparation made of each
text (`Prepared`). The API maps its bodies onto these; the translator works on them."""

from __future__ import annotations

from dataclasses import dataclass

from server.engine.engine import SentenceJob
from server.memories.book import MemoryChoice
from server.quality.policy import SentenceResult
from server.routing.policy import DomainSpec, RoutingDecision
from server.serving.glossaries import GlossaryChoice
from server.serving.memory_use import MemoryUse
from server.textproc.document import Document, Format, GlossaryReport
from server.textproc.line_layout import SplitMode


@dataclass(frozen=True)
class Item:
    """One text to translate; the fields name where it sits in the request (errors)."""

    text: str
    domain: DomainSpec
    text_field: str = "text"
    domain_field: str = "domain"
    format: Format = "text"
    glossary: GlossaryChoice = GlossaryChoice()
    split: SplitMode = "on"  # where plain text's sentences end (server/textproc/line_layout.py)
    memory: MemoryChoice = MemoryChoice()  # the translation memories it names, or none
    context: str | None = None  # text around it the router also reads (not translated)


@dataclass(frozen=True)
class DecodingRequest:
    """Decoding options as the client asked for them (None = the server's default)."""

    beam_size: int | None = None
    n_best: int = 1
    max_length: int | None = None


@dataclass(frozen=True)
class Alternative:
    translation: str
    score: float


@dataclass(frozen=True)
class SentenceProportions:
    pieces: list[str]  # source pieces, EOS included
    layers: list[list[list[float]]]  # per encoder layer: [pieces x domains]


@dataclass(frozen=True)
class ItemProportions:
    domain: str  # the mixture's domain name
    domains: list[str]  # the mixed domains, in proportion order
    sentences: list[SentenceProportions]


@dataclass(frozen=True)
class ItemResult:
    translation: str
    decision: RoutingDecision
    versions: dict[str, int]  # module version used, by domain
    alternatives: list[Alternative] | None
    proportions: ItemProportions | None = None
    glossary: GlossaryReport | None = None  # when a glossary applied to the text
    sentences: list[SentenceResult] | None = None  # when quality is scored
    memory: MemoryUse | None = None  # when a translation memory is in play


@dataclass(frozen=True)
class Prepared:
    document: Document
    glossary: bool  # a glossary applied
    decision: RoutingDecision
    versions: dict[str, int]
    module_ids: list[str]
    jobs: list[SentenceJob]
    mixture: str | None = None  # module id, when one word-level mixture translates it
    sources: tuple[str, ...] = ()  # what the engine reads per unit (capitals folded)
    shouted: tuple[bool, ...] = ()  # per unit: written in capitals (server/quality/casing.py)
    memory: MemoryUse | None = None  # what the translation memories in play answered
