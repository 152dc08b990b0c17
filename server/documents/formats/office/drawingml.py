"""DrawingML text paragraphs (`a:p`, ECMA-376 part 1, 21.1.2): slides, shapes, charts.

A paragraph is `a:pPr`, then runs (`a:r`: `a:rPr` and one `a:t`), line breaks (`a:br`)
and fields (`a:fld`: a slide number, a date, kept as they are), then `a:endParaRPr`, the
formatting of the paragraph's end, which must stay last. Links are properties of a run
(`a:hlinkClick` inside `a:rPr`), so runs are the only containers. Two runs differ in
formatting when their `a:rPr` differ in anything but the editing marks `dirty` and `err`
(a spelling error) and the language, which split runs where a reader sees none.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable

from lxml import etree

from server.documents.formats.office.inline import Element, Leaf, empty_copy

A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
PARAGRAPH = A + "p"
RUN = A + "r"
TEXT = A + "t"
_PROPERTIES = frozenset({A + "pPr", A + "rPr", A + "endParaRPr"})
_MARKS = ("dirty", "err", "lang", "altLang", "noProof", "smtClean")


class DrawingDialect:
    def leaves(self, paragraph: Element) -> list[Leaf]:
        out: list[Leaf] = []
        for child in paragraph:
            if not isinstance(child.tag, str) or child.tag in _PROPERTIES:
                continue
            if child.tag == RUN:
                text = child.find(TEXT)
                out.append(Leaf((child,), text="" if text is None else text.text or ""))
            else:
                out.append(Leaf((), objects=(child,), breaks=child.tag == A + "br"))
        return out

    def signature(self, container: Element) -> Hashable:
        properties = container.find(A + "rPr")
        if properties is None:
            return b""
        plain = copy.deepcopy(properties)
        for mark in _MARKS:
            plain.attrib.pop(mark, None)
        return etree.tostring(plain)

    def formatting_only(self, container: Element) -> bool:
        return True

    def clear(self, element: Element) -> None:
        element.text = None
        for child in list(element):
            if child.tag not in _PROPERTIES:
                element.remove(child)

    def copy(self, container: Element) -> Element:
        return empty_copy(container, self)

    def add_text(self, parent: Element, text: str) -> None:
        if parent.tag != RUN:
            run = parent.makeelement(RUN, {})
            self.add_child(parent, run)
            parent = run
        etree.SubElement(parent, TEXT).text = text

    def add_child(self, parent: Element, child: Element) -> None:
        """Before `a:endParaRPr`, which closes a paragraph."""
        child.tail = None
        end = parent.find(A + "endParaRPr")
        if end is None:
            parent.append(child)
        else:
            end.addprevious(child)
