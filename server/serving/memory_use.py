"""A request's translation memories applied to one text (server/memories): the whole
text answered by a memory that holds it, else each sentence a memory holds exactly
taken from it (those leave the engine's work), and the fuzzy matches of the text as a
whole offered beside the machine translation."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.decoding.knn import KnnReport
from server.memories.book import MemoryBook, MemoryChoice, MemoryMatch
from server.memories.document_matches import Hit, sentences, whole_text
from server.textproc.document import Document


@dataclass(frozen=True)
class MemoryUse:
    match: MemoryMatch | None = None  # the whole text, from one pair
    sentences: list[MemoryMatch] = field(default_factory=list)  # sentences taken exactly
    matches: list[MemoryMatch] = field(default_factory=list)  # fuzzy, best first
    # per decoded sentence guided by retrieval: how much the memory weighed (filled while
    # it decodes; server/decoding/knn.py)
    retrieval: list[KnnReport] = field(default_factory=list)


def exact(hit: Hit) -> MemoryMatch:
    e = hit.entry
    return MemoryMatch(100.0, hit.memory, e.source, e.target, e.tuid, e.origin, e.id,
                       hit.version)


def apply_memories(book: MemoryBook | None, memory: MemoryChoice, text: str,
                   document: Document, *, html: bool,
                   domain: str | None) -> tuple[Document, MemoryUse | None]:
    """`text` as sent (`html`: an HTML text, whose fuzzy matches compare what a reader
    sees); `domain`: the one the text was routed to (its memory is in play)."""
    if book is None:
        return document, None
    chosen = book.in_play(memory, domain)
    if not chosen:
        return document, None
    lookup = book.lookup(chosen)
    whole = whole_text(document, text, lookup)
    if whole is not None:
        return whole[0], MemoryUse(match=exact(whole[1]))
    fuzzy = book.fuzzy(chosen, document.plain_text() if html else text)
    document, hits = sentences(document, lookup)
    return document, MemoryUse(sentences=[exact(h) for h in hits], matches=fuzzy)
