"""OpenDocument paragraphs (`text:p`, `text:h`; ODF 1.3 part 3, 5.1 and 6): mixed content.

Text sits directly in the paragraph and in spans (`text:span`, formatting by style name),
links (`text:a`) and `text:meta`; `text:s` stands for repeated spaces (ODF collapses white
space, 6.1.2) and is read as spaces and written back as one. Everything else inside a
paragraph (tabs, line breaks, notes, frames, annotations, bookmarks, fields, change marks)
is an object: a note's or a frame's own paragraphs are segments of their own.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from server.documents.formats.office.inline import Element, Leaf, empty_copy

TEXT_NS = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
PARAGRAPHS = (TEXT_NS + "p", TEXT_NS + "h")
SPAN = TEXT_NS + "span"
_CONTAINERS = frozenset({SPAN, TEXT_NS + "a", TEXT_NS + "meta"})
_SPACES = TEXT_NS + "s"
_BREAKS = frozenset({TEXT_NS + "line-break"})
_RUN_OF_SPACES = re.compile(r"( {2,})")


class OpenDocumentDialect:
    def leaves(self, paragraph: Element) -> list[Leaf]:
        out: list[Leaf] = []
        self._walk(paragraph, (), out)
        return out

    def _walk(self, element: Element, chain: tuple[Element, ...], out: list[Leaf]) -> None:
        if element.text:
            out.append(Leaf(chain, text=element.text))
        for child in element:
            if not isinstance(child.tag, str):  # a comment or processing instruction
                pass
            elif child.tag in _CONTAINERS:
                self._walk(child, (*chain, child), out)
            elif child.tag == _SPACES:
                count = child.get(TEXT_NS + "c") or "1"
                out.append(Leaf(chain, text=" " * int(count) if count.isdigit() else " "))
            else:
                out.append(Leaf(chain, objects=(child,), breaks=child.tag in _BREAKS))
            if child.tail:
                out.append(Leaf(chain, text=child.tail))

    def signature(self, container: Element) -> Hashable:
        if container.tag == SPAN:
            return (SPAN, tuple(sorted(container.attrib.items())))
        return id(container)

    def formatting_only(self, container: Element) -> bool:
        return container.tag == SPAN

    def clear(self, element: Element) -> None:
        element.text = None
        for child in list(element):
            element.remove(child)

    def copy(self, container: Element) -> Element:
        return empty_copy(container, self)

    def add_text(self, parent: Element, text: str) -> None:
        for index, piece in enumerate(_RUN_OF_SPACES.split(text)):
            if index % 2:  # a run of spaces: one, and `text:s` for the rest
                self._append_text(parent, " ")
                spaces = parent.makeelement(_SPACES, {TEXT_NS + "c": str(len(piece) - 1)})
                self.add_child(parent, spaces)
            elif piece:
                self._append_text(parent, piece)

    @staticmethod
    def _append_text(parent: Element, text: str) -> None:
        if len(parent):
            last = parent[-1]
            last.tail = (last.tail or "") + text
        else:
            parent.text = (parent.text or "") + text

    def add_child(self, parent: Element, child: Element) -> None:
        child.tail = None
        parent.append(child)
