"""One text prepared for translation: verbatim chunks and sentence units, then rendered.

    document = build_document(text, fmt="html", glossary=g)
    sources = document.sources()                # masked sentences for the engine
    restored = document.restore(translations)   # None where markers did not survive
    retry = document.retry_texts(restored)      # those units again: whole, or run by run
    finals = document.finals(restored, retry_translations)
    text = document.render(finals)

An HTML document's translated attribute values (`alt`, `title`, ...) are chunk lists of
their own, translated with the sentences and written into their tags' slots at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from server.textproc import html
from server.textproc.escaping import Context, escape
from server.textproc.glossary import Glossary, forbidden_hits
from server.textproc.line_layout import LineLayout, SplitMode, lay_out, layout_of, paragraphs, whole
from server.textproc.masking import (
    Masked,
    TermMode,
    mask,
    needs_translation,
    render_runs,
    runs,
    unmask,
)
from server.textproc.parts import Part, Term, Text, raw_of, split_sentences
from server.textproc.placeholders import protect

Format = Literal["text", "html"]


@dataclass(frozen=True)
class Unit:
    parts: tuple[Part, ...]
    masked: Masked
    layout: LineLayout | None = None  # plain text spanning lines: laid back out on them
    whole: Masked | None = None  # inline terms: its second pass, targets written in

    def again(self) -> list[str]:
        """What is translated again when its first pass failed: whole with its targets
        written in (inline terms), and its runs, the fallback when that fails too."""
        return ([self.whole.text] if self.whole is not None else []) + runs(self.parts)

    def final(self, again: Sequence[str]) -> str:
        """Its text from the translations of `again()`."""
        if self.whole is not None:
            whole = unmask(self.whole, again[0])
            if whole is not None:
                return whole
            again = again[1:]
        return render_runs(self.parts, again, context=self.masked.context)

    @property
    def terms(self) -> list[Term]:
        return [p for p in self.parts if isinstance(p, Term)]

    def untranslated(self) -> str:
        """The unit as rendered without the engine (it has no words: parts verbatim)."""
        return render_runs(self.parts, [], context=self.masked.context)


@dataclass(frozen=True)
class GlossaryReport:
    applied: list[str]  # entries found in the text whose target is in the translation
    missed: list[str]  # entries found in the text whose target is not
    forbidden: list[str] = field(default_factory=list)  # forbidden targets the output holds


Chunks = list[str | Unit]  # verbatim text, or a sentence


@dataclass
class AttributeValue:
    """A translated attribute value: its chunks, and the slot its tag holds for it."""
    slot: str
    source: str  # the value as written
    quoted: bool
    chunks: Chunks

    def written(self, value: str) -> str:
        """The value as it goes into the tag: quoted when it was, or when it must be."""
        if self.quoted or not any(c in value for c in _UNQUOTED_STOPS):
            return value
        return f'"{value}"'


_UNQUOTED_STOPS = " \t\n\f\r\"'=<>`"  # what an unquoted value may not hold


@dataclass
class Document:
    chunks: Chunks
    units: list[Unit] = field(default_factory=list)  # the ones the engine translates
    attributes: list[AttributeValue] = field(default_factory=list)
    forbidden: tuple[str, ...] = ()  # the glossary's forbidden target terms

    def plain_text(self) -> str:
        """What a reader sees (tags dropped): what routing classifies."""
        return " ".join(
            "".join(p.text if isinstance(p, Text) else p.source for p in c.parts
                    if isinstance(p, Text | Term)).strip()
            for c in self.chunks if isinstance(c, Unit)).strip()

    def sources(self) -> list[str]:
        return [unit.masked.text for unit in self.units]

    def restore(self, translations: Sequence[str]) -> list[str | None]:
        return [unmask(unit.masked, out) for unit, out in zip(self.units, translations,
                                                              strict=True)]

    def retry_texts(self, restored: Sequence[str | None]) -> list[str]:
        """Every unit whose markers were lost: whole, or its runs; in order."""
        return [text for unit, done in zip(self.units, restored, strict=True) if done is None
                for text in unit.again()]

    def finals(self, restored: Sequence[str | None], retried: Sequence[str]) -> list[str]:
        """Every unit's final text: restored, or from its second attempt (whole, or
        rebuilt from its runs)."""
        supply = iter(retried)
        out: list[str] = []
        for unit, done in zip(self.units, restored, strict=True):
            if done is None:
                done = unit.final([next(supply) for _ in unit.again()])
            out.append(done)
        return out

    def render(self, finals: Sequence[str]) -> str:
        """The text with every unit replaced by its final translation."""
        finished = dict(zip((id(u) for u in self.units), finals, strict=True))
        text = _render(self.chunks, finished)
        for attribute in self.attributes:
            value = attribute.written(_render(attribute.chunks, finished))
            text = text.replace(attribute.slot, value, 1)
        return text

    def glossary_report(self, translations: Sequence[str]) -> GlossaryReport:
        """`translations`: the final text of every unit (same order as `units`)."""
        applied: dict[str, None] = {}
        missed: dict[str, None] = {}
        finals = dict(zip((id(u) for u in self.units), translations, strict=True))
        every = self.chunks + [c for a in self.attributes for c in a.chunks]
        for chunk in every:
            if not isinstance(chunk, Unit):
                continue
            final = finals.get(id(chunk))
            text = (final if final is not None else chunk.untranslated()).lower()
            for term in chunk.terms:
                written = escape(term.target, chunk.masked.context).lower()
                target = applied if written in text else missed
                target[term.key] = None
        # checked on the whole output (memory answers too) after the search, until the
        # search itself bans them
        hits = forbidden_hits(self.forbidden, self.render(translations))
        return GlossaryReport(list(applied), [k for k in missed if k not in applied], hits)


def _render(chunks: Chunks, finished: dict[int, str]) -> str:
    out: list[str] = []
    for chunk in chunks:
        if isinstance(chunk, str):
            out.append(chunk)
        else:
            final = finished.get(id(chunk))
            if final is None:
                out.append(chunk.untranslated())
            else:
                out.append(lay_out(final, chunk.layout) if chunk.layout else final)
    return "".join(out)


def build_document(text: str, *, fmt: Format = "text", glossary: Glossary | None = None,
                   terms: TermMode = "protect", split: SplitMode = "on") -> Document:
    """`split` (plain text; server/textproc/line_layout.py): where sentences end."""
    units: list[Unit] = []
    forbidden = glossary.forbidden if glossary is not None else ()
    if fmt == "text":
        return Document(_chunks([protect(text)], glossary, units, terms=terms,
                                context="text", split=split), units, forbidden=forbidden)
    found = html.segments(text)
    chunks = _chunks(found.chunks, glossary, units, terms=terms, context="html")
    attributes = [AttributeValue(a.slot, a.value, a.quoted,
                                 _chunks([protect(a.value)], glossary, units, terms=terms,
                                         context="attribute"))
                  for a in found.attributes]
    return Document(chunks, units, attributes, forbidden)


def _chunks(segments: Sequence[str | list[Part]], glossary: Glossary | None,
            units: list[Unit], *, terms: TermMode, context: Context,
            split: SplitMode = "on") -> Chunks:
    """Segments split into sentences; the units with words are appended to `units`."""
    chunks: Chunks = []
    for segment in segments:
        if isinstance(segment, str):
            chunks.append(segment)
            continue
        parts = glossary.apply(segment) if glossary else segment
        for piece in _sentences(parts, context, split):
            if isinstance(piece, str):
                chunks.append(piece)
                continue
            layout = (layout_of("".join(raw_of(p) for p in piece))
                      if context == "text" and split != "on" else None)
            first, whole = mask(piece, terms=terms, context=context), None
            if terms == "inline" and any(isinstance(p, Term) for p in piece):
                first, whole = mask(piece, terms="source", context=context), first
            unit = Unit(tuple(piece), first, layout, whole)
            chunks.append(unit)
            if needs_translation(piece):
                units.append(unit)
    return chunks


def _sentences(parts: Sequence[Part], context: Context,
               split: SplitMode) -> list[str | list[Part]]:
    if context != "text" or split == "on":
        return split_sentences(parts, lines=context == "text")
    out: list[str | list[Part]] = []
    for block in paragraphs(parts):
        if isinstance(block, str):
            out.append(block)
        elif split == "off":
            out += whole(block)
        else:
            out += split_sentences(block, lines=False)
    return out


def source_text(document: Document) -> str:
    """The source as it was (a round trip check for tests)."""
    text = _source(document.chunks)
    for attribute in document.attributes:
        text = text.replace(attribute.slot, attribute.source, 1)
    return text


def _source(chunks: Chunks) -> str:
    return "".join(c if isinstance(c, str) else "".join(raw_of(p) for p in c.parts)
                   for c in chunks)
