"""An office file as segments: its package, the parts that hold text, and their slots.

A format module says which parts of the package hold text a reader sees and, for one
parsed part, where that text is (`Slots`: a paragraph of runs, an attribute such as an
image's alt text, an element's text). Reading finds the slots and hands out their
segments; writing parses the same parts again, finds the same slots in the same order and
fills them, so `write` never depends on state a previous call changed. Every other part of
the package is written back byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from lxml import etree

from server.documents.formats.base import DocumentError, ReadOptions, Segment
from server.documents.formats.office import inline
from server.documents.formats.office.package import Package, read_package
from server.documents.formats.office.xmlparts import parse_part, serialize_part


class Slot(Protocol):
    @property
    def segment(self) -> Segment: ...

    def fill(self, translation: str) -> None: ...


@dataclass
class ParagraphSlot:
    paragraph: etree._Element
    plan: inline.InlinePlan
    dialect: inline.Dialect

    @property
    def segment(self) -> Segment:
        return Segment(self.plan.html, "html")

    def fill(self, translation: str) -> None:
        inline.write(self.paragraph, self.plan, translation, self.dialect)


@dataclass
class AttributeSlot:
    """A value a reader sees in an attribute: alt text, a title."""

    element: etree._Element
    name: str  # in Clark notation where namespaced

    @property
    def segment(self) -> Segment:
        return Segment(self.element.get(self.name) or "")

    def fill(self, translation: str) -> None:
        self.element.set(self.name, translation)


@dataclass
class TextSlot:
    """An element that holds only text (an ODF `svg:desc`, a threaded comment)."""

    element: etree._Element

    @property
    def segment(self) -> Segment:
        return Segment(self.element.text or "")

    def fill(self, translation: str) -> None:
        self.element.text = translation


def paragraph_slots(paragraphs: Sequence[etree._Element],
                    dialect: inline.Dialect) -> list[Slot]:
    out: list[Slot] = []
    for paragraph in paragraphs:
        found = inline.plan(paragraph, dialect)
        if found is not None:
            out.append(ParagraphSlot(paragraph, found, dialect))
    return out


def attribute_slots(root: etree._Element, names: Sequence[str],
                    local_names: frozenset[str]) -> list[Slot]:
    """Every attribute in `names` with words, on elements whose local name is listed."""
    out: list[Slot] = []
    for element in root.iter(etree.Element):
        if etree.QName(element).localname not in local_names:
            continue
        out += [AttributeSlot(element, name) for name in names
                if inline.has_words(element.get(name) or "")]
    return out


FindSlots = Callable[[str, etree._Element], list[Slot]]  # (part name, root) -> slots


@dataclass
class OfficeDocument:
    package: Package
    parts: list[str]  # the parts that hold segments, in order
    segments: list[Segment]
    find_slots: FindSlots
    what: str

    def write(self, translations: Sequence[str]) -> bytes:
        if len(translations) != len(self.segments):
            raise ValueError(f"{len(translations)} translations for "
                             f"{len(self.segments)} segments")
        supply = iter(translations)
        replaced: dict[str, bytes] = {}
        for name in self.parts:
            root = parse_part(self.package.data[name], name=name, what=self.what)
            for slot in self.find_slots(name, root):
                slot.fill(next(supply))
            replaced[name] = serialize_part(root)
        return self.package.write(replaced)


def read_office(data: bytes, options: ReadOptions, *, what: str,
                text_parts: Callable[[Package], list[str]],
                find_slots: FindSlots) -> OfficeDocument:
    """`text_parts` names the parts to look in (and raises DocumentError when the package
    is not of the format); `find_slots` finds one part's slots."""
    package = read_package(data, what=what, max_expanded_bytes=options.max_expanded_bytes)
    parts: list[str] = []
    segments: list[Segment] = []
    for name in text_parts(package):
        root = parse_part(package.data[name], name=name, what=what)
        found = [slot.segment for slot in find_slots(name, root)]
        if found:
            parts.append(name)
            segments += found
    return OfficeDocument(package, parts, segments, find_slots, what)


def require_part(package: Package, name: str, what: str) -> None:
    if name not in package.data:
        raise DocumentError(f"this is not a {what}: its zip has no {name!r} part (a file "
                            "of another type renamed?)")
