"""A text's sentences answered from memories: each unit whose source a memory in play
holds exactly becomes verbatim text (the memory's target, rendered for its context by
target_render.py) and leaves the units the engine translates; so do a whole text's
units when a memory holds the whole text (a TMX segment of several sentences).

What stays for the engine is an ordinary `Document`: routing, quality, retries and
rendering work on it unchanged, and glossaries never touch a matched sentence (its text
is no longer a unit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from server.memories.index import Entry
from server.memories.target_render import render_target
from server.textproc.document import Chunks, Document, Unit
from server.textproc.line_layout import lay_out
from server.textproc.parts import Text, raw_of


@dataclass(frozen=True)
class Hit:
    memory: str
    entry: Entry
    version: int  # the memory's version that held the pair


Lookup = Callable[[str], Hit | None]  # a source text -> the pair a memory holds for it


def whole_text(document: Document, text: str, lookup: Lookup) -> tuple[Document, Hit] | None:
    """The document answered at once when a memory holds `text` as a whole (and its
    target's markup is the text's own)."""
    if not document.units or document.attributes:
        return None
    found = lookup(text)
    if found is None:
        return None
    allowed = {c for c in document.chunks if isinstance(c, str)} | {
        raw_of(p) for c in document.chunks if isinstance(c, Unit) for p in c.parts
        if not isinstance(p, Text)}
    context = document.units[0].masked.context
    rendered = render_target(found.entry.target, context=context, allowed=allowed)
    if rendered is None:
        return None
    return Document([rendered], [], forbidden=document.forbidden), found


def sentences(document: Document, lookup: Lookup) -> tuple[Document, list[Hit]]:
    """The document less the units a memory answers, and those answers in text order."""
    hits: list[Hit] = []
    wanted = {id(unit) for unit in document.units}
    answered: set[int] = set()

    def answer(chunks: Chunks) -> Chunks:
        out: Chunks = []
        for chunk in chunks:
            text = _answer(chunk, lookup, hits) if isinstance(chunk, Unit) and \
                id(chunk) in wanted else None
            if text is None:
                out.append(chunk)
            else:
                answered.add(id(chunk))
                out.append(text)
        return out

    chunks = answer(document.chunks)
    attributes = [replace(a, chunks=answer(a.chunks)) for a in document.attributes]
    if not hits:
        return document, []
    units = [unit for unit in document.units if id(unit) not in answered]
    return Document(chunks, units, attributes, document.forbidden), hits


def _answer(unit: Unit, lookup: Lookup, hits: list[Hit]) -> str | None:
    raw = "".join(raw_of(p) for p in unit.parts)
    found = lookup(raw)
    if found is None:
        return None
    allowed = {raw_of(p) for p in unit.parts if not isinstance(p, Text)}
    rendered = render_target(found.entry.target, context=unit.masked.context,
                             allowed=allowed)
    if rendered is None:
        return None
    hits.append(found)
    lead, trail = raw[: len(raw) - len(raw.lstrip())], raw[len(raw.rstrip()):]
    return lead + (lay_out(rendered, unit.layout) if unit.layout else rendered) + trail
